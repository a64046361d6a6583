//! The server the tests run against, and fresh stores on it.
//!
//! `RUNCORE_PG_URL` names the server (`scripts/with-postgres.sh` starts a throwaway one and
//! sets it). Without it a test prints that it was skipped and returns — except under
//! `CI=true`, where a missing server is a failure: CI must never pass by testing nothing.
//!
//! Each [`Scratch`] store (the testkit's `Guarded` store with a [`SchemaGuard`]) lives in a schema of its own, named uniquely and dropped when the
//! store and all its handles are, so tests run in parallel on one database without seeing each
//! other.

#![allow(dead_code)] // Each test crate uses a different part of this module.

use std::io::Write;
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use postgres::{Client, NoTls};
use runcore::store::Intercepted;
use runcore_postgres::{PostgresStore, URL_ENV};
use runcore_store_testkit::{Guarded, guarded};

/// True when the environment says this is CI (`CI=true`, as CI services set it).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// The server, or `None` after printing that the test is skipped. Under CI a missing server
/// fails the test.
pub fn server() -> Option<Server> {
    match std::env::var(URL_ENV) {
        Ok(url) if !url.trim().is_empty() => Some(Server { url }),
        _ if in_ci() => panic!(
            "{URL_ENV} is not set and CI=true: the PostgreSQL tests must run in CI, against a \
             real server. Run them through scripts/with-postgres.sh, which starts one and sets \
             {URL_ENV} (e.g. `scripts/with-postgres.sh cargo test --workspace`)."
        ),
        _ => {
            static SAID: Once = Once::new();
            SAID.call_once(|| {
                // Straight to stderr, past the test harness's capture, so a person sees it.
                let _ = writeln!(
                    std::io::stderr(),
                    "skipped: {URL_ENV} is not set (the PostgreSQL tests need a server; \
                     scripts/with-postgres.sh starts one)"
                );
            });
            None
        }
    }
}

/// A PostgreSQL server to test against.
#[derive(Debug, Clone)]
pub struct Server {
    /// Its URL, from `RUNCORE_PG_URL`.
    pub url: String,
}

impl Server {
    /// A name no other test, process or run uses.
    pub fn unique_schema(&self, label: &str) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        format!(
            "runcore_test_{label}_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// A fresh, empty store in a schema of its own.
    pub fn scratch(&self) -> Scratch {
        self.scratch_named(&self.unique_schema("store"))
    }

    /// A fresh store in `schema` (created); the schema is dropped with the last handle.
    pub fn scratch_named(&self, schema: &str) -> Scratch {
        let store = PostgresStore::connect_in_schema(&self.url, schema)
            .unwrap_or_else(|e| panic!("cannot open a store at {URL_ENV}: {e}"));
        guarded(store, self.schema_guard(schema))
    }

    /// A guard that drops `schema` (if it exists by then) when it is dropped.
    pub fn schema_guard(&self, schema: &str) -> SchemaGuard {
        SchemaGuard {
            url: self.url.clone(),
            schema: schema.to_owned(),
        }
    }

    /// The server's URL with one more query parameter (`key=value`).
    pub fn url_with(&self, parameter: &str) -> String {
        let separator = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{separator}{parameter}", self.url)
    }

    /// A plain client, for the tests' own SQL.
    pub fn client(&self) -> Client {
        Client::connect(&self.url, NoTls)
            .unwrap_or_else(|e| panic!("cannot connect to {URL_ENV}: {e}"))
    }

    /// A plain client whose `search_path` is `schema`.
    pub fn client_in(&self, schema: &str) -> Client {
        let mut client = self.client();
        client
            .batch_execute(&format!("SET search_path TO {}", quote(schema)))
            .unwrap_or_else(|e| panic!("cannot set the search_path: {e}"));
        client
    }
}

/// `name` as a quoted SQL identifier.
pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Drops its schema when dropped: with [`Guarded`], when the last handle onto it is gone.
#[derive(Debug)]
pub struct SchemaGuard {
    url: String,
    schema: String,
}

impl SchemaGuard {
    /// The schema it drops.
    pub fn schema(&self) -> &str {
        &self.schema
    }
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let dropped = Client::connect(&self.url, NoTls).and_then(|mut client| {
            client.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {} CASCADE",
                quote(&self.schema)
            ))
        });
        if let Err(e) = dropped {
            let _ = writeln!(
                std::io::stderr(),
                "warning: could not drop test schema {}: {e}",
                self.schema
            );
        }
    }
}

/// A [`PostgresStore`] in a schema of its own, dropped with the last handle.
pub type Scratch = Intercepted<Guarded<PostgresStore, SchemaGuard>>;
