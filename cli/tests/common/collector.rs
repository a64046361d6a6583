//! A loopback OTLP/HTTP collector for the tests and the OTLP bench: it answers every request
//! with `status` (200 unless told) and hands each one's path, content type and body over.
//! Connections are kept alive (the exporter's HTTP client reuses them), one thread each.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, Sender, channel};

/// One request the collector received.
#[derive(Debug)]
pub struct Export {
    /// The request's path (`/v1/traces`).
    pub path: String,
    /// Its `Content-Type`, lowercased.
    pub content_type: String,
    /// Its body.
    pub body: Vec<u8>,
}

/// A collector listening on the loopback.
pub struct Collector {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// What it received, in order.
    pub exports: Receiver<Export>,
}

/// A collector that answers 200 with an empty protobuf `ExportTraceServiceResponse`.
pub fn collector() -> Collector {
    collector_answering(200)
}

/// A collector that answers every request with `status`.
pub fn collector_answering(status: u16) -> Collector {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let (send, exports) = channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let send = send.clone();
            std::thread::spawn(move || serve(stream, status, &send));
        }
    });
    Collector {
        url: format!("http://127.0.0.1:{port}"),
        exports,
    }
}

/// Requests on one connection until it closes.
fn serve(stream: TcpStream, status: u16, send: &Sender<Export>) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        match reader.read_line(&mut request_line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .to_owned();
        let mut length = 0usize;
        let mut content_type = String::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                break;
            }
            let lower = header.to_ascii_lowercase();
            if let Some(value) = lower.strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
            if let Some(value) = lower.strip_prefix("content-type:") {
                content_type = value.trim().to_owned();
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let reason = if status == 200 { "OK" } else { "Failed" };
        let answer = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/x-protobuf\r\n\
             Content-Length: 0\r\n\r\n"
        );
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
        let export = Export {
            path,
            content_type,
            body,
        };
        if send.send(export).is_err() {
            return;
        }
    }
}
