//! Opening a path (issue "Bad input", SPEC §12.2): what is created, what is refused, and that a
//! refused open names what it found and leaves everything exactly as it was — the file's bytes
//! and the directory's entries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use runcore::store::{CheckpointReader, CommitLog, CommittedThreadView, EventScope, StoreError};
use runcore::{CommitOperation, Message, RunDisposition, ThreadCommit, ThreadId};
use runcore_sqlite::{OpenCheck, OpenError, SqliteOptions, SqliteStore};
use tempfile::TempDir;

fn temp() -> TempDir {
    TempDir::with_prefix_in("sqlite-open-", env!("CARGO_TARGET_TMPDIR"))
        .unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"))
}

fn open(path: &Path) -> Result<SqliteStore, OpenError> {
    SqliteStore::open(path, SqliteOptions::default())
}

/// Every entry of a directory with its bytes (directories as `None`).
fn listing(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let path = entry.path();
            let bytes = if path.is_dir() {
                None
            } else {
                Some(std::fs::read(&path).unwrap())
            };
            (entry.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect()
}

/// Opens `path`, expects a refusal with `code`, and checks that the directory is exactly as
/// before. Returns the message.
fn refused(path: &Path, code: &str) -> String {
    // The nearest directory that exists: nothing in it may change.
    let dir = path
        .ancestors()
        .skip(1)
        .find(|dir| dir.is_dir())
        .unwrap_or(Path::new("."));
    let before = listing(dir);
    let error = match open(path) {
        Ok(_) => panic!("{} was opened; expected a `{code}` refusal", path.display()),
        Err(error) => error,
    };
    assert_eq!(error.code(), code, "{error}");
    assert_eq!(
        listing(dir),
        before,
        "a refused open changed the directory ({error})"
    );
    let message = error.to_string();
    assert!(
        message.contains(&path.display().to_string()),
        "the message names the path: {message}"
    );
    message
}

fn commit(thread: &str, run: &str, text: &str) -> ThreadCommit {
    ThreadCommit::assemble(
        ThreadId::new(thread),
        RunDisposition::Running { run_id: run.into() },
        true,
        vec![Message::user(text)],
        vec![],
        vec![],
    )
}

/// A closed store file holding `messages` messages of about 1 KB on one thread.
fn store_with_data(path: &Path, messages: usize) {
    let mut store = open(path).unwrap();
    for i in 0..messages {
        let text = format!("message {i} ") + &"x".repeat(1000);
        store.commit(commit("t", "t/run-1", &text)).unwrap();
    }
}

fn can_commit_and_read(path: &Path) {
    let mut store = open(path).unwrap_or_else(|e| panic!("{e}"));
    let receipt = store
        .commit_operation(CommitOperation::new(commit("t", "t/run-1", "hi"), 0, 0))
        .unwrap();
    assert_eq!(receipt.record.sequence, 1);
    drop(store);
    let store = open(path).unwrap();
    assert_eq!(
        store.committed_messages(&ThreadId::new("t")).unwrap(),
        vec![Message::user("hi")]
    );
}

// ----- what becomes a new store ----------------------------------------------------------------

#[test]
fn a_missing_file_in_an_existing_directory_is_created() {
    let dir = temp();
    let path = dir.path().join("new.sqlite");
    can_commit_and_read(&path);
    assert!(path.is_file());
}

#[test]
fn a_zero_byte_file_becomes_a_new_store() {
    let dir = temp();
    let path = dir.path().join("empty.sqlite");
    std::fs::write(&path, b"").unwrap();
    can_commit_and_read(&path);
}

#[test]
fn a_sqlite_database_without_tables_becomes_a_new_store() {
    let dir = temp();
    let path = dir.path().join("blank.sqlite");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        // Writes the header (the file is no longer empty) but creates nothing.
        conn.pragma_update(None, "user_version", 7).unwrap();
    }
    assert!(std::fs::metadata(&path).unwrap().len() > 0);
    can_commit_and_read(&path);
}

#[test]
fn a_store_reopens_with_its_data_and_a_bare_file_name_works() {
    let dir = temp();
    let path = dir.path().join("store.sqlite");
    store_with_data(&path, 3);
    let store = open(&path).unwrap();
    assert_eq!(store.thread_version(&ThreadId::new("t")).unwrap(), 3);
    assert_eq!(store.path(), Some(path.as_path()));
    // A path without a directory part is a file in the current directory, so an empty path
    // is the current directory itself (never SQLite's private temporary database).
    let error = open(Path::new("")).unwrap_err();
    assert_eq!(error.code(), "is_directory", "{error}");
}

// ----- what is refused ------------------------------------------------------------------------

#[test]
fn a_missing_directory_is_refused_and_not_created() {
    let dir = temp();
    let path = dir.path().join("no-such-dir").join("store.sqlite");
    let message = refused(&path, "missing_directory");
    assert!(message.contains("does not exist"), "{message}");
    assert!(!dir.path().join("no-such-dir").exists());
}

#[test]
fn a_file_where_the_directory_should_be_is_refused() {
    let dir = temp();
    std::fs::write(dir.path().join("plain"), b"x").unwrap();
    let message = refused(
        &dir.path().join("plain").join("store.sqlite"),
        "parent_not_directory",
    );
    assert!(message.contains("is not a directory"), "{message}");
}

#[test]
fn a_directory_is_refused() {
    let dir = temp();
    let path = dir.path().join("a-directory");
    std::fs::create_dir(&path).unwrap();
    let message = refused(&path, "is_directory");
    assert!(message.contains("it is a directory"), "{message}");
    assert_eq!(std::fs::read_dir(&path).unwrap().count(), 0);
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_naming_its_first_bytes() {
    let dir = temp();
    let text = dir.path().join("notes.json");
    std::fs::write(&text, br#"{"kind":"not a database"}"#).unwrap();
    let message = refused(&text, "not_sqlite");
    assert!(
        message.contains(r#"the text "{\"kind\":\"not a databa"#),
        "{message}"
    );
    let binary = dir.path().join("image.png");
    std::fs::write(
        &binary,
        [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0],
    )
    .unwrap();
    let message = refused(&binary, "not_sqlite");
    assert!(
        message.contains("the bytes 89 50 4e 47 0d 0a 1a 0a 00 00, 10 bytes in all"),
        "{message}"
    );
}

#[test]
fn a_truncated_or_corrupted_store_is_refused_as_corrupt() {
    let dir = temp();
    let original = dir.path().join("original.sqlite");
    store_with_data(&original, 200);
    let bytes = std::fs::read(&original).unwrap();
    assert!(bytes.len() > 100_000, "the store spans many pages");

    // Cut in half.
    let truncated = dir.path().join("truncated.sqlite");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let message = refused(&truncated, "corrupt");
    assert!(message.contains("corrupt SQLite database"), "{message}");

    // A run of pages in the middle overwritten.
    let scribbled = dir.path().join("scribbled.sqlite");
    let mut damaged = bytes.clone();
    let middle = bytes.len() / 2 / 4096 * 4096;
    damaged[middle..middle + 3 * 4096].fill(0xAB);
    std::fs::write(&scribbled, &damaged).unwrap();
    let message = refused(&scribbled, "corrupt");
    assert!(message.contains("quick_check"), "{message}");

    // The header's fields after the magic string destroyed.
    let header = dir.path().join("header.sqlite");
    let mut damaged = bytes.clone();
    damaged[16..100].fill(0xFF);
    std::fs::write(&header, &damaged).unwrap();
    refused(&header, "corrupt");

    // Only the magic string and a few bytes.
    let stub = dir.path().join("stub.sqlite");
    std::fs::write(&stub, &bytes[..40]).unwrap();
    let message = refused(&stub, "corrupt");
    assert!(
        message.contains("40 bytes, shorter than a SQLite header"),
        "{message}"
    );
}

#[test]
fn a_foreign_sqlite_database_is_refused_naming_its_tables() {
    let dir = temp();
    for (name, journal) in [("rollback.sqlite", "DELETE"), ("wal.sqlite", "WAL")] {
        let path = dir.path().join(name);
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            let _: String = conn
                .pragma_update_and_check(None, "journal_mode", journal, |r| r.get(0))
                .unwrap();
            conn.execute_batch(
                "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);
                 INSERT INTO customers (name) VALUES ('Ada');
                 CREATE TABLE orders (id INTEGER PRIMARY KEY);
                 CREATE INDEX orders_id ON orders (id);",
            )
            .unwrap();
        }
        let message = refused(&path, "foreign_database");
        assert!(
            message.contains("it holds table customers, table orders, index orders_id"),
            "{message}"
        );
        let conn = rusqlite::Connection::open(&path).unwrap();
        let name: String = conn
            .query_row("SELECT name FROM customers", [], |r| r.get(0))
            .unwrap();
        assert_eq!(name, "Ada");
    }
}

#[test]
fn a_store_of_a_newer_schema_is_refused_naming_both_versions() {
    let dir = temp();
    let path = dir.path().join("future.sqlite");
    store_with_data(&path, 2);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute("UPDATE runcore_schema SET version = 99", [])
            .unwrap();
    }
    let message = refused(&path, "newer_schema");
    assert!(
        message.contains(&format!(
            "schema version 99, newer than version {}",
            runcore_sqlite::SCHEMA_VERSION
        )),
        "{message}"
    );
}

#[test]
fn a_store_missing_a_table_is_refused_as_damaged() {
    let dir = temp();
    let path = dir.path().join("damaged.sqlite");
    store_with_data(&path, 2);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("DROP TABLE events").unwrap();
    }
    let error = open(&path).unwrap_err();
    assert_eq!(error.code(), "damaged", "{error}");
    assert!(error.to_string().contains("no table events"), "{error}");
}

#[test]
fn an_open_error_is_a_store_unavailable_error_with_the_same_message() {
    let dir = temp();
    let error = open(&dir.path().join("missing").join("x.sqlite")).unwrap_err();
    let message = error.to_string();
    let store_error = StoreError::from(error);
    assert_eq!(store_error.code(), "unavailable");
    assert!(store_error.to_string().contains(&message), "{store_error}");
}

// ----- damage anywhere never panics -----------------------------------------------------------

/// Every read and write the ports offer, returning whether any failed (none may panic).
fn exercise(store: &mut SqliteStore) -> bool {
    let thread = ThreadId::new("t");
    let mut failed = false;
    failed |= store.committed_messages(&thread).is_err();
    failed |= store.latest_run(&thread).is_err();
    failed |= store.run(&"t/run-1".into()).is_err();
    failed |= store.resume_ticket(&"t/run-1".into()).is_err();
    failed |= store.committed_state(&thread).is_err();
    failed |= store.thread_version(&thread).is_err();
    failed |= store.threads(None, 10).is_err();
    failed |= store.pending_tickets(None, 10).is_err();
    failed |= store.list_events(&EventScope::All, None, 1000).is_err();
    match store.transcript_snapshot(&thread) {
        Ok(pin) => {
            let halves = [0..pin.end / 2, pin.end / 2..pin.end];
            failed |= store.transcript_slice(&pin, &halves).is_err();
        }
        Err(_) => failed = true,
    }
    failed |= store.commit(commit("t", "t/run-1", "after")).is_err();
    failed
}

#[test]
fn damage_anywhere_in_the_file_never_panics() {
    let dir = temp();
    let original = dir.path().join("original.sqlite");
    store_with_data(&original, 60);
    let bytes = std::fs::read(&original).unwrap();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move |n: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) as usize) % n.max(1)
    };
    let (mut refused, mut opened_then_failed, mut opened_fine) = (0, 0, 0);
    for round in 0..40 {
        let path: PathBuf = dir.path().join(format!("damaged-{round}.sqlite"));
        let mut damaged = bytes.clone();
        let at = next(damaged.len());
        let len = 1 + next(600);
        for byte in damaged.iter_mut().skip(at).take(len) {
            *byte = next(256) as u8;
        }
        std::fs::write(&path, &damaged).unwrap();
        for check in [OpenCheck::Quick, OpenCheck::SchemaOnly] {
            let options = SqliteOptions::default().with_check(check);
            match SqliteStore::open(&path, options) {
                Err(error) => {
                    assert!(!error.to_string().is_empty());
                    refused += 1;
                }
                Ok(mut store) => {
                    if exercise(&mut store) {
                        opened_then_failed += 1;
                    } else {
                        opened_fine += 1;
                    }
                }
            }
        }
    }
    println!(
        "40 damaged files × 2 checks: {refused} refused at open, {opened_then_failed} failed a \
         later call with an error, {opened_fine} unaffected"
    );
    assert!(refused > 0);
}

#[test]
fn schema_only_opens_a_scribbled_store_and_reads_fail_with_a_clear_error() {
    let dir = temp();
    let path = dir.path().join("scribbled.sqlite");
    store_with_data(&path, 200);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2 / 4096 * 4096;
    bytes[middle..middle + 3 * 4096].fill(0xAB);
    std::fs::write(&path, &bytes).unwrap();
    let store = SqliteStore::open(
        &path,
        SqliteOptions::default().with_check(OpenCheck::SchemaOnly),
    )
    .unwrap_or_else(|e| panic!("the cheap check only reads the schema: {e}"));
    let error = store
        .committed_messages(&ThreadId::new("t"))
        .expect_err("the scribbled pages hold messages");
    assert_eq!(error.code(), "unavailable");
    assert!(error.to_string().contains("corrupt"), "{error}");
}
