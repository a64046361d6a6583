//! Thread claims and due work (SPEC §7.2, §7.3) for [`PostgresStore`].
//!
//! **Store time is the server's clock** (`clock_timestamp()` in milliseconds): the caller's
//! `now_ms` is ignored, so worker clocks that are minutes off change nothing about who owns a
//! thread or what is due.
//!
//! A claim call is one transaction: make sure the thread's claim row exists (`INSERT … ON
//! CONFLICT DO NOTHING`, epoch 0), lock it (`SELECT … FOR UPDATE`) together with the server's
//! time, let the core decide ([`decide_claim`], [`decide_renew`], [`decide_release`]), and
//! write the decision. Two owners racing for one thread queue on that row lock, and the
//! second decides on what the first wrote: exactly one is granted.
//!
//! Deadlines are read through an expression index on the ticket's `deadline_ms` (the ticket
//! is stored while the run awaits, and only then), so no separate timer row is written for a
//! deadline to fire: committed rows alone find it.

use postgres::Transaction;
use runcore::store::{
    Claim, ClaimGrant, ClaimRecord, ClaimRequest, DueReason, DueWork, StoreError, ThreadClaims,
    decide_claim, decide_release, decide_renew, due_order,
};
use runcore::{RunId, ThreadId};

use crate::codec::{bound, column, count, db_error, limit, text_of};
use crate::store::PostgresStore;

/// The server's clock in Unix-epoch milliseconds, as SQL.
pub(crate) const SERVER_NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// A claim row as stored; epoch 0 means "never granted" (the row only holds the lock).
fn record_of(row: &postgres::Row) -> Result<Option<ClaimRecord>, StoreError> {
    let epoch: i64 = column(row, 2, "the claim epoch")?;
    if epoch == 0 {
        return Ok(None);
    }
    Ok(Some(ClaimRecord {
        owner: column(row, 0, "the claim owner")?,
        request_id: column(row, 1, "the claim request id")?,
        epoch: count("claim epoch", epoch)?,
        expires_at_ms: count("claim expiry", column(row, 3, "the claim expiry")?)?,
        released_at_ms: column::<Option<i64>>(row, 4, "the claim release")?
            .map(|at| count("claim release", at))
            .transpose()?,
    }))
}

/// Locks the thread's claim row (creating it first if needed) and reads it with the server's
/// time.
fn lock_claim(
    tx: &mut Transaction<'_>,
    thread: &ThreadId,
) -> Result<(Option<ClaimRecord>, u64), StoreError> {
    let key = thread.as_str().as_bytes();
    tx.execute(
        "INSERT INTO runcore_claims (thread_id, owner, request_id, epoch, expires_at_ms, \
         ends_at_ms) VALUES ($1, '', '', 0, 0, 0) ON CONFLICT (thread_id) DO NOTHING",
        &[&key],
    )
    .map_err(|e| db_error("claim: create the claim row", e))?;
    let row = tx
        .query_one(
            &format!(
                "SELECT owner, request_id, epoch, expires_at_ms, released_at_ms, {SERVER_NOW_MS} \
                 FROM runcore_claims WHERE thread_id = $1 FOR UPDATE"
            ),
            &[&key],
        )
        .map_err(|e| db_error("claim: lock the claim row", e))?;
    let now: i64 = column(&row, 5, "the server's clock")?;
    Ok((record_of(&row)?, count("server clock", now)?))
}

fn store_claim(
    tx: &mut Transaction<'_>,
    thread: &ThreadId,
    record: &ClaimRecord,
) -> Result<(), StoreError> {
    let ends = record
        .released_at_ms
        .map_or(record.expires_at_ms, |r| r.min(record.expires_at_ms));
    tx.execute(
        "UPDATE runcore_claims SET owner = $2, request_id = $3, epoch = $4, expires_at_ms = $5, \
         released_at_ms = $6, ends_at_ms = $7 WHERE thread_id = $1",
        &[
            &thread.as_str().as_bytes(),
            &record.owner,
            &record.request_id,
            &bound(record.epoch),
            &bound(record.expires_at_ms),
            &record.released_at_ms.map(bound),
            &bound(ends),
        ],
    )
    .map_err(|e| db_error("claim: write the claim", e))?;
    Ok(())
}

impl PostgresStore {
    /// Runs `work` in one transaction on the write connection.
    fn in_claim_transaction<T>(
        &mut self,
        what: &str,
        work: impl FnOnce(&mut Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let (session, _) = self.session_for_write()?;
        let mut tx = session
            .client
            .transaction()
            .map_err(|e| db_error(&format!("{what}: begin"), e))?;
        let value = work(&mut tx)?;
        tx.commit()
            .map_err(|e| db_error(&format!("{what}: commit"), e))?;
        Ok(value)
    }
}

impl ThreadClaims for PostgresStore {
    fn claim_thread(&mut self, request: &ClaimRequest, _now_ms: u64) -> Result<Claim, StoreError> {
        runcore::store::check_claim_request(request)?;
        self.in_claim_transaction("claim_thread", |tx| {
            let (current, now) = lock_claim(tx, &request.thread_id)?;
            match decide_claim(request, current.as_ref(), now)? {
                ClaimGrant::Same(claim) => Ok(claim),
                ClaimGrant::Granted(record) => {
                    store_claim(tx, &request.thread_id, &record)?;
                    Ok(record.claim(&request.thread_id))
                }
            }
        })
    }

    fn renew_claim(
        &mut self,
        claim: &Claim,
        lease_ms: u64,
        _now_ms: u64,
    ) -> Result<Claim, StoreError> {
        runcore::store::check_lease(lease_ms)?;
        self.in_claim_transaction("renew_claim", |tx| {
            let (current, now) = lock_claim(tx, &claim.thread_id)?;
            let record = decide_renew(claim, lease_ms, current.as_ref(), now)?;
            store_claim(tx, &claim.thread_id, &record)?;
            Ok(record.claim(&claim.thread_id))
        })
    }

    fn release_claim(&mut self, claim: &Claim, _now_ms: u64) -> Result<(), StoreError> {
        self.in_claim_transaction("release_claim", |tx| {
            let (current, now) = lock_claim(tx, &claim.thread_id)?;
            if let Some(record) = decide_release(claim, current.as_ref(), now) {
                store_claim(tx, &claim.thread_id, &record)?;
            }
            Ok(())
        })
    }

    fn thread_claim(&self, thread: &ThreadId, _now_ms: u64) -> Result<Option<Claim>, StoreError> {
        self.read(|session| {
            let rows = session
                .client
                .query(
                    &format!(
                        "SELECT owner, request_id, epoch, expires_at_ms, released_at_ms, \
                         {SERVER_NOW_MS} FROM runcore_claims WHERE thread_id = $1"
                    ),
                    &[&thread.as_str().as_bytes()],
                )
                .map_err(|e| db_error("thread_claim", e))?;
            let Some(row) = rows.first() else {
                return Ok(None);
            };
            let now = count("server clock", column(row, 5, "the server's clock")?)?;
            Ok(record_of(row)?
                .filter(|record| record.is_live(now))
                .map(|record| record.claim(thread)))
        })
    }

    fn due_work(&self, _now_ms: u64, limit_items: usize) -> Result<Vec<DueWork>, StoreError> {
        let page = limit(limit_items);
        self.read(|session| {
            let deadlines = session
                .client
                .query(
                    &format!(
                        // `(SELECT now)` is computed once, before the scan, so the time is an
                        // index condition (a volatile call in the WHERE would be a filter
                        // over every ticket).
                        "SELECT thread_id, run_id, deadline_ms FROM runcore_runs \
                         WHERE deadline_ms IS NOT NULL AND deadline_ms <= (SELECT {SERVER_NOW_MS}) \
                         ORDER BY deadline_ms, thread_id, run_id LIMIT $1"
                    ),
                    &[&page],
                )
                .map_err(|e| db_error("due_work: the deadlines", e))?;
            let orphans = session
                .client
                .query(
                    &format!(
                        // From the running runs, each the latest of its thread, to the
                        // thread's claim: never every claim that ever ended.
                        "SELECT t.thread_id, t.latest_run, c.ends_at_ms FROM runcore_runs r \
                         JOIN runcore_threads t \
                           ON t.thread_id = r.thread_id AND t.latest_run = r.run_id \
                         JOIN runcore_claims c ON c.thread_id = r.thread_id \
                         WHERE r.state = '{{\"type\":\"running\"}}' \
                         AND c.epoch > 0 AND c.ends_at_ms <= (SELECT {SERVER_NOW_MS}) \
                         ORDER BY c.ends_at_ms, c.thread_id LIMIT $1"
                    ),
                    &[&page],
                )
                .map_err(|e| db_error("due_work: the orphans", e))?;
            let mut due = Vec::with_capacity(deadlines.len() + orphans.len());
            for row in &deadlines {
                due.push(DueWork {
                    thread_id: ThreadId::new(text_of("thread id", column(row, 0, "thread")?)?),
                    run_id: RunId::new(text_of("run id", column(row, 1, "run")?)?),
                    reason: DueReason::Deadline {
                        deadline_ms: count("deadline", column(row, 2, "the deadline")?)?,
                    },
                });
            }
            for row in &orphans {
                due.push(DueWork {
                    thread_id: ThreadId::new(text_of("thread id", column(row, 0, "thread")?)?),
                    run_id: RunId::new(text_of("run id", column(row, 1, "run")?)?),
                    reason: DueReason::Orphaned {
                        claim_expired_at_ms: count("claim end", column(row, 2, "the claim end")?)?,
                    },
                });
            }
            due.sort_by(due_order);
            due.truncate(limit_items);
            Ok(due)
        })
    }
}
