//! The one backend registry (SPEC §12.2): which backend a store URL names, the checks that
//! can be made before opening it, opening it as one boxed [`Store`](runcore::store::Store), and showing the URL with
//! every secret masked. The `runcore` binary, the Python package and the console open stores
//! through here, so adding a backend touches its own crate and this one, nothing else.
//!
//! `sqlite:PATH` (the file is created if missing, for the commands that write) or
//! `postgres://…` / `postgresql://…`. A SQLite URL may end in `?synchronous=normal` (or
//! `=full`, the default) to choose how much SQLite syncs at each commit (see
//! [`Synchronous`]): NORMAL survives a process crash, FULL also a power loss. Opening checks what the command line can see before the
//! backend touches anything — the scheme, a missing parent directory (directories are never
//! created), a directory where the file should be, a missing store for the commands that only
//! read — so that a bad `--store` is one clear line and nothing is created or changed. For
//! PostgreSQL the backend makes the last check itself: [`Access::Read`] opens with
//! `PostgresStore::open_existing`, which refuses a database without runcore's tables ("not a
//! runcore store") and creates nothing; only [`Access::Write`] (`drive`, `demo`, the Restate
//! worker) creates the tables.

use std::fmt;
use std::path::PathBuf;

use runcore_postgres::PostgresStore;
use runcore_sqlite::{SqliteOptions, SqliteStore, Synchronous};

/// Where a store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// A SQLite file.
    Sqlite {
        /// The file.
        path: PathBuf,
        /// How much SQLite syncs at each commit.
        synchronous: Synchronous,
    },
    /// A PostgreSQL connection URL.
    Postgres(String),
}

impl StoreUrl {
    /// Parses `sqlite:PATH`, `postgres://…` or `postgresql://…`.
    pub fn parse(url: &str) -> Result<StoreUrl, String> {
        if let Some(rest) = url.strip_prefix("sqlite:") {
            let (path, synchronous) = match rest.rsplit_once("?synchronous=") {
                Some((path, name)) => match name.parse::<Synchronous>() {
                    Ok(synchronous) => (path, synchronous),
                    Err(_) => {
                        return Err(format!(
                            "--store {url:?}: synchronous takes full or normal, not {name:?}"
                        ));
                    }
                },
                None => (rest, Synchronous::Full),
            };
            if path.is_empty() {
                return Err(format!(
                    "--store {url:?} names no file: write sqlite:PATH, e.g. sqlite:runs.db"
                ));
            }
            return Ok(StoreUrl::Sqlite {
                path: PathBuf::from(path),
                synchronous,
            });
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(StoreUrl::Postgres(url.to_owned()));
        }
        let scheme = match url.split_once(':') {
            Some((scheme, _)) if !scheme.is_empty() => format!("the scheme {scheme:?} is unknown"),
            _ => "it has no scheme".to_owned(),
        };
        Err(format!(
            "--store {url:?} is not a store URL: {scheme}; expected sqlite:PATH, postgres://… \
             or postgresql://…"
        ))
    }
}

/// The URL for messages: a PostgreSQL password is never printed.
impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Sqlite { path, synchronous } => {
                write!(f, "sqlite:{}", path.display())?;
                match synchronous {
                    Synchronous::Full => Ok(()),
                    other => write!(f, "?synchronous={}", other.as_str()),
                }
            }
            StoreUrl::Postgres(url) => f.write_str(&redact_secrets(url)),
        }
    }
}

/// The keys whose values are secrets, in a URL's query or a key-value connection string
/// (libpq accepts both forms: `?password=…` and `password=…`).
const SECRET_KEYS: &[&str] = &["password", "sslpassword", "passfile", "sslkey"];

/// Masks every secret a PostgreSQL URL or connection string can carry: the password of
/// `user:password@`, and the values of [`SECRET_KEYS`] in a query (`?password=…&…`) or in
/// `key=value` text. Text without secrets comes back unchanged.
pub fn redact_secrets(text: &str) -> String {
    let masked = mask_userinfo(text);
    mask_key_values(&masked)
}

/// `scheme://user:secret@host…` → `scheme://user:***@host…`, wherever such a URL appears.
fn mask_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace())
            .unwrap_or(tail.len());
        let (authority, after) = tail.split_at(end);
        match authority.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => {
                    out.push_str(user);
                    out.push_str(":***@");
                    out.push_str(host);
                }
                None => out.push_str(authority),
            },
            None => out.push_str(authority),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `password=secret` → `password=***` (case-insensitive key, ended by `&`, whitespace or the
/// end; a quoted value `password='a b'` is masked whole).
fn mask_key_values(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let found = SECRET_KEYS.iter().find(|key| {
            lower[i..].starts_with(*key)
                && lower[i + key.len()..].trim_start().starts_with('=')
                && (i == 0 || !lower.as_bytes()[i - 1].is_ascii_alphanumeric())
        });
        let Some(key) = found else {
            let c = text[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
            continue;
        };
        let eq = i + key.len() + lower[i + key.len()..].find('=').unwrap_or(0);
        out.push_str(&text[i..=eq]);
        let value = &text[eq + 1..];
        let skipped = value.len() - value.trim_start().len();
        let value = value.trim_start();
        let len = if let Some(quoted) = value.strip_prefix('\'') {
            quoted.find('\'').map_or(value.len(), |end| end + 2)
        } else {
            value
                .find(|c: char| c == '&' || c == '#' || c.is_whitespace())
                .unwrap_or(value.len())
        };
        out.push_str(&text[eq + 1..eq + 1 + skipped]);
        out.push_str("***");
        i = eq + 1 + skipped + len;
    }
    out
}

/// What a command does with the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// It writes: a missing SQLite file is created (`drive`, `demo`).
    Write,
    /// It does not create a store: one that does not exist is an error, and nothing is
    /// created (`threads`, `show`, `pending`, `events`, `due`, the console, and `sweep`,
    /// `approve`, `deny`, which write only into a store that exists). A SQLite file that is
    /// missing or empty, a PostgreSQL database or schema without runcore's tables: "not a
    /// runcore store" / "there is no store", exit 2 in the CLI.
    Read,
}

/// The checks the command line can make before any backend opens anything.
pub fn precheck(url: &StoreUrl, access: Access) -> Result<(), String> {
    let StoreUrl::Sqlite { path, .. } = url else {
        return Ok(());
    };
    let shown = path.display();
    if path.is_dir() {
        return Err(format!(
            "--store {url}: {shown} is a directory; name a file (sqlite:{}/runcore.db)",
            path.display()
        ));
    }
    if !path.exists() {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(parent) = parent
            && !parent.is_dir()
        {
            return Err(format!(
                "--store {url}: the directory {} does not exist (runcore never creates \
                 directories)",
                parent.display()
            ));
        }
        if access == Access::Read {
            return Err(format!(
                "--store {url}: there is no store at {shown} (nothing was created)"
            ));
        }
    } else if access == Access::Read && path.metadata().is_ok_and(|m| m.len() == 0) {
        // Opening would make it a store: a command that only reads changes nothing.
        return Err(format!(
            "--store {url}: {shown} is an empty file, not a store (nothing was changed)"
        ));
    }
    Ok(())
}

/// An opened store, behind every port of the core.
pub type Backend = runcore::store::BoxedStore;

/// Opens `url` for `access`, or says in one line why it cannot be opened (the URL shown with
/// its secrets masked).
pub fn open(url: &StoreUrl, access: Access) -> Result<Backend, String> {
    precheck(url, access)?;
    match url {
        StoreUrl::Sqlite { path, synchronous } => SqliteStore::open(
            path,
            SqliteOptions::default().with_synchronous(*synchronous),
        )
        .map(|store| Box::new(store) as Backend)
        .map_err(|e| format!("--store {url}: {}", redact_secrets(&error_chain(&e)))),
        StoreUrl::Postgres(raw) => match access {
            Access::Write => PostgresStore::connect(raw),
            // Looking creates nothing: a database without runcore's tables is refused.
            Access::Read => PostgresStore::open_existing(raw),
        }
        .map(|store| Box::new(store) as Backend)
        .map_err(|e| format!("--store {url}: {}", redact_secrets(&error_chain(&e)))),
    }
}

/// Parses `url` and opens it ([`StoreUrl::parse`], then [`open`]): what a binding's
/// `Store.open(url)` does. Every message names the URL with its secrets masked.
pub fn open_url(url: &str, access: Access) -> Result<Backend, String> {
    let parsed = StoreUrl::parse(url).map_err(|e| redact_secrets(&e))?;
    open(&parsed, access)
}

/// An error and its sources, on one line (a backend's message names what failed; its
/// source says why).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn urls_parse_by_scheme() {
        let sqlite = |path: &str, synchronous| StoreUrl::Sqlite {
            path: PathBuf::from(path),
            synchronous,
        };
        assert_eq!(
            StoreUrl::parse("sqlite:runs.db"),
            Ok(sqlite("runs.db", Synchronous::Full))
        );
        assert_eq!(
            StoreUrl::parse("sqlite:/tmp/a b.db"),
            Ok(sqlite("/tmp/a b.db", Synchronous::Full))
        );
        let normal = StoreUrl::parse("sqlite:x.db?synchronous=normal").unwrap();
        assert_eq!(normal, sqlite("x.db", Synchronous::Normal));
        assert_eq!(normal.to_string(), "sqlite:x.db?synchronous=normal");
        assert_eq!(
            StoreUrl::parse("sqlite:x.db?synchronous=full"),
            Ok(sqlite("x.db", Synchronous::Full))
        );
        for url in ["postgres://u@h/db", "postgresql://h/db?sslmode=disable"] {
            assert_eq!(StoreUrl::parse(url), Ok(StoreUrl::Postgres(url.to_owned())));
        }
    }

    #[test]
    fn bad_urls_say_what_is_expected() {
        for (url, says) in [
            ("mysql://h/db", "the scheme \"mysql\" is unknown"),
            ("runs.db", "it has no scheme"),
            ("", "it has no scheme"),
            ("sqlite:", "names no file"),
            ("SQLITE:x", "the scheme \"SQLITE\" is unknown"),
            ("sqlite:x?synchronous=off", "full or normal"),
        ] {
            let error = StoreUrl::parse(url).unwrap_err();
            assert!(error.contains(says), "{url:?}: {error}");
            if !url.starts_with("sqlite:") {
                assert!(error.contains("expected sqlite:PATH"), "{error}");
            }
        }
    }

    #[test]
    fn every_secret_form_is_masked() {
        for (text, shown) in [
            (
                "postgres://db/runs?user=bob&password=s3cret&sslmode=disable",
                "postgres://db/runs?user=bob&password=***&sslmode=disable",
            ),
            (
                "postgresql://h/db?PASSWORD=x",
                "postgresql://h/db?PASSWORD=***",
            ),
            (
                "host=db user=bob password=s3cret dbname=runs",
                "host=db user=bob password=*** dbname=runs",
            ),
            ("password = 'a b c' host=db", "password = *** host=db"),
            ("sslpassword=k&x=1", "sslpassword=***&x=1"),
            (
                "postgres://me:a@b@db/runs?PASSWORD=s3cret",
                "postgres://me:***@db/runs?PASSWORD=***",
            ),
            (
                "error connecting to postgres://me:pw@h/db: refused",
                "error connecting to postgres://me:***@h/db: refused",
            ),
            (
                "no secrets here, mypassword_hint=1",
                "no secrets here, mypassword_hint=1",
            ),
        ] {
            let masked = redact_secrets(text);
            assert_eq!(masked, shown, "{text}");
            assert!(!masked.contains("s3cret") && !masked.contains("pw@"));
        }
    }

    #[test]
    fn passwords_are_never_shown() {
        let url = StoreUrl::parse("postgres://me:s3cret@db.example:5432/runs").unwrap();
        assert_eq!(url.to_string(), "postgres://me:***@db.example:5432/runs");
        let url = StoreUrl::parse("postgresql://me@db/runs").unwrap();
        assert_eq!(url.to_string(), "postgresql://me@db/runs");
    }

    #[test]
    fn precheck_refuses_what_it_can_see_and_creates_nothing() {
        let temp = tempfile::Builder::new()
            .prefix("runcore-precheck-")
            .tempdir()
            .unwrap();
        let dir = temp.path();
        let url = |p: &Path| StoreUrl::Sqlite {
            path: p.to_path_buf(),
            synchronous: Synchronous::Full,
        };
        let missing_parent = dir.join("no/such/dir/x.db");
        let error = precheck(&url(&missing_parent), Access::Write).unwrap_err();
        assert!(error.contains("does not exist"), "{error}");
        let error = precheck(&url(dir), Access::Write).unwrap_err();
        assert!(error.contains("is a directory"), "{error}");
        let absent = dir.join("absent.db");
        assert_eq!(precheck(&url(&absent), Access::Write), Ok(()));
        let error = precheck(&url(&absent), Access::Read).unwrap_err();
        assert!(error.contains("there is no store"), "{error}");
        assert!(!absent.exists() && !dir.join("no").exists());
        let empty = dir.join("empty.db");
        std::fs::write(&empty, b"").unwrap();
        let error = precheck(&url(&empty), Access::Read).unwrap_err();
        assert!(error.contains("an empty file"), "{error}");
        assert_eq!(precheck(&url(&empty), Access::Write), Ok(()));
    }
}
