//! The stream decoder every API shares: body detection (SSE, a JSON body, an error body with
//! its HTTP status), chunking, and the one terminal input.
//!
//! Each API supplies a [`Protocol`]: what one SSE event or one JSON body means. The shell owns
//! the rest, so that the rules hold the same for all three APIs:
//! - deltas are returned as they arrive; exactly one `model_done` or `model_failed` comes at
//!   [`StreamDecoder::finish`], after everything else — *because* the host must not act on an
//!   answer before the body has ended;
//! - a body that ends before the API's terminal event is `incomplete_stream`, never a `stop`;
//! - the first failure wins; whatever follows it is ignored;
//! - a leading byte-order mark is dropped (WHATWG SSE), wherever the chunks split it;
//! - invalid UTF-8 is `stream_error`, in a stream and in a JSON body alike (never replaced);
//! - a 2xx stream of only comments or pings is `incomplete_stream` (the API's, cut short), not
//!   a format error;
//! - one SSE event, or a JSON body, over 64 MiB is `stream_error` and its bytes are not kept.

use runcore::{AssistantMessage, DeltaKind, Input, RunId, Step};
use serde_json::Value;

use crate::failure::{Failure, FailureCode, http_failure};
use crate::retry::RetryHints;
use crate::sse::{MAX_EVENT_BYTES, Problem, SseEvent, SseParser};

/// What one event did.
#[derive(Debug, Clone, PartialEq)]
pub enum EventOutcome {
    /// Understood and used.
    Used,
    /// Understood as something a codec does not need (`ping`, an unknown event type).
    Ignored,
    /// The API's terminal event: the answer is complete.
    Terminal,
    /// The provider reported a failure inside the stream.
    Failed(Failure),
    /// Not the API's format (the payload was not JSON of an expected shape).
    NotFormat(String),
}

/// Deltas an API emits while it decodes.
#[derive(Debug, Default)]
pub struct Deltas {
    pieces: Vec<(String, DeltaKind)>,
}

impl Deltas {
    /// Answer text.
    pub fn text(&mut self, text: &str) {
        if !text.is_empty() {
            self.pieces.push((text.to_owned(), DeltaKind::Text));
        }
    }

    /// Reasoning text.
    pub fn thinking(&mut self, text: &str) {
        if !text.is_empty() {
            self.pieces.push((text.to_owned(), DeltaKind::Thinking));
        }
    }
}

/// What an API's wire format means. Implemented by each codec module; not for embedders.
pub trait Protocol: Default {
    /// The API, for messages.
    const API: crate::Api;

    /// One SSE event: its `event:` name (if any) and its `data:` text.
    fn event(&mut self, name: Option<&str>, data: &str, deltas: &mut Deltas) -> EventOutcome;

    /// A whole (non-streamed) JSON response body of a 2xx status.
    fn body(&mut self, body: &Value) -> Result<AssistantMessage, BodyError>;

    /// The stream ended after its terminal event: the answer.
    fn answer(&mut self) -> AssistantMessage;

    /// Whether what was seen already makes a complete answer even if the terminal event never
    /// comes (Chat Completions: a `finish_reason` before `[DONE]`).
    fn complete(&self) -> bool {
        false
    }
}

/// Why a non-streamed body is not an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum BodyError {
    /// The body is the API's error envelope.
    Failed(Failure),
    /// Not the API's format.
    NotFormat(String),
}

/// A body that is not the API's format at all: where, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("byte {offset}: {expected}")]
pub struct FormatError {
    /// Byte offset in the body where the problem starts.
    pub offset: usize,
    /// What was expected there (and what arrived).
    pub expected: String,
}

/// What a decoder saw besides its inputs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DecodeReport {
    /// Events (and SSE comments) that were understood as carrying nothing the codec needs
    /// (`ping`, comments, unknown event types), counted.
    pub ignored: usize,
    /// Set when a 2xx body is not the API's format at all (not JSON of its shape, or an SSE
    /// stream with no event of the API): the first place it went wrong. The inputs still end
    /// in `model_failed`. Never set once a delta was yielded, so a host may pass deltas on as
    /// they arrive and still refuse such a body at the end.
    pub format_error: Option<FormatError>,
}

/// A UTF-8 byte-order mark.
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Nothing but whitespace seen yet.
    Unknown,
    Sse,
    Json,
}

/// A response-body decoder for one model call. `feed` the body in chunks split anywhere, then
/// `finish`: the inputs are `model_delta`s as they arrive, then exactly one `model_done` or
/// `model_failed`. Use it through an API module's `Decoder` alias
/// ([`anthropic::Decoder`](crate::anthropic::Decoder), …).
#[derive(Debug)]
pub struct StreamDecoder<P: Protocol> {
    run_id: RunId,
    step: Step,
    status: u16,
    kind: Kind,
    /// The body so far, kept for a JSON body or an error status (decoded whole at the end).
    buffer: Vec<u8>,
    sse: SseParser,
    events: Vec<SseEvent>,
    protocol: P,
    deltas: Deltas,
    terminal: bool,
    failure: Option<Failure>,
    report: DecodeReport,
    /// Events that meant something to the API (for "not the API's format at all").
    understood: usize,
    /// The first SSE event whose data was not the API's: the format error if no event is
    /// understood at all (a bad line inside a stream that is otherwise the API's is ignored).
    first_bad: Option<FormatError>,
    /// The waits the response's headers ask for (`retry_after_ms` of a `model_failed`).
    hints: RetryHints,
    /// How many bytes of a leading byte-order mark (`EF BB BF`) have been seen; `None` once
    /// the body's start is decided (a BOM is dropped, WHATWG SSE; anything else is the body).
    bom: Option<usize>,
    /// A JSON (or error) body outgrew [`MAX_EVENT_BYTES`]: the rest of it is not kept.
    oversized: bool,
}

impl<P: Protocol> StreamDecoder<P> {
    /// A decoder for the 200 response of model call `step` of run `run_id`.
    pub fn new(run_id: impl Into<RunId>, step: Step) -> Self {
        Self::with_status(run_id, step, 200)
    }

    /// A decoder for a response with HTTP status `status`. A status outside 2xx makes the whole
    /// body an error: it is read whole and yields one `model_failed` whose code follows the
    /// status and the provider's error type (SPEC §13), whatever the body is.
    pub fn with_status(run_id: impl Into<RunId>, step: Step, status: u16) -> Self {
        StreamDecoder {
            run_id: run_id.into(),
            step,
            status,
            kind: Kind::Unknown,
            buffer: Vec::new(),
            sse: SseParser::default(),
            events: Vec::new(),
            protocol: P::default(),
            deltas: Deltas::default(),
            terminal: false,
            failure: None,
            report: DecodeReport::default(),
            understood: 0,
            first_bad: None,
            hints: RetryHints::default(),
            bom: Some(0),
            oversized: false,
        }
    }

    /// Gives the decoder the response's headers (name, value pairs; names match
    /// case-insensitively), so that a `model_failed` carries the wait the provider asked for
    /// in `retry_after_ms` (SPEC §13): `retry-after-ms`, then `retry-after` (seconds or an HTTP
    /// date), then, for `rate_limited` only, the providers' rate-limit reset headers
    /// (`anthropic-ratelimit-*-reset`, `x-ratelimit-reset-*`; the latest reset of an exhausted
    /// limit).
    ///
    /// `now_ms` (milliseconds since the Unix epoch) is the reference a date becomes a delay
    /// against: the crate has no clock, so a host passes its clock's time at the response. Left
    /// `None`, the response's own `date` header is the reference; with neither, dates are not
    /// read. A date in the past is a wait of 0. Values that do not read are ignored; calling it
    /// again replaces what an earlier call gave.
    pub fn set_headers<K, V>(
        &mut self,
        headers: impl IntoIterator<Item = (K, V)>,
        now_ms: Option<u64>,
    ) where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        self.hints = RetryHints::read(headers, now_ms);
    }

    /// [`set_headers`](Self::set_headers), by value: `Decoder::new(run, step).with_headers(…)`.
    #[must_use]
    pub fn with_headers<K, V>(
        mut self,
        headers: impl IntoIterator<Item = (K, V)>,
        now_ms: Option<u64>,
    ) -> Self
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        self.set_headers(headers, now_ms);
        self
    }

    fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// Feeds the next bytes of the body; returns the `model_delta` inputs they complete.
    #[must_use]
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Input> {
        let mut out = Vec::new();
        self.feed_into(bytes, &mut out);
        out
    }

    /// [`feed`](Self::feed), pushing into `out`.
    pub fn feed_into(&mut self, bytes: &[u8], out: &mut Vec<Input>) {
        let mut bytes = bytes;
        if let Some(seen) = self.bom {
            // The BOM may straddle chunks: its bytes are matched one by one.
            let mut seen = seen;
            while let (Some(&byte), Some(&expected)) = (bytes.first(), BOM.get(seen)) {
                if byte != expected {
                    break;
                }
                seen += 1;
                bytes = bytes.get(1..).unwrap_or_default();
            }
            if seen == BOM.len() {
                self.bom = None;
            } else if bytes.is_empty() {
                self.bom = Some(seen);
                return;
            } else {
                // Not a BOM: the bytes matched so far are the body's.
                self.bom = None;
                self.feed_body(BOM.get(..seen).unwrap_or_default(), out);
            }
        }
        self.feed_body(bytes, out);
    }

    fn feed_body(&mut self, bytes: &[u8], out: &mut Vec<Input>) {
        let mut rest = bytes;
        if self.kind == Kind::Unknown {
            let skip = rest
                .iter()
                .position(|b| !b.is_ascii_whitespace())
                .unwrap_or(rest.len());
            // Leading whitespace is kept for a JSON body (offsets stay true) and harmless to SSE.
            self.keep(rest.get(..skip).unwrap_or_default());
            rest = rest.get(skip..).unwrap_or_default();
            let Some(&first) = rest.first() else {
                return;
            };
            self.kind = if first == b'{' || first == b'[' || !self.is_success() {
                Kind::Json
            } else {
                Kind::Sse
            };
            if self.kind == Kind::Sse {
                let leading = std::mem::take(&mut self.buffer);
                self.sse.feed(&leading, &mut self.events);
            }
        }
        match self.kind {
            Kind::Json | Kind::Unknown => self.keep(rest),
            Kind::Sse => {
                self.sse.feed(rest, &mut self.events);
                self.drain_events(out);
            }
        }
    }

    /// Keeps body bytes for the end, bounded: an error body keeps its first 64 MiB (for its
    /// message); a 2xx body this large is a `stream_error`.
    fn keep(&mut self, bytes: &[u8]) {
        if self.buffer.len().saturating_add(bytes.len()) > MAX_EVENT_BYTES {
            let room = MAX_EVENT_BYTES.saturating_sub(self.buffer.len());
            self.buffer
                .extend_from_slice(bytes.get(..room).unwrap_or_default());
            self.oversized = true;
        } else {
            self.buffer.extend_from_slice(bytes);
        }
    }

    fn drain_events(&mut self, out: &mut Vec<Input>) {
        for event in std::mem::take(&mut self.events) {
            if self.terminal || self.failure.is_some() {
                self.report.ignored = self.report.ignored.saturating_add(1);
                continue;
            }
            let outcome = match event.problem {
                Some(Problem::InvalidUtf8(offset)) => EventOutcome::Failed(Failure {
                    code: FailureCode::StreamError,
                    message: format!("the response body is not valid UTF-8 (byte {offset})"),
                }),
                Some(Problem::TooLarge) => EventOutcome::Failed(Failure {
                    code: FailureCode::StreamError,
                    message: format!(
                        "an SSE event (byte {}) is over {} MiB",
                        event.offset,
                        MAX_EVENT_BYTES >> 20
                    ),
                }),
                None => self
                    .protocol
                    .event(event.event.as_deref(), &event.data, &mut self.deltas),
            };
            match outcome {
                EventOutcome::Used => self.understood = self.understood.saturating_add(1),
                EventOutcome::Ignored => {
                    self.report.ignored = self.report.ignored.saturating_add(1);
                }
                EventOutcome::Terminal => {
                    self.understood = self.understood.saturating_add(1);
                    self.terminal = true;
                }
                EventOutcome::Failed(failure) => {
                    self.understood = self.understood.saturating_add(1);
                    self.failure = Some(failure);
                }
                EventOutcome::NotFormat(expected) => {
                    self.report.ignored = self.report.ignored.saturating_add(1);
                    if self.first_bad.is_none() {
                        self.first_bad = Some(FormatError {
                            offset: event.offset,
                            expected,
                        });
                    }
                }
            }
            for (text, kind) in self.deltas.pieces.drain(..) {
                out.push(Input::ModelDelta {
                    run_id: self.run_id.clone(),
                    step: self.step,
                    text,
                    kind,
                });
            }
        }
    }

    /// Ends the body: the last deltas, then exactly one `model_done` or `model_failed`.
    #[must_use]
    pub fn finish(self) -> Vec<Input> {
        self.finish_with_report().0
    }

    /// [`finish`](Self::finish), with what the decoder saw besides its inputs (ignored events,
    /// a body that is not the API's format at all).
    pub fn finish_with_report(mut self) -> (Vec<Input>, DecodeReport) {
        let mut out = Vec::new();
        if let Some(seen) = self.bom.take() {
            // The body ended inside what could have been a BOM: those bytes are the body.
            self.feed_body(BOM.get(..seen).unwrap_or_default(), &mut out);
        }
        let result = match self.kind {
            Kind::Sse => {
                self.sse.finish(&mut self.events);
                self.drain_events(&mut out);
                self.report.ignored = self.report.ignored.saturating_add(self.sse.comments);
                if let Some(failure) = self.failure.take() {
                    Err(failure)
                } else if self.terminal || self.protocol.complete() {
                    checked(self.protocol.answer())
                } else {
                    // A stream of only comments or pings is the API's, cut short; one with
                    // nothing the API sends at all is not its format.
                    let only_keepalives = self.first_bad.is_none() && self.report.ignored > 0;
                    if self.understood == 0 && !only_keepalives {
                        let first_bad = self.first_bad.take();
                        self.report.format_error = Some(first_bad.unwrap_or_else(|| FormatError {
                            offset: 0,
                            expected: format!(
                                "expected an SSE stream or a JSON body of the {} API, found no event of it",
                                P::API.name()
                            ),
                        }));
                    }
                    Err(Failure::incomplete(P::API))
                }
            }
            Kind::Json | Kind::Unknown if !self.is_success() => {
                Err(http_failure(self.status, &self.buffer))
            }
            Kind::Unknown => Err(Failure::incomplete(P::API)),
            Kind::Json => self.json_body(),
        };
        let (run_id, step) = (self.run_id, self.step);
        out.push(match result {
            Ok(message) => Input::ModelDone {
                run_id,
                step,
                message,
            },
            Err(failure) => Input::ModelFailed {
                run_id,
                step,
                code: failure.code.as_str().to_owned(),
                message: failure.message,
                retry_after_ms: self.hints.for_failure(failure.code),
            },
        });
        (out, self.report)
    }

    fn json_body(&mut self) -> Result<AssistantMessage, Failure> {
        if self.oversized {
            return Err(Failure {
                code: FailureCode::StreamError,
                message: format!("the response body is over {} MiB", MAX_EVENT_BYTES >> 20),
            });
        }
        // One rule for a stream and a JSON body: invalid UTF-8 is a broken response (a body
        // cut inside a character is cut short, as any other cut body).
        if let Err(error) = std::str::from_utf8(&self.buffer)
            && error.error_len().is_some()
        {
            return Err(Failure {
                code: FailureCode::StreamError,
                message: format!(
                    "the response body is not valid UTF-8 (byte {})",
                    error.valid_up_to()
                ),
            });
        }
        let body: Value = match serde_json::from_slice(&self.buffer) {
            Ok(body) => body,
            Err(error) => {
                let offset = if error.is_eof() {
                    self.buffer.len()
                } else {
                    byte_offset(&self.buffer, error.line(), error.column())
                };
                self.report.format_error = Some(FormatError {
                    offset,
                    expected: format!("expected a JSON body of the {} API: {error}", P::API.name()),
                });
                return Err(Failure::incomplete(P::API));
            }
        };
        match self.protocol.body(&body) {
            Ok(message) => checked(message),
            Err(BodyError::Failed(failure)) => Err(failure),
            Err(BodyError::NotFormat(expected)) => {
                let offset = self
                    .buffer
                    .iter()
                    .position(|b| !b.is_ascii_whitespace())
                    .unwrap_or(0);
                self.report.format_error = Some(FormatError { offset, expected });
                Err(Failure::incomplete(P::API))
            }
        }
    }
}

/// The answer, if the core can take it ([`AssistantMessage::check_shape`]: every tool call
/// with an id and a name, ids unique within the message). A response that breaks this is
/// broken (`stream_error`), never a `model_done` the core would refuse as misuse.
fn checked(message: AssistantMessage) -> Result<AssistantMessage, Failure> {
    match message.check_shape() {
        Ok(()) => Ok(message),
        Err(problem) => Err(Failure {
            code: FailureCode::StreamError,
            message: format!("the response is broken: {problem}"),
        }),
    }
}

/// The byte offset of serde_json's 1-based line and column (column counts bytes).
fn byte_offset(body: &[u8], line: usize, column: usize) -> usize {
    let mut offset = 0;
    let mut current = 1;
    for (index, byte) in body.iter().enumerate() {
        if current >= line {
            break;
        }
        if *byte == b'\n' {
            current += 1;
            offset = index + 1;
        }
    }
    offset
        .saturating_add(column.saturating_sub(1))
        .min(body.len())
}
