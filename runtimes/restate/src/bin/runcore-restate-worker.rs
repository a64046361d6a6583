//! `runcore-restate-worker`: a Restate deployment hosting runcore threads with the scripted
//! model and tools (`runcore_restate::script`), for the tests, the benchmark and the README
//! walk-through.
//!
//! ```text
//! runcore-restate-worker --store URL [--listen 127.0.0.1:9080] [--approval-deadline-ms N]
//!                        [--model-delay-ms N] [--tool-delay-ms N] [--record DIR]
//!                        [--gate FILE] [--otlp URL]
//! ```
//! `--otlp URL` exports each run's spans (SPEC §14) over OTLP/HTTP once its terminal commit is
//! stored, as `runcore drive --otlp` does (http:// only; a URL without a path gets
//! `/v1/traces`).
//! It listens with `SO_REUSEPORT`, so several worker processes can share one port (the
//! kernel spreads Restate's connections over them; when one dies, its retried invocations
//! land on the others). It refuses a non-loopback `--listen` address.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use restate_sdk::prelude::{Endpoint, HttpServer};
use runcore_otlp::OtlpExporter;
use runcore_restate::script::{ScriptedModel, ScriptedTools, scripted_config};
use runcore_restate::{ThreadHost, ThreadObject, open_store};

struct Args {
    listen: SocketAddr,
    store: String,
    approval_deadline_ms: Option<u64>,
    model_delay: Duration,
    tool_delay: Duration,
    record: Option<PathBuf>,
    gate: Option<PathBuf>,
    otlp: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut listen: SocketAddr = ([127, 0, 0, 1], 9080).into();
    let mut store = None;
    let mut approval_deadline_ms = Some(60_000);
    let mut model_delay = Duration::ZERO;
    let mut tool_delay = Duration::ZERO;
    let mut record = None;
    let mut gate = None;
    let mut otlp = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        let millis = |text: String| -> Result<u64, String> {
            text.parse()
                .map_err(|_| format!("{flag}: not a number of milliseconds: {text:?}"))
        };
        match flag.as_str() {
            "--listen" => {
                let text = value()?;
                listen = text
                    .parse()
                    .map_err(|_| format!("--listen: not an address: {text:?}"))?;
            }
            "--store" => store = Some(value()?),
            "--approval-deadline-ms" => {
                let ms = millis(value()?)?;
                approval_deadline_ms = (ms > 0).then_some(ms);
            }
            "--model-delay-ms" => model_delay = Duration::from_millis(millis(value()?)?),
            "--tool-delay-ms" => tool_delay = Duration::from_millis(millis(value()?)?),
            "--record" => record = Some(PathBuf::from(value()?)),
            "--gate" => gate = Some(PathBuf::from(value()?)),
            "--otlp" => otlp = Some(value()?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if !listen.ip().is_loopback() {
        return Err(format!(
            "--listen {listen}: only loopback addresses are served"
        ));
    }
    Ok(Args {
        listen,
        store: store.ok_or("--store URL is required (sqlite:PATH or postgres://…)")?,
        approval_deadline_ms,
        model_delay,
        tool_delay,
        record,
        gate,
        otlp,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("runcore-restate-worker: {message}");
            return ExitCode::from(2);
        }
    };
    let store = match open_store(&args.store) {
        Ok(store) => store,
        Err(error) => {
            eprintln!("runcore-restate-worker: {error}");
            return ExitCode::from(2);
        }
    };
    let tools = match &args.record {
        Some(dir) => match ScriptedTools::recording(dir.clone(), args.tool_delay) {
            Ok(tools) => ScriptedTools {
                announce: true,
                gate: args.gate.clone().map(Arc::new),
                ..tools
            },
            Err(error) => {
                eprintln!(
                    "runcore-restate-worker: --record {}: {error}",
                    dir.display()
                );
                return ExitCode::from(2);
            }
        },
        None => ScriptedTools {
            delay: args.tool_delay,
            record: None,
            announce: true,
            gate: args.gate.clone().map(Arc::new),
        },
    };
    let model = ScriptedModel {
        delay: args.model_delay,
    };
    // Built before the runtime starts: the exporter's HTTP client is a blocking one.
    let otlp = match args
        .otlp
        .as_deref()
        .map(|url| OtlpExporter::new(url, "runcore"))
    {
        None => None,
        Some(Ok(exporter)) => Some(Arc::new(exporter)),
        Some(Err(error)) => {
            eprintln!("runcore-restate-worker: --otlp: {error}");
            return ExitCode::from(2);
        }
    };
    let host = ThreadHost {
        otlp,
        ..ThreadHost::new(
            scripted_config(args.approval_deadline_ms),
            Arc::new(model),
            Arc::new(tools),
            store,
        )
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("runcore-restate-worker: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let listener = match bind_shared(args.listen) {
            Ok(listener) => listener,
            Err(error) => {
                eprintln!(
                    "runcore-restate-worker: cannot listen on {}: {error}",
                    args.listen
                );
                return ExitCode::FAILURE;
            }
        };
        println!(
            "runcore-restate-worker: listening on {} (pid {})",
            args.listen,
            std::process::id()
        );
        let endpoint = Endpoint::builder().bind(ThreadObject::new(host)).build();
        HttpServer::new(endpoint).serve(listener).await;
        ExitCode::SUCCESS
    })
}

/// A listener that shares its port with the other workers (`SO_REUSEPORT`).
fn bind_shared(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}
