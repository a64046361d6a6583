//! SPEC §12.3 on PostgreSQL: a store is never created by looking. Every command that does not
//! create a store (`threads`, `show`, `pending`, `events`, `due`, `console`, and `sweep`,
//! `approve`, `deny`) pointed at a PostgreSQL schema without runcore's tables — or at a
//! search_path whose schema does not exist — exits 2 with one line saying "not a runcore
//! store", and nothing is created; `drive` then creates the store there.
//!
//! Needs `RUNCORE_PG_URL` (`scripts/with-postgres.sh`); skipped without it, except under
//! `CI=true`, where it fails.

mod common;

use common::console::in_ci;
use common::process::{Drive, prompt, runcore};

/// Every command that opens a store without creating it, with `url`.
fn lookers(url: &str) -> Vec<Vec<String>> {
    let with = |args: &[&str]| -> Vec<String> {
        args.iter()
            .map(|a| (*a).to_owned())
            .chain(["--store".to_owned(), url.to_owned()])
            .collect()
    };
    vec![
        with(&["threads"]),
        with(&["show", "t"]),
        with(&["pending"]),
        with(&["events"]),
        with(&["due"]),
        with(&["sweep"]),
        with(&["approve", "r"]),
        with(&["deny", "r"]),
        with(&["console", "--listen", "127.0.0.1:0"]),
    ]
}

/// The server's URL, or `None` (skipped) outside CI.
fn server() -> Option<String> {
    match std::env::var(runcore_postgres::URL_ENV) {
        Ok(url) => Some(url),
        Err(_) => {
            assert!(
                !in_ci(),
                "{} is not set and CI=true: run the tests under scripts/with-postgres.sh",
                runcore_postgres::URL_ENV
            );
            println!(
                "skipped: {} is not set (run under scripts/with-postgres.sh)",
                runcore_postgres::URL_ENV
            );
            None
        }
    }
}

/// `server` with its search_path set to `schema` alone.
fn in_schema(server: &str, schema: &str) -> String {
    let separator = if server.contains('?') { '&' } else { '?' };
    format!("{server}{separator}options=-c%20search_path%3D{schema}")
}

fn unique(label: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("look_{label}_{}_{nanos}", std::process::id())
}

/// The tables, functions and sequences in `schema`, and whether the schema exists.
fn contents(client: &mut postgres::Client, schema: &str) -> (bool, i64) {
    let exists: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&schema],
        )
        .expect("look for the schema")
        .get(0);
    let objects: i64 = client
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

/// Runs every looking command on `url` and checks the refusal: exit 2, nothing on stdout, one
/// line on stderr saying "not a runcore store", the password never shown.
fn every_looker_refuses(url: &str) {
    for args in lookers(url) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = runcore(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "runcore {args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "runcore {args:?}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.contains("not a runcore store") && stderr.contains("nothing was created"),
            "runcore {args:?}: {stderr}"
        );
        assert!(
            stderr.starts_with(&format!("runcore {}: --store ", args[0])),
            "{stderr}"
        );
    }
}

#[test]
fn looking_into_an_empty_schema_is_refused_and_creates_nothing() {
    let Some(server) = server() else {
        return;
    };
    let mut client = postgres::Client::connect(&server, postgres::NoTls).expect("connect");
    let schema = unique("empty");
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .expect("create an empty schema");
    let url = in_schema(&server, &schema);
    every_looker_refuses(&url);
    assert_eq!(contents(&mut client, &schema), (true, 0), "nothing created");

    // `drive` creates the store; then looking works.
    let mut drive = Drive::spawn(&["--store", &url, "--thread", "t"]);
    drive.send(prompt("hello", 1));
    let (status, _) = drive.finish();
    assert!(status.success());
    let (exists, objects) = contents(&mut client, &schema);
    assert!(exists && objects > 0, "drive created the store");
    let output = runcore(&["threads", "--store", &url]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains('t'));
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .expect("drop the schema");
}

#[test]
fn looking_where_no_schema_exists_is_refused_and_creates_no_schema() {
    let Some(server) = server() else {
        return;
    };
    let mut client = postgres::Client::connect(&server, postgres::NoTls).expect("connect");
    let schema = unique("absent");
    every_looker_refuses(&in_schema(&server, &schema));
    assert_eq!(
        contents(&mut client, &schema),
        (false, 0),
        "no schema created"
    );
}

#[test]
fn the_library_refuses_to_open_a_schema_it_would_have_to_create() {
    let Some(server) = server() else {
        return;
    };
    let mut client = postgres::Client::connect(&server, postgres::NoTls).expect("connect");
    let schema = unique("library");
    let error = runcore_postgres::PostgresStore::open_existing_in_schema(&server, &schema)
        .expect_err("no such schema");
    let source = std::error::Error::source(&error)
        .and_then(|s| s.downcast_ref::<runcore_postgres::NotAStore>())
        .expect("NotAStore as the source");
    assert_eq!(source.schema.as_deref(), Some(schema.as_str()));
    assert_eq!(contents(&mut client, &schema), (false, 0));
    // `connect_in_schema` creates it; then `open_existing_in_schema` opens it.
    runcore_postgres::PostgresStore::connect_in_schema(&server, &schema).expect("create");
    runcore_postgres::PostgresStore::open_existing_in_schema(&server, &schema).expect("open");
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .expect("drop the schema");
}
