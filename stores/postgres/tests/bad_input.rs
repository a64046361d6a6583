//! What the store does with what it cannot use: a schema from a newer build, a connection
//! lost in the middle of a commit or while idle, a URL that leads nowhere, rows that are not
//! what runcore wrote, and many processes opening a fresh database at once.

mod support;

use std::error::Error;
use std::thread;
use std::time::{Duration, Instant};

use postgres::Client;
use runcore::store::{
    CheckpointReader, CommitLog, CommittedThreadView, EventScope, StoreError, StoreHandles,
};
use runcore::{
    AuditDraft, CommitError, CommitOperation, Message, RunDisposition, RunId, StateCommand,
    StateScope, ThreadCommit, ThreadId,
};
use runcore_postgres::{PostgresStore, SCHEMA_VERSION, SchemaTooNew};
use serde_json::json;

fn commit(thread: &str, run: &str, text: &str) -> ThreadCommit {
    ThreadCommit::assemble(
        ThreadId::new(thread),
        RunDisposition::Running {
            run_id: RunId::new(run),
        },
        true,
        vec![Message::user(text)],
        vec![StateCommand::set(StateScope::Thread, "k", json!(text))],
        vec![AuditDraft::new("progress", json!({ "text": text }))],
    )
}

/// Waits until `check` holds, failing the test after 20 s.
fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting until {what}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// The backends that `blocker`'s backend is blocking.
fn blocked_by(observer: &mut Client, blocker: i32) -> Vec<i32> {
    observer
        .query(
            "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
            &[&blocker],
        )
        .unwrap_or_else(|e| panic!("pg_stat_activity: {e}"))
        .iter()
        .map(|row| row.get(0))
        .collect()
}

fn backend_pid(client: &mut Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .map(|row| row.get(0))
        .unwrap_or_else(|e| panic!("pg_backend_pid: {e}"))
}

fn terminate(observer: &mut Client, pid: i32) {
    observer
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .unwrap_or_else(|e| panic!("pg_terminate_backend: {e}"));
    wait_until("the terminated backend is gone", || {
        observer
            .query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", &[&pid])
            .map(|rows| rows.is_empty())
            .unwrap_or(false)
    });
}

fn is_unavailable_with_source(error: &StoreError) -> bool {
    matches!(
        error,
        StoreError::Unavailable {
            source: Some(_),
            ..
        }
    )
}

#[test]
fn a_schema_from_a_newer_build_is_refused_at_open_naming_the_version() {
    let Some(server) = support::server() else {
        return;
    };
    let store = server.scratch();
    let schema = store.0.guard().schema().to_owned();
    let mut sql = server.client_in(&schema);
    sql.execute("UPDATE runcore_schema SET version = 99", &[])
        .expect("set the version");

    let error = PostgresStore::connect_in_schema(&server.url, &schema)
        .expect_err("a newer schema must be refused");
    let text = error.to_string();
    assert!(text.contains("version 99"), "names what it found: {text}");
    assert!(
        text.contains(&format!("version {SCHEMA_VERSION}")),
        "names what it supports: {text}"
    );
    let too_new = error
        .source()
        .and_then(|s| s.downcast_ref::<SchemaTooNew>())
        .copied();
    assert_eq!(
        too_new,
        Some(SchemaTooNew {
            found: 99,
            supported: SCHEMA_VERSION
        })
    );
    // Refusing changed nothing.
    let version: i64 = sql
        .query_one("SELECT version FROM runcore_schema", &[])
        .map(|row| row.get(0))
        .expect("read the version");
    assert_eq!(version, 99);
}

#[test]
fn a_connection_lost_mid_commit_writes_nothing_and_the_next_commit_is_fenced() {
    let Some(server) = support::server() else {
        return;
    };
    let mut store = server.scratch();
    let thread = ThreadId::new("t");
    let first = CommitOperation::new(commit("t", "r", "first"), 0, 0);
    store.commit_operation(first).expect("first commit");
    let before_events = store
        .list_events(&EventScope::All, None, usize::MAX)
        .expect("events");

    // Hold, uncommitted, a row where the victim's message goes, so the victim's commit takes
    // its sequences, moves the thread's head and then waits in the middle of its transaction.
    let mut locker = server.client_in(store.0.guard().schema());
    let locker_pid = backend_pid(&mut locker);
    let mut held = locker.transaction().expect("begin");
    held.execute(
        "INSERT INTO runcore_messages (thread_id, position, message, digest)
         VALUES ('t'::bytea, 1, '{}', '')",
        &[],
    )
    .expect("hold the next message's place");

    let mut victim = store.open_handle().expect("a second connection");
    let second = CommitOperation::new(commit("t", "r", "second"), 1, 1);
    let attempt = second.clone();
    let waiting = thread::spawn(move || {
        let result = victim.commit_operation(attempt);
        (victim, result)
    });
    let mut observer = server.client();
    let mut victims = Vec::new();
    wait_until("the commit waits on the held row", || {
        victims = blocked_by(&mut observer, locker_pid);
        !victims.is_empty()
    });
    // Its messages, state, run and thread rows are written (uncommitted) by now.
    for pid in victims {
        terminate(&mut observer, pid);
    }
    let (mut victim, result) = waiting.join().expect("the committing thread");
    let error = result.expect_err("a commit whose connection was killed must fail");
    assert!(
        is_unavailable_with_source(&error),
        "a lost connection is Unavailable with the driver's error: {error:?}"
    );
    held.rollback().expect("release the held row");

    // Nothing of it was written.
    assert_eq!(store.thread_version(&thread).expect("version"), 1);
    assert_eq!(
        store.committed_messages(&thread).expect("messages"),
        vec![Message::user("first")]
    );
    assert_eq!(store.committed_state(&thread).expect("state").len(), 1);
    assert_eq!(
        store
            .list_events(&EventScope::All, None, usize::MAX)
            .expect("events"),
        before_events
    );
    assert_eq!(
        store.run(&RunId::new("r")).expect("run").map(|r| r.commits),
        Some(1)
    );

    // The same handle reconnects by itself; the retried operation lands once, and is fenced as
    // usual from then on. The killed attempt had taken commit sequence 2: a gap (SPEC §7.1
    // amended), so the retry lands at 3.
    let receipt = victim
        .commit_operation(second.clone())
        .expect("the retry after reconnecting");
    assert!(!receipt.duplicate, "it had not landed before");
    assert_eq!(receipt.record.thread_version, 2);
    assert_eq!(receipt.record.sequence, 3);
    let again = victim
        .commit_operation(second)
        .expect("a second retry is a duplicate");
    assert!(again.duplicate);
    let stale = CommitOperation::new(commit("t", "r2", "stale"), 0, 1);
    assert_eq!(
        victim.commit_operation(stale).map(|r| r.record),
        Err(StoreError::Rejected(CommitError::VersionConflict {
            expected: 1,
            actual: 2
        }))
    );
}

#[test]
fn a_connection_killed_while_idle_is_reopened_by_the_next_call() {
    let Some(server) = support::server() else {
        return;
    };
    // The store's connections carry an application name of their own, so the test can find
    // (and kill) exactly its backend.
    let name = server.unique_schema("idle");
    let url = server.url_with(&format!("application_name={name}"));
    let _cleanup = server.scratch_named(&name);
    let mut store = PostgresStore::connect_in_schema(&url, &name).expect("open");
    store
        .commit(commit("t", "r", "before"))
        .expect("first commit");
    let mut observer = server.client();
    let mut kill_store_backend = || {
        let pids: Vec<i32> = observer
            .query(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
                &[&name],
            )
            .expect("pg_stat_activity")
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert_eq!(pids.len(), 1, "one connection per store");
        for pid in pids {
            terminate(&mut observer, pid);
        }
    };

    // A read reconnects and reads once more; a commit reconnects before it begins.
    kill_store_backend();
    assert_eq!(store.thread_version(&ThreadId::new("t")).expect("read"), 1);
    kill_store_backend();
    store
        .commit(commit("t", "r", "after"))
        .expect("a commit after the connection was killed");
    assert_eq!(store.thread_version(&ThreadId::new("t")).expect("read"), 2);
}

#[test]
fn a_url_that_leads_nowhere_is_a_clear_error() {
    let error = PostgresStore::connect("this is not a url=").expect_err("not a URL");
    assert!(
        error.to_string().contains("not a PostgreSQL connection"),
        "{error}"
    );
    // Port 1 on loopback: nothing listens there.
    let error = PostgresStore::connect("postgresql://nobody@127.0.0.1:1/none")
        .expect_err("nothing listens on port 1");
    assert!(
        is_unavailable_with_source(&error),
        "a refused connection is Unavailable with the driver's error: {error:?}"
    );
    assert!(
        error.to_string().contains("connect to PostgreSQL"),
        "{error}"
    );
}

#[test]
fn rows_that_runcore_did_not_write_are_errors_not_panics() {
    let Some(server) = support::server() else {
        return;
    };
    let mut store = server.scratch();
    let thread = ThreadId::new("t");
    store.commit(commit("t", "r", "hello")).expect("commit");
    let mut sql = server.client_in(store.0.guard().schema());

    sql.batch_execute("UPDATE runcore_messages SET message = 'not json'")
        .expect("corrupt the message");
    let error = store.committed_messages(&thread).expect_err("bad message");
    assert!(error.to_string().contains("stored message"), "{error}");

    sql.batch_execute("UPDATE runcore_runs SET state = '{\"what\":1}'")
        .expect("corrupt the run state");
    let error = store.run(&RunId::new("r")).expect_err("bad run state");
    assert!(error.to_string().contains("run state"), "{error}");

    sql.batch_execute("UPDATE runcore_threads SET version = -5")
        .expect("corrupt the version");
    let error = store.thread_version(&thread).expect_err("negative version");
    assert!(error.to_string().contains("negative"), "{error}");

    sql.batch_execute("UPDATE runcore_threads SET thread_id = '\\xff'::bytea")
        .expect("corrupt the thread id");
    let error = store
        .threads(None, 10)
        .expect_err("an id that is not UTF-8");
    assert!(error.to_string().contains("not UTF-8"), "{error}");

    sql.batch_execute("UPDATE runcore_events SET payload = '{'")
        .expect("corrupt the payload");
    let error = store
        .list_events(&EventScope::All, None, 10)
        .expect_err("bad payload");
    assert!(error.to_string().contains("event payload"), "{error}");

    // A commit on a store whose sequence is gone fails cleanly and writes nothing — failing
    // inside the commit mutex, which it must not keep.
    sql.batch_execute("DROP SEQUENCE runcore_commit_sequence")
        .expect("drop the commit sequence");
    let error = store
        .commit(commit("u", "r-u", "x"))
        .expect_err("no commit sequence");
    assert!(matches!(
        error,
        StoreError::Rejected(_) | StoreError::Unavailable { .. }
    ));
    assert_eq!(store.thread_version(&ThreadId::new("u")).expect("read"), 0);
    // With the sequence back, a commit on another connection gets the mutex at once.
    sql.batch_execute("CREATE SEQUENCE runcore_commit_sequence AS bigint MINVALUE 1")
        .expect("the sequence again");
    let mut other = store.open_handle().expect("another connection");
    let (sender, outcome) = std::sync::mpsc::channel();
    let committing = thread::spawn(move || {
        let _ = sender.send(other.commit(commit("v", "r-v", "y")).map(|r| r.sequence));
    });
    let landed = outcome
        .recv_timeout(Duration::from_secs(10))
        .expect("the failed commit must have released the commit mutex");
    assert_eq!(landed.expect("a commit after the repair"), 1);
    committing.join().expect("the committing thread");
}

#[test]
fn a_search_path_with_no_schema_is_a_clear_error() {
    let Some(server) = support::server() else {
        return;
    };
    let url = server.url_with("options=-c%20search_path%3Dno_such_schema_anywhere");
    let error = PostgresStore::connect(&url).expect_err("no schema to create tables in");
    assert!(
        error
            .to_string()
            .contains("no schema on the connection's search_path"),
        "{error}"
    );
}

#[test]
fn processes_opening_a_fresh_schema_at_once_migrate_it_once() {
    let Some(server) = support::server() else {
        return;
    };
    let schema = server.unique_schema("race");
    let opened: Vec<Result<PostgresStore, StoreError>> = thread::scope(|scope| {
        let racers: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| PostgresStore::connect_in_schema(&server.url, &schema)))
            .collect();
        racers
            .into_iter()
            .map(|r| r.join().expect("a racer"))
            .collect()
    });
    // Dropped at the end of the test, with the schema.
    let _cleanup = server.scratch_named(&schema);
    for result in &opened {
        assert!(result.is_ok(), "{result:?}");
    }
}

#[test]
fn a_commit_waiting_on_its_own_rows_does_not_hold_up_other_threads() {
    let Some(server) = support::server() else {
        return;
    };
    let mut store = server.scratch();
    store
        .commit(commit("t", "r", "first"))
        .expect("first commit");
    let mut sql = server.client_in(store.0.guard().schema());
    // A row, uncommitted, where the next message of `t` goes: the commit on `t` waits on it
    // in the middle of its write, after it took its sequences.
    let mut held = sql.transaction().expect("begin");
    held.execute(
        "INSERT INTO runcore_messages (thread_id, position, message, digest)
         VALUES ('t'::bytea, 1, '{}', '')",
        &[],
    )
    .expect("plant a conflicting row");
    let (sender, outcome) = std::sync::mpsc::channel();
    let mut victim = store.open_handle().expect("a second connection");
    let waiting = thread::spawn(move || {
        let result = victim.commit(commit("t", "r", "second"));
        let _ = sender.send(result.map(|r| r.sequence));
    });
    let mut observer = server.client();
    let holder = {
        let row = held
            .query_one("SELECT pg_backend_pid()", &[])
            .expect("the holder's pid");
        row.get::<_, i32>(0)
    };
    wait_until("the commit on t waits on the planted row", || {
        !blocked_by(&mut observer, holder).is_empty()
    });
    // Meanwhile commits on other threads take the commit mutex and land: the waiting commit
    // does not hold it (nor any lock of theirs) while it writes.
    let mut others = store.open_handle().expect("a third connection");
    let (sender_others, landed) = std::sync::mpsc::channel();
    let other_writer = thread::spawn(move || {
        let results: Vec<_> = ["u", "v", "w"]
            .iter()
            .map(|t| others.commit(commit(t, &format!("r-{t}"), "x")).map(|_| ()))
            .collect();
        let _ = sender_others.send(results);
    });
    let results = landed
        .recv_timeout(Duration::from_secs(10))
        .expect("commits on other threads must not wait for the commit on t");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    other_writer.join().expect("the other writer");
    // The planted row commits: the commit on t fails on it, whole.
    held.commit().expect("commit the planted row");
    let result = outcome
        .recv_timeout(Duration::from_secs(10))
        .expect("the commit on t ends once the row is settled");
    assert!(
        matches!(result, Err(StoreError::Unavailable { .. })),
        "{result:?}"
    );
    waiting.join().expect("the committing thread");
    assert_eq!(store.thread_version(&ThreadId::new("t")).expect("read"), 1);
}

/// Whether `schema` exists, and how many tables, sequences, indexes and functions it holds.
fn schema_contents(sql: &mut Client, schema: &str) -> (bool, i64) {
    let exists: bool = sql
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&schema],
        )
        .expect("look for the schema")
        .get(0);
    let objects: i64 = sql
        .query_one(
            "SELECT (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                     WHERE n.nspname = $1)
                  + (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                     WHERE n.nspname = $1)",
            &[&schema],
        )
        .expect("count the schema's objects")
        .get(0);
    (exists, objects)
}

fn not_a_store(error: &StoreError) -> Option<runcore_postgres::NotAStore> {
    error
        .source()
        .and_then(|s| s.downcast_ref::<runcore_postgres::NotAStore>())
        .cloned()
}

#[test]
fn opening_to_look_creates_nothing_and_a_reconnect_keeps_looking() {
    let Some(server) = support::server() else {
        return;
    };
    let schema = server.unique_schema("look");
    let _guard = server.schema_guard(&schema);
    let mut sql = server.client();

    // No such schema: refused, and not created.
    let error = PostgresStore::open_existing_in_schema(&server.url, &schema)
        .expect_err("there is no schema");
    assert_eq!(
        not_a_store(&error).and_then(|e| e.schema),
        Some(schema.clone()),
        "{error}"
    );
    assert!(error.to_string().contains("not a runcore store"), "{error}");
    assert_eq!(schema_contents(&mut sql, &schema), (false, 0));

    // An empty schema: refused, and left empty.
    sql.batch_execute(&format!("CREATE SCHEMA {}", support::quote(&schema)))
        .expect("create the schema");
    let error = PostgresStore::open_existing_in_schema(&server.url, &schema)
        .expect_err("the schema holds no store");
    assert!(not_a_store(&error).is_some(), "{error}");
    assert_eq!(schema_contents(&mut sql, &schema), (true, 0));

    // Created by `connect_in_schema`, it opens; a commit through it lands.
    drop(PostgresStore::connect_in_schema(&server.url, &schema).expect("create the store"));
    let mut store =
        PostgresStore::open_existing_in_schema(&server.url, &schema).expect("open the store");
    store.commit(commit("t", "r1", "hello")).expect("commit");
    assert_eq!(
        store.thread_version(&ThreadId::new("t")).expect("version"),
        1
    );

    // The tables dropped behind its back: reconnecting refuses, and creates nothing again.
    sql.batch_execute(&format!(
        "DROP SCHEMA {0} CASCADE; CREATE SCHEMA {0}",
        support::quote(&schema)
    ))
    .expect("empty the schema");
    let error = store.reconnect().expect_err("the store is gone");
    assert!(not_a_store(&error).is_some(), "{error}");
    assert_eq!(schema_contents(&mut sql, &schema), (true, 0));
    let error = store.open_handle().expect_err("a second handle looks, too");
    assert!(not_a_store(&error).is_some(), "{error}");
}

#[test]
fn opening_to_look_on_the_search_path_refuses_a_database_without_a_store() {
    let Some(server) = support::server() else {
        return;
    };
    let schema = server.unique_schema("look_path");
    let _guard = server.schema_guard(&schema);
    let mut sql = server.client();
    sql.batch_execute(&format!("CREATE SCHEMA {}", support::quote(&schema)))
        .expect("create the schema");
    let url = server.url_with(&format!("options=-c%20search_path%3D{schema}"));
    let error = PostgresStore::open_existing(&url).expect_err("no store on the search_path");
    assert_eq!(
        not_a_store(&error).and_then(|e| e.schema),
        Some(schema.clone()),
        "{error}"
    );
    assert_eq!(schema_contents(&mut sql, &schema), (true, 0));
    // A search_path naming no schema at all: refused, nothing created.
    let missing = server.unique_schema("look_none");
    let url = server.url_with(&format!("options=-c%20search_path%3D{missing}"));
    let error = PostgresStore::open_existing(&url).expect_err("no schema on the search_path");
    assert_eq!(
        not_a_store(&error),
        Some(runcore_postgres::NotAStore { schema: None })
    );
    assert_eq!(schema_contents(&mut sql, &missing), (false, 0));
    // `connect` there creates the store; then looking opens it.
    drop(
        PostgresStore::connect(&server.url_with(&format!("options=-c%20search_path%3D{schema}")))
            .expect("create"),
    );
    let url = server.url_with(&format!("options=-c%20search_path%3D{schema}"));
    PostgresStore::open_existing(&url).expect("open the store");
}
