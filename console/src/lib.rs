//! The operator console of runcore (SPEC §12.5): a local web page and a JSON API over any
//! store, where a person looks into threads, transcripts, pending approvals and audit events,
//! and answers an approval.
//!
//! - Reads go through the core's read ports only, as `runcore show` does ([`shapes`] holds the
//!   JSON shapes both print).
//! - A decision is the core's [`answer_permission`](runcore::host::answer_permission): one fenced
//!   Running commit with the `permission_decided` draft, exactly as a host's `resume_ticket`
//!   would commit it. Running the approved call is the next worker's (a `drive --store`
//!   restart, a fleet worker), never the console's.
//! - Security: it binds loopback unless told otherwise ([`check_listen`]), and then answers
//!   only requests addressed to a loopback name (no DNS rebinding); every request that
//!   changes something needs the per-start token ([`Token`]); secrets in the store URL are
//!   never shown (`runcore_store_url::redact_secrets`, the one redaction of the workspace); every text a page shows is HTML-escaped ([`html`]).
//!
//! The CLI calls [`serve`] for `runcore console --store URL [--listen ADDR] [--allow-remote]`.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::net::SocketAddr;

mod api;
pub mod html;
pub mod page;
pub mod shapes;
pub mod time;
mod token;

pub use token::Token;

/// The address the console listens on when none is given.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8420";

/// How the console serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleOptions {
    /// Where to listen (port 0 takes a free port).
    pub listen: SocketAddr,
    /// Whether an address other than loopback is allowed.
    pub allow_remote: bool,
}

impl Default for ConsoleOptions {
    fn default() -> Self {
        ConsoleOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 8420)),
            allow_remote: false,
        }
    }
}

/// Why the console could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// `--listen` names an address other than loopback without `--allow-remote`.
    #[error(
        "refusing to listen on {0}: it is not a loopback address, so other machines could \
         reach the console; pass --allow-remote to mean it"
    )]
    NotLoopback(SocketAddr),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The operating system gave no random bytes for the token.
    #[error("cannot make the console's token: {0}")]
    Token(String),
    /// The runtime or the server failed.
    #[error("the console's server failed: {0}")]
    Serve(std::io::Error),
}

/// Refuses an address other than loopback unless `allow_remote`.
pub fn check_listen(addr: SocketAddr, allow_remote: bool) -> Result<(), ConsoleError> {
    if addr.ip().is_loopback() || allow_remote {
        Ok(())
    } else {
        Err(ConsoleError::NotLoopback(addr))
    }
}

/// The line printed at start on stdout, as SPEC §12.5 writes it: `console: http://HOST:PORT/
/// token: TOKEN` (the real port; the token for `Authorization: Bearer`).
pub fn start_line(addr: SocketAddr, token: &Token) -> String {
    format!("console: http://{addr}/ token: {}", token.as_str())
}

/// The URL that opens the console with its token filled in: `http://HOST:PORT/#token=TOKEN`
/// (a fragment never reaches the server, nor its logs). `runcore console` prints it on stderr
/// beside the start line, so the stdout line keeps the SPEC's shape.
pub fn open_url(addr: SocketAddr, token: &Token) -> String {
    format!("http://{addr}/#token={}", token.as_str())
}

/// Serves the console over `store` until SIGINT or SIGTERM: checks the address, makes a fresh
/// token, binds, calls `announce` with [`start_line`] and [`open_url`] (the real port), then
/// serves.
/// `store_url` is shown on the pages, redacted.
pub fn serve<S>(
    store: S,
    store_url: &str,
    options: &ConsoleOptions,
    announce: impl FnOnce(&str, &str),
) -> Result<(), ConsoleError>
where
    S: runcore::store::Store + Send + 'static,
{
    check_listen(options.listen, options.allow_remote)?;
    let token = Token::generate()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(ConsoleError::Serve)?;
    let state = api::shared(
        store,
        runcore_store_url::redact_secrets(store_url),
        token.clone(),
        options.allow_remote,
    );
    let for_router = std::sync::Arc::clone(&state);
    let served = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|source| ConsoleError::Bind {
                addr: options.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(ConsoleError::Serve)?;
        let hosts = (!options.allow_remote).then(|| api::local_hosts(addr));
        let app = api::router(for_router, hosts);
        let shutdown = Shutdown::listen()?;
        announce(&start_line(addr, &token), &open_url(addr, &token));
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.wait())
            .await
            .map_err(ConsoleError::Serve)
    });
    // The runtime first (it waits for its blocking tasks), then the store, outside it: the
    // PostgreSQL backend's client runs a runtime of its own and may not be dropped in one.
    drop(runtime);
    drop(state);
    served
}

/// SIGINT and SIGTERM, listened for from the moment this is made (so a signal sent right
/// after the start line is never missed).
struct Shutdown {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Shutdown {
    fn listen() -> Result<Shutdown, ConsoleError> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Shutdown {
                interrupt: signal(SignalKind::interrupt()).map_err(ConsoleError::Serve)?,
                terminate: signal(SignalKind::terminate()).map_err(ConsoleError::Serve)?,
            })
        }
        #[cfg(not(unix))]
        Ok(Shutdown {})
    }

    /// Resolves at the first of them.
    async fn wait(mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_without_allow_remote() {
        let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let v6: SocketAddr = "[::1]:9000".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:9000".parse().unwrap();
        let lan: SocketAddr = "192.168.1.4:9000".parse().unwrap();
        assert!(check_listen(loopback, false).is_ok());
        assert!(check_listen(v6, false).is_ok());
        for addr in [any, lan] {
            let error = check_listen(addr, false).unwrap_err();
            assert!(error.to_string().contains("--allow-remote"), "{error}");
            assert!(check_listen(addr, true).is_ok());
        }
    }

    #[test]
    fn the_start_line_names_the_address_and_token() {
        let token = Token::from_string("abc");
        let addr: SocketAddr = "127.0.0.1:4321".parse().unwrap();
        assert_eq!(
            start_line(addr, &token),
            "console: http://127.0.0.1:4321/ token: abc"
        );
        assert_eq!(open_url(addr, &token), "http://127.0.0.1:4321/#token=abc");
    }
}
