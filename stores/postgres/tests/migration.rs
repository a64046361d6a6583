//! A store written by a build of schema version 1 (the counter row) opens with this one: the
//! migration to version 2 keeps every row, and the sequences go on where the counter row
//! stopped.

mod support;

use runcore::store::{CheckpointReader, CommitLog, CommittedThreadView, EventScope};
use runcore::{
    AuditDraft, CommitOperation, Message, RunDisposition, RunId, ThreadCommit, ThreadId,
};
use runcore_postgres::SCHEMA_VERSION;
use serde_json::json;

/// What a build of schema version 1 created (its migration, as it shipped), and the rows of
/// one commit it wrote: thread `t`, run `t/run`, one message, its events, commit sequence 1,
/// the operation `(t/run, 0)`.
const VERSION_1: &str = r#"
CREATE TABLE runcore_schema (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    version  bigint NOT NULL
);
INSERT INTO runcore_schema (version) VALUES (1);
CREATE TABLE runcore_counters (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    last_commit bigint NOT NULL,
    last_event  bigint NOT NULL
);
INSERT INTO runcore_counters (last_commit, last_event) VALUES (0, 0);
CREATE TABLE runcore_threads (
    thread_id         bytea PRIMARY KEY,
    version           bigint NOT NULL,
    message_count     bigint NOT NULL,
    state_count       bigint NOT NULL,
    latest_run        bytea,
    transcript_digest text NOT NULL
);
CREATE TABLE runcore_runs (
    run_id    bytea PRIMARY KEY,
    thread_id bytea NOT NULL,
    state     text NOT NULL,
    commits   bigint NOT NULL,
    ticket    text
);
CREATE INDEX runcore_runs_pending ON runcore_runs (run_id) WHERE ticket IS NOT NULL;
CREATE TABLE runcore_messages (
    thread_id bytea NOT NULL,
    position  bigint NOT NULL,
    message   text NOT NULL,
    digest    text NOT NULL,
    PRIMARY KEY (thread_id, position)
);
CREATE TABLE runcore_state (
    thread_id bytea NOT NULL,
    position  bigint NOT NULL,
    command   text NOT NULL,
    PRIMARY KEY (thread_id, position)
);
CREATE TABLE runcore_events (
    sequence        bigint PRIMARY KEY,
    commit_sequence bigint NOT NULL,
    thread_id       bytea NOT NULL,
    run_id          bytea NOT NULL,
    kind            bytea NOT NULL,
    payload         text NOT NULL
);
CREATE INDEX runcore_events_thread ON runcore_events (thread_id, sequence);
CREATE INDEX runcore_events_run ON runcore_events (run_id, sequence);
CREATE FUNCTION runcore_fail(message text) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $fail$
BEGIN
    RAISE EXCEPTION USING MESSAGE = message, ERRCODE = 'data_corrupted';
END
$fail$;
CREATE TABLE runcore_operations (
    run_id         bytea NOT NULL,
    ordinal        bigint NOT NULL,
    payload_hash   bytea NOT NULL,
    sequence       bigint NOT NULL,
    thread_version bigint NOT NULL,
    PRIMARY KEY (run_id, ordinal)
);
"#;

fn first_commit() -> ThreadCommit {
    ThreadCommit::assemble(
        ThreadId::new("t"),
        RunDisposition::Running {
            run_id: RunId::new("t/run"),
        },
        true,
        vec![Message::user("hello")],
        vec![],
        vec![
            AuditDraft::new("progress", json!({ "n": 1 })),
            AuditDraft::new("progress", json!({ "n": 2 })),
        ],
    )
}

#[test]
fn a_version_1_store_opens_migrated_and_goes_on_where_it_stopped() {
    let Some(server) = support::server() else {
        return;
    };
    // The rows a version-1 build wrote for `first_commit`, taken from what this build writes
    // for the same commit in a store of its own (same JSON, digest and hash), minus `xid`.
    let reference_schema = server.unique_schema("v1ref");
    let mut reference = server.scratch_named(&reference_schema);
    let operation = CommitOperation::new(first_commit(), 0, 0);
    let hash = operation.payload_hash.clone();
    reference.commit_operation(operation).expect("reference");
    let schema = server.unique_schema("v1");
    let guard = server.schema_guard(&schema);
    let mut sql = server.client();
    sql.batch_execute(&format!("CREATE SCHEMA {}", support::quote(&schema)))
        .expect("schema");
    let mut sql = server.client_in(&schema);
    sql.batch_execute(VERSION_1).expect("the version-1 layout");
    let copy = |table: &str, columns: &str| {
        format!(
            "INSERT INTO {table} ({columns}) SELECT {columns} FROM {}.{table}",
            support::quote(&reference_schema)
        )
    };
    sql.batch_execute(&format!(
        "{}; {}; {}; {}; {};
         UPDATE runcore_counters SET last_commit = 1,
             last_event = (SELECT max(sequence) FROM runcore_events)",
        copy(
            "runcore_threads",
            "thread_id, version, message_count, state_count, latest_run, transcript_digest"
        ),
        copy("runcore_runs", "run_id, thread_id, state, commits, ticket"),
        copy("runcore_messages", "thread_id, position, message, digest"),
        copy(
            "runcore_events",
            "sequence, commit_sequence, thread_id, run_id, kind, payload"
        ),
        copy(
            "runcore_operations",
            "run_id, ordinal, payload_hash, sequence, thread_version"
        ),
    ))
    .expect("the rows of one version-1 commit");
    let expected_events = reference
        .list_events(&EventScope::All, None, 10)
        .expect("reference events");
    drop(reference);

    let mut store = runcore_postgres::PostgresStore::connect_in_schema(&server.url, &schema)
        .expect("a version-1 store opens");
    let version: i64 = sql
        .query_one("SELECT version FROM runcore_schema", &[])
        .expect("version")
        .get(0);
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 5);
    let counters: bool = sql
        .query_one("SELECT to_regclass('runcore_counters') IS NULL", &[])
        .expect("counters")
        .get(0);
    assert!(counters, "the counter row is gone");

    // What version 1 wrote reads back the same.
    let thread = ThreadId::new("t");
    assert_eq!(store.thread_version(&thread).expect("version"), 1);
    assert_eq!(
        store.committed_messages(&thread).expect("messages"),
        vec![Message::user("hello")]
    );
    assert_eq!(
        store
            .list_events(&EventScope::All, None, 10)
            .expect("events"),
        expected_events
    );
    // Its operation's receipt is still there: a retry is a duplicate.
    let retry = store
        .commit_operation(CommitOperation::new(first_commit(), 0, 0))
        .expect("retry");
    assert!(retry.duplicate);
    assert_eq!(retry.payload_hash, hash);
    assert_eq!((retry.record.sequence, retry.record.thread_version), (1, 1));
    // And the sequences go on from the counter row: commit 2, the events after the last.
    let last_event = expected_events.last().map_or(0, |e| e.sequence);
    let next = ThreadCommit::assemble(
        thread.clone(),
        RunDisposition::Running {
            run_id: RunId::new("t/run"),
        },
        true,
        vec![Message::user("again")],
        vec![],
        vec![
            AuditDraft::new("progress", json!({ "n": 3 })),
            AuditDraft::new("progress", json!({ "n": 4 })),
        ],
    );
    let receipt = store
        .commit_operation(CommitOperation::new(next, 1, 1))
        .expect("a commit after the migration");
    assert_eq!(
        (receipt.record.sequence, receipt.record.thread_version),
        (2, 2)
    );
    let events = store
        .list_events(&EventScope::All, Some(last_event), 10)
        .expect("new events");
    assert!(events.len() >= 2, "{events:?}");
    for (k, event) in events.iter().enumerate() {
        assert_eq!(
            (event.sequence, event.commit_sequence),
            (last_event + 1 + k as u64, 2)
        );
    }
    // Reads as of a version (schema 5): a version committed after the migration reads back;
    // one committed before it was never recorded, and says so instead of guessing.
    let at_2 = store
        .thread_as_of(&thread, 2)
        .expect("version 2 reads")
        .expect("version 2 exists");
    assert_eq!(at_2.commit_sequence, 2);
    assert_eq!(
        at_2.messages,
        vec![Message::user("hello"), Message::user("again")]
    );
    let before = store
        .thread_as_of(&thread, 1)
        .expect_err("version 1 was committed before versions were recorded");
    assert!(before.to_string().contains("schema version 5"), "{before}");
    drop(store);
    drop(guard);
}
