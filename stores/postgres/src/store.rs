//! [`PostgresStore`]: opening, reconnecting, and the connection it keeps.

use std::fmt;
use std::sync::{Mutex, MutexGuard};

use postgres::{Client, Config, NoTls};
use runcore::store::{StoreError, StoreHandles};

use crate::codec::{db_error, stable_key};
use crate::schema;
use crate::statements::Statements;

/// The environment variable that names the database, as a PostgreSQL connection URL
/// (`postgresql://user@host:port/database`) or key-value string (`host=… dbname=…`).
pub const URL_ENV: &str = "RUNCORE_PG_URL";

/// A runcore commit log and its read ports in a PostgreSQL database (15 or newer).
///
/// One `PostgresStore` is one connection. Open as many as you have writers — in one process
/// ([`open_handle`](StoreHandles::open_handle)) or in many, on many machines: the database
/// serializes what must be serialized (see the [crate docs](crate)). Calls on one handle are
/// serialized by a lock around its connection, so a handle may be shared between threads for
/// reading; give each writing thread its own handle.
///
/// # Methods
/// - open: [`connect`](Self::connect), [`connect_in_schema`](Self::connect_in_schema),
///   [`connect_from_env`](Self::connect_from_env); another connection:
///   [`open_handle`](StoreHandles::open_handle);
/// - write: [`CommitLog`](runcore::store::CommitLog) (`commit`, `commit_operation`), one transaction
///   each;
/// - read: [`CommittedThreadView`](runcore::store::CommittedThreadView) and
///   [`CheckpointReader`](runcore::store::CheckpointReader), one statement each;
/// - connection: [`reconnect`](Self::reconnect), [`schema`](Self::schema).
///
/// # A lost connection
/// A call whose connection breaks returns [`StoreError::Unavailable`] with the driver's error
/// as its source, and the next call connects again by itself ([`reconnect`](Self::reconnect)
/// does it at once). What was lost is never half-written: a commit's write is one statement
/// and so one transaction, either all stored or none of it. Only when the connection breaks
/// while that statement is in flight can the client not know which; a host that commits through
/// [`commit_operation`](runcore::store::CommitLog::commit_operation) (as the agent's commits are)
/// retries the same operation and gets the stored receipt (`duplicate = true`) if it had
/// landed, or lands it now. A read that finds its connection already closed reconnects and
/// reads once more, since reading twice changes nothing.
pub struct PostgresStore {
    target: Target,
    session: Mutex<Option<Session>>,
}

/// Where the store lives: the parsed connection settings and, optionally, a schema of its own.
#[derive(Clone)]
struct Target {
    config: Config,
    schema: Option<String>,
    /// Whether opening may create runcore's tables (and the schema); `false` for a store
    /// opened to look ([`PostgresStore::open_existing`]).
    create: bool,
}

/// One open connection with its prepared statements.
pub(crate) struct Session {
    pub(crate) client: Client,
    pub(crate) sql: Statements,
    /// The advisory-lock key of the store's commit mutex (one per schema).
    pub(crate) commit_mutex: i64,
    /// What a thread's advisory-lock key is hashed from, before the thread id: the schema, so
    /// stores in distinct schemas never share a thread's lock.
    thread_lock_prefix: Vec<u8>,
}

impl Session {
    fn open(target: &Target) -> Result<Session, StoreError> {
        let mut client = target
            .config
            .connect(NoTls)
            .map_err(|e| db_error("connect to PostgreSQL", e))?;
        let current = if target.create {
            schema::prepare(&mut client, target.schema.as_deref())?
        } else {
            schema::prepare_existing(&mut client, target.schema.as_deref())?
        };
        let sql = Statements::prepare(&mut client)?;
        let mut mutex = b"runcore-postgres: commit mutex\0".to_vec();
        mutex.extend_from_slice(current.as_bytes());
        let mut thread_lock_prefix = b"runcore-postgres: thread lock\0".to_vec();
        thread_lock_prefix.extend_from_slice(current.as_bytes());
        thread_lock_prefix.push(0);
        Ok(Session {
            client,
            sql,
            commit_mutex: stable_key(&mutex),
            thread_lock_prefix,
        })
    }

    /// The advisory-lock key that commits on `thread` (its id's bytes) queue on.
    pub(crate) fn thread_lock(&self, thread: &[u8]) -> i64 {
        let mut bytes = Vec::with_capacity(self.thread_lock_prefix.len() + thread.len());
        bytes.extend_from_slice(&self.thread_lock_prefix);
        bytes.extend_from_slice(thread);
        stable_key(&bytes)
    }
}

impl fmt::Debug for PostgresStore {
    /// Names the server and schema, never the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("hosts", &self.target.config.get_hosts())
            .field("ports", &self.target.config.get_ports())
            .field("dbname", &self.target.config.get_dbname())
            .field("schema", &self.target.schema)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to the database at `url` and brings runcore's tables, in the schema the
    /// connection's `search_path` selects (normally `public`), up to this build's schema
    /// version, creating them on first use. A schema written by a newer build is refused with
    /// an error naming the version found ([`SchemaTooNew`](crate::SchemaTooNew) as its source).
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        Self::open(Target {
            config: parse(url)?,
            schema: None,
            create: true,
        })
    }

    /// Like [`connect`](Self::connect), with runcore's tables in `schema` (created if missing;
    /// any name, taken literally). Several stores can share one database this way.
    pub fn connect_in_schema(url: &str, schema: &str) -> Result<Self, StoreError> {
        Self::open(Target {
            config: parse(url)?,
            schema: Some(schema.to_owned()),
            create: true,
        })
    }

    /// Opens the runcore store that already exists at `url` (in the schema the connection's
    /// `search_path` selects), creating nothing: a database with no runcore tables is refused
    /// with an error whose message says "not a runcore store" ([`NotAStore`](crate::NotAStore)
    /// as its source), and nothing is created in it (SPEC §12.3: a store is never created by
    /// looking). An existing store of an older schema version is migrated, as by
    /// [`connect`](Self::connect). The commands that only look (and `sweep`, `approve`,
    /// `deny`) open this way; reconnecting and [`open_handle`](StoreHandles::open_handle)
    /// keep the mode.
    pub fn open_existing(url: &str) -> Result<Self, StoreError> {
        Self::open(Target {
            config: parse(url)?,
            schema: None,
            create: false,
        })
    }

    /// Like [`open_existing`](Self::open_existing), in `schema`: a schema that does not exist
    /// or holds no runcore tables is refused, and neither it nor a table is created.
    pub fn open_existing_in_schema(url: &str, schema: &str) -> Result<Self, StoreError> {
        Self::open(Target {
            config: parse(url)?,
            schema: Some(schema.to_owned()),
            create: false,
        })
    }

    /// [`connect`](Self::connect) to the database named by the [`URL_ENV`] environment
    /// variable (`RUNCORE_PG_URL`).
    pub fn connect_from_env() -> Result<Self, StoreError> {
        match std::env::var(URL_ENV) {
            Ok(url) => Self::connect(&url),
            Err(std::env::VarError::NotPresent) => Err(StoreError::unavailable(format!(
                "{URL_ENV} is not set: set it to a PostgreSQL URL such as \
                 postgresql://user@127.0.0.1:5432/dbname"
            ))),
            Err(e) => Err(StoreError::backend(format!("{URL_ENV} is not usable"), e)),
        }
    }

    fn open(target: Target) -> Result<Self, StoreError> {
        let session = Session::open(&target)?;
        Ok(PostgresStore {
            target,
            session: Mutex::new(Some(session)),
        })
    }

    /// The schema given to [`connect_in_schema`](Self::connect_in_schema), if any.
    pub fn schema(&self) -> Option<&str> {
        self.target.schema.as_deref()
    }

    /// Drops the connection and opens a new one now (the next call would do it by itself
    /// once the connection is found closed).
    pub fn reconnect(&self) -> Result<(), StoreError> {
        let mut slot = self.lock();
        *slot = None;
        *slot = Some(Session::open(&self.target)?);
        Ok(())
    }

    /// The connection slot. A poisoned lock is taken over: the store never leaves a
    /// transaction open between statements, so a panic elsewhere cannot leave one behind.
    fn lock(&self) -> MutexGuard<'_, Option<Session>> {
        self.session
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs a read on the connection, connecting first if there is none or it was found
    /// closed, and once more on a fresh connection if it fails because the connection closed.
    pub(crate) fn read<T>(
        &self,
        read: impl Fn(&mut Session) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut slot = self.lock();
        let (session, fresh) = connected(&mut slot, &self.target)?;
        match read(session) {
            Err(error) if !fresh && session.client.is_closed() => {
                *slot = None;
                let (session, _) = connected(&mut slot, &self.target)?;
                read(session).map_err(|retry| {
                    // Both failures matter to whoever reads the message; the retry's is current.
                    match retry {
                        StoreError::Unavailable { message, source } => StoreError::Unavailable {
                            message: format!("{message} (after reconnecting; before: {error})"),
                            source,
                        },
                        other => other,
                    }
                })
            }
            result => result,
        }
    }

    /// The connection for a write, connecting first if there is none or it was found closed;
    /// `true` when it was opened just now.
    pub(crate) fn session_for_write(&mut self) -> Result<(&mut Session, bool), StoreError> {
        let slot = self
            .session
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        connected(slot, &self.target)
    }

    /// Forgets the connection (after it broke), so the next call opens a new one.
    pub(crate) fn drop_session(&mut self) {
        let slot = self
            .session
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *slot = None;
    }
}

/// The open session in `slot`, opening one if there is none or the one there is closed.
fn connected<'a>(
    slot: &'a mut Option<Session>,
    target: &Target,
) -> Result<(&'a mut Session, bool), StoreError> {
    let fresh = match slot {
        Some(session) if !session.client.is_closed() => false,
        _ => {
            *slot = None;
            *slot = Some(Session::open(target)?);
            true
        }
    };
    match slot {
        Some(session) => Ok((session, fresh)),
        None => Err(StoreError::unavailable("no connection to PostgreSQL")),
    }
}

fn parse(url: &str) -> Result<Config, StoreError> {
    url.parse::<Config>().map_err(|e| {
        StoreError::backend(
            format!("not a PostgreSQL connection URL or key-value string: {e}"),
            e,
        )
    })
}

impl StoreHandles for PostgresStore {
    /// A new connection to the same database and schema.
    fn open_handle(&self) -> Result<Self, StoreError> {
        Self::open(self.target.clone())
    }
}
