//! Every bad `--store` of SPEC §12.2 (and of §12.3 for the commands that only read), through
//! the real binary: one clear line on stderr, exit status 2, nothing on stdout, and nothing
//! created or changed at the path. And the two files that are not refused: a 0-byte file and
//! a SQLite database without tables become a new store.

mod common;

use std::path::Path;

use common::process::{Drive, TempDir, bytes_of, prompt, runcore};
use serde_json::json;

/// Runs `runcore ARGS` and checks the refusal: exit 2, one stderr line containing `says`,
/// nothing on stdout.
fn refused(args: &[&str], says: &str) {
    let output = runcore(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "runcore {args:?}: {stderr}");
    assert!(output.stdout.is_empty(), "runcore {args:?}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains(says), "runcore {args:?}: {stderr}");
}

/// `refused` for every command that takes --store, with `url`.
fn refused_everywhere(url: &str, says: &str) {
    refused(&["drive", "--store", url], says);
    refused(&["threads", "--store", url], says);
    refused(&["show", "t", "--store", url], says);
    refused(&["pending", "--store", url], says);
    refused(&["events", "--store", url], says);
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn an_unknown_scheme_is_refused() {
    for url in ["mysql://localhost/db", "runs.db", "file:runs.db", "sqlite:"] {
        let says = if url == "sqlite:" {
            "names no file"
        } else {
            "expected sqlite:PATH, postgres://… or postgresql://…"
        };
        refused_everywhere(url, says);
    }
}

#[test]
fn a_missing_parent_directory_is_refused_and_never_created() {
    let dir = TempDir::new("missing-parent");
    let url = dir.sqlite("no/such/runs.db");
    refused_everywhere(&url, "does not exist");
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn a_directory_is_refused() {
    let dir = TempDir::new("directory");
    let url = format!("sqlite:{}", dir.path().display());
    refused_everywhere(&url, "is a directory");
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_unchanged() {
    let dir = TempDir::new("not-sqlite");
    let path = dir.join("notes.txt");
    std::fs::write(&path, "these are my notes, not a database\n").expect("write");
    let before = bytes_of(&path);
    refused_everywhere(&dir.sqlite("notes.txt"), "is not a SQLite database");
    assert_eq!(bytes_of(&path), before);
    assert_eq!(entries(dir.path()), ["notes.txt"]);
}

#[test]
fn a_sqlite_database_of_another_application_is_refused_unchanged() {
    let dir = TempDir::new("foreign");
    let path = dir.join("app.db");
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers VALUES (1, 'Ada');")
        .expect("create");
    drop(conn);
    let before = bytes_of(&path);
    refused_everywhere(&dir.sqlite("app.db"), "without runcore's schema");
    assert_eq!(bytes_of(&path), before);
    assert_eq!(entries(dir.path()), ["app.db"]);
}

#[test]
fn a_store_of_a_newer_schema_is_refused_unchanged() {
    let dir = TempDir::new("newer");
    let url = dir.sqlite("runs.db");
    let mut drive = Drive::spawn(&["--store", &url]);
    drive.send(prompt("hello", 1));
    let (status, _) = drive.finish();
    assert!(status.success());
    let path = dir.join("runs.db");
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute("UPDATE runcore_schema SET version = version + 1", [])
        .expect("bump the schema version");
    // Fold the WAL into the file so that the bytes compared are the whole store.
    conn.pragma_update(None, "journal_mode", "DELETE")
        .expect("leave WAL");
    drop(conn);
    let before = bytes_of(&path);
    refused_everywhere(&url, "newer than version");
    assert_eq!(bytes_of(&path), before);
    assert_eq!(entries(dir.path()), ["runs.db"]);
}

#[test]
fn the_reading_commands_refuse_a_store_that_does_not_exist_and_create_nothing() {
    let dir = TempDir::new("absent");
    let url = dir.sqlite("absent.db");
    for args in [
        &["threads", "--store", &url][..],
        &["show", "t", "--store", &url],
        &["pending", "--store", &url],
        &["events", "--store", &url],
    ] {
        refused(args, "there is no store");
    }
    std::fs::write(dir.join("empty.db"), b"").expect("write");
    refused(
        &["threads", "--store", &dir.sqlite("empty.db")],
        "an empty file",
    );
    assert_eq!(entries(dir.path()), ["empty.db"]);
    assert_eq!(bytes_of(&dir.join("empty.db")), Some(Vec::new()));
}

#[test]
fn an_unreachable_postgres_server_is_one_line() {
    // Port 1 on loopback: nothing listens there, the connection is refused at once.
    refused(
        &[
            "drive",
            "--store",
            "postgresql://nobody:secret@127.0.0.1:1/db",
        ],
        "postgresql://nobody:***@127.0.0.1:1/db",
    );
    let output = runcore(&[
        "threads",
        "--store",
        "postgres://nobody:secret@127.0.0.1:1/db",
    ]);
    assert!(!String::from_utf8_lossy(&output.stderr).contains("secret"));
}

/// Runs `runcore ARGS` and checks the usage error: exit 2, nothing on stdout, stderr names
/// each of `names` (clap's message, with the command's usage line).
fn usage_refused(args: &[&str], names: &[&str]) {
    let output = runcore(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "runcore {args:?}: {stderr}");
    assert!(output.stdout.is_empty(), "runcore {args:?}");
    assert!(stderr.starts_with("error: "), "runcore {args:?}: {stderr}");
    for name in names {
        assert!(
            stderr.contains(name),
            "runcore {args:?}: {name:?} in {stderr}"
        );
    }
}

#[test]
fn thread_and_recover_without_store_are_usage_errors() {
    for flag in [
        "--thread",
        "--recover",
        "--owner",
        "--lease-ms",
        "--wait-claim",
    ] {
        let value = if flag == "--recover" { "seal" } else { "1" };
        usage_refused(
            &["drive", flag, value],
            &[
                "required arguments were not provided",
                "--store <URL>",
                flag,
            ],
        );
    }
    usage_refused(&["threads"], &["--store <URL>"]);
    usage_refused(
        &["drive", "--store", "sqlite:x.db", "--recover", "later"],
        &[
            "--recover",
            r#"policy must be "replay" or "seal", got "later""#,
        ],
    );
    usage_refused(
        &[
            "events",
            "--store",
            "sqlite:x.db",
            "--thread",
            "t",
            "--run",
            "r",
        ],
        &["'--thread <T>' cannot be used with '--run <R>'"],
    );
    usage_refused(&["show", "--store", "sqlite:x.db"], &["<THREAD>"]);
    usage_refused(&["show", "", "--store", "sqlite:x.db"], &["<THREAD>"]);
    assert!(!Path::new("x.db").exists());
}

#[test]
fn a_zero_byte_file_and_an_empty_sqlite_database_become_new_stores() {
    let dir = TempDir::new("become-stores");
    std::fs::write(dir.join("zero.db"), b"").expect("write");
    let conn = rusqlite::Connection::open(dir.join("empty.db")).expect("open");
    conn.execute_batch("PRAGMA user_version = 0; VACUUM;")
        .expect("an empty database file");
    drop(conn);
    for file in ["zero.db", "empty.db"] {
        let url = dir.sqlite(file);
        let mut drive = Drive::spawn(&["--store", &url]);
        assert_eq!(drive.start, [json!({"type":"idle","line":0})]);
        let out = drive.send(prompt("hello", 1));
        assert_eq!(out[0]["type"], "commit", "{file}");
        let (status, stderr) = drive.finish();
        assert!(status.success(), "{file}: {stderr}");
        let threads = runcore(&["threads", "--store", &url, "--json"]);
        assert!(threads.status.success(), "{file}");
        let line: serde_json::Value =
            serde_json::from_slice(&threads.stdout).expect("one JSON line");
        assert_eq!(line["version"], 1, "{file}");
    }
}
