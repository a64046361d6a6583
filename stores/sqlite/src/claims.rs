//! Thread claims and due work (SPEC §7.2, §7.3) for [`SqliteStore`]: each call reads the
//! thread's claim row, lets the core decide ([`decide_claim`], [`decide_renew`],
//! [`decide_release`]), and writes what it decided, in one `IMMEDIATE` transaction, so two
//! processes racing for one thread are serialized by SQLite and exactly one is granted.
//!
//! Store time is the caller's `now_ms` (one machine, one clock). A fenced commit without
//! `now_ms` is checked at the machine's wall clock.

use rusqlite::{OptionalExtension, Transaction, params};

use runcore::store::{
    Claim, ClaimGrant, ClaimRecord, ClaimRequest, DueReason, DueWork, StoreError, ThreadClaims,
    decide_claim, decide_release, decide_renew, due_order,
};
use runcore::{RunId, ThreadId};

use crate::SqliteStore;
use crate::codec::{bound, count, int, limit};
use crate::error::backend;

/// The thread's claim row, live or not.
pub(crate) fn load_claim(
    conn: &rusqlite::Connection,
    thread: &ThreadId,
) -> Result<Option<ClaimRecord>, StoreError> {
    let row = conn
        .prepare_cached(
            "SELECT owner, request_id, epoch, expires_at_ms, released_at_ms FROM thread_claims \
             WHERE thread_id = ?1",
        )
        .and_then(|mut s| {
            s.query_row([thread.as_str()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                ))
            })
            .optional()
        })
        .map_err(|e| backend("read the thread's claim", e))?;
    let Some((owner, request_id, epoch, expires, released)) = row else {
        return Ok(None);
    };
    Ok(Some(ClaimRecord {
        owner,
        request_id,
        epoch: count(epoch, "claim epoch")?,
        expires_at_ms: count(expires, "claim expiry")?,
        released_at_ms: released.map(|r| count(r, "claim release")).transpose()?,
    }))
}

fn store_claim(
    tx: &Transaction<'_>,
    thread: &ThreadId,
    record: &ClaimRecord,
) -> Result<(), StoreError> {
    let ends = record
        .released_at_ms
        .map_or(record.expires_at_ms, |r| r.min(record.expires_at_ms));
    tx.prepare_cached(
        "INSERT INTO thread_claims (thread_id, owner, request_id, epoch, expires_at_ms, \
         released_at_ms, ends_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
         ON CONFLICT (thread_id) DO UPDATE SET owner = excluded.owner, \
         request_id = excluded.request_id, epoch = excluded.epoch, \
         expires_at_ms = excluded.expires_at_ms, released_at_ms = excluded.released_at_ms, \
         ends_at_ms = excluded.ends_at_ms",
    )
    .and_then(|mut s| {
        s.execute(params![
            thread.as_str(),
            record.owner,
            record.request_id,
            int(record.epoch),
            bound(record.expires_at_ms),
            record.released_at_ms.map(bound),
            bound(ends),
        ])
    })
    .map_err(|e| backend("write the thread's claim", e))?;
    Ok(())
}

impl ThreadClaims for SqliteStore {
    fn claim_thread(&mut self, request: &ClaimRequest, now_ms: u64) -> Result<Claim, StoreError> {
        runcore::store::check_claim_request(request)?;
        let tx = self.begin()?;
        let current = load_claim(&tx, &request.thread_id)?;
        let claim = match decide_claim(request, current.as_ref(), now_ms)? {
            ClaimGrant::Same(claim) => claim,
            ClaimGrant::Granted(record) => {
                store_claim(&tx, &request.thread_id, &record)?;
                record.claim(&request.thread_id)
            }
        };
        tx.commit().map_err(|e| backend("commit the claim", e))?;
        Ok(claim)
    }

    fn renew_claim(
        &mut self,
        claim: &Claim,
        lease_ms: u64,
        now_ms: u64,
    ) -> Result<Claim, StoreError> {
        let tx = self.begin()?;
        let current = load_claim(&tx, &claim.thread_id)?;
        let record = decide_renew(claim, lease_ms, current.as_ref(), now_ms)?;
        store_claim(&tx, &claim.thread_id, &record)?;
        tx.commit().map_err(|e| backend("commit the renew", e))?;
        Ok(record.claim(&claim.thread_id))
    }

    fn release_claim(&mut self, claim: &Claim, now_ms: u64) -> Result<(), StoreError> {
        let tx = self.begin()?;
        let current = load_claim(&tx, &claim.thread_id)?;
        if let Some(record) = decide_release(claim, current.as_ref(), now_ms) {
            store_claim(&tx, &claim.thread_id, &record)?;
        }
        tx.commit().map_err(|e| backend("commit the release", e))?;
        Ok(())
    }

    fn thread_claim(&self, thread: &ThreadId, now_ms: u64) -> Result<Option<Claim>, StoreError> {
        Ok(load_claim(&self.conn, thread)?
            .filter(|record| record.is_live(now_ms))
            .map(|record| record.claim(thread)))
    }

    fn due_work(&self, now_ms: u64, limit_items: usize) -> Result<Vec<DueWork>, StoreError> {
        let page = limit(limit_items);
        let mut due = Vec::new();
        let mut deadlines = self
            .conn
            .prepare_cached(
                "SELECT thread_id, run_id, deadline_ms FROM runs \
                 WHERE deadline_ms IS NOT NULL AND deadline_ms <= ?1 \
                 ORDER BY deadline_ms, thread_id, run_id LIMIT ?2",
            )
            .map_err(|e| backend("prepare the deadline scan", e))?;
        let rows = deadlines
            .query_map(params![bound(now_ms), page], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .map_err(|e| backend("scan the deadlines", e))?;
        for row in rows {
            let (thread, run, deadline) = row.map_err(|e| backend("read a deadline", e))?;
            due.push(DueWork {
                thread_id: ThreadId::new(thread),
                run_id: RunId::new(run),
                reason: DueReason::Deadline {
                    deadline_ms: count(deadline, "deadline")?,
                },
            });
        }
        let mut orphans = self
            .conn
            .prepare_cached(
                // From the running runs (their partial index holds only those), each the
                // latest of its thread, to the thread's claim: never every claim ever ended
                // (CROSS JOIN keeps SQLite to that order).
                "SELECT c.thread_id, t.latest_run, c.ends_at_ms \
                 FROM runs r INDEXED BY runs_running \
                 CROSS JOIN threads t ON t.thread_id = r.thread_id AND t.latest_run = r.run_id \
                 CROSS JOIN thread_claims c ON c.thread_id = r.thread_id \
                 WHERE r.state = '{\"type\":\"running\"}' AND c.ends_at_ms <= ?1 \
                 ORDER BY c.ends_at_ms, c.thread_id LIMIT ?2",
            )
            .map_err(|e| backend("prepare the orphan scan", e))?;
        let rows = orphans
            .query_map(params![bound(now_ms), page], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .map_err(|e| backend("scan the orphans", e))?;
        for row in rows {
            let (thread, run, ended) = row.map_err(|e| backend("read an orphan", e))?;
            due.push(DueWork {
                thread_id: ThreadId::new(thread),
                run_id: RunId::new(run),
                reason: DueReason::Orphaned {
                    claim_expired_at_ms: count(ended, "claim end")?,
                },
            });
        }
        due.sort_by(due_order);
        due.truncate(limit_items);
        Ok(due)
    }
}
