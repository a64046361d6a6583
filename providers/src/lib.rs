//! Provider codecs for runcore (SPEC §13): the model's wire format as pure functions.
//!
//! Every host has to turn a `call_model` into a provider request and the provider's response
//! back into inputs. This crate does it once, without I/O (no HTTP, no async, no clock), for
//! three APIs, one module each:
//!
//! | module | API | request | response |
//! |---|---|---|---|
//! | [`anthropic`] | Messages (`POST /v1/messages`) | `system`, `messages`, `tools` | SSE or JSON |
//! | [`openai_chat`] | Chat Completions (`POST /v1/chat/completions`) | `messages`, `tools` | SSE or JSON |
//! | [`openai_responses`] | Responses (`POST /v1/responses`) | `instructions`, `input`, `tools` | SSE or JSON |
//!
//! Each module has `encode(&CallModelContext, &Options) -> Result<Encoded, EncodeError>` and a
//! `Decoder` ([`StreamDecoder`]): `Decoder::new(run_id, step)` (or `with_status` for a non-2xx
//! response), `feed(bytes)` in chunks split anywhere, then `finish()`. The inputs are
//! `model_delta`s (text and thinking) as they arrive, then exactly one `model_done` or
//! `model_failed`, ready for `Agent::handle_input` or a `runcore drive` line.
//!
//! ```
//! use runcore::Input;
//! use runcore_providers::{CallModelContext, Options, anthropic};
//!
//! let context: CallModelContext = serde_json::from_str(
//!     r#"{"type":"call_model","run_id":"r","step":1,"final_step":false,
//!         "messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"tools":[]}"#,
//! ).unwrap();
//! let request = anthropic::encode(&context, &Options::new("claude-sonnet-4-6")).unwrap();
//! assert_eq!(request.body["messages"][0]["role"], "user");
//!
//! let mut decoder = anthropic::Decoder::new("r", 1);
//! let mut inputs = decoder.feed(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"claude-sonnet-4-6\",\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n");
//! inputs.extend(decoder.feed(b"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel"));
//! inputs.extend(decoder.feed(b"lo\"}}\n\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\ndata: {\"type\":\"message_stop\"}\n\n"));
//! inputs.extend(decoder.finish());
//! assert!(matches!(&inputs[0], Input::ModelDelta { text, .. } if text == "Hello"));
//! assert!(matches!(inputs.last(), Some(Input::ModelDone { .. })));
//! ```
//!
//! # Where provider data is kept (SPEC §2.1)
//!
//! - The message's `model`, `response_id` and `provider_stop_reason` are the provider's; its
//!   `meta` holds `{"codec": {"api": "anthropic" | "openai-chat" | "openai-responses"}}`: the API
//!   the content came from. Together with `model` it decides "the same API and model".
//! - Anthropic: thinking `signature` and `redacted_thinking` data are first-class fields.
//! - OpenAI Responses: each block's `meta` holds `{"openai_responses": {…}}`: for a thinking
//!   block the whole reasoning item as it came (`type`, `id`, `summary`, `encrypted_content`,
//!   `content`); for a tool call `{"type": "function_call", "id": "fc_…", "status"}`; for a
//!   text block `{"type": "message", "id": "msg_…", "status", "part": <the content part without
//!   its text>}`.
//!
//! # What is sent back (SPEC §13)
//!
//! Provider-opaque content (signatures, redacted thinking, reasoning items, item ids) is sent
//! only to the API and model it came from (a dated model name counts as the same model:
//! `gpt-4o-mini-2024-07-18` answers a request for `gpt-4o-mini`); otherwise it is left out and
//! the [`Encoded::left_out`] list says what and why. A tool call without its result in the
//! context, or a result without its call, is left out the same way, so the body always pairs
//! them. System messages in the transcript join the API's system field (Anthropic's `system`;
//! Chat `system` messages and Responses `system` message items, in place).
//!
//! # Decoding
//!
//! Stop reasons follow SPEC §13's table, with the provider's word in `provider_stop_reason`;
//! failures carry the stable codes of [`FailureCode`]. Tool-call arguments are accumulated per
//! call (by index, by item id) and parsed once at the end; arguments that are not a JSON object
//! are passed on as their raw text (a JSON string), which the core answers `malformed` (or
//! `truncated` in a `length` answer) without executing the call. Anthropic server-tool blocks
//! (`server_tool_use`, `web_search_tool_result`) and other block types runcore has no block for
//! are not kept.
//!
//! # Rate limits
//!
//! A decoder may be given the response's headers ([`StreamDecoder::set_headers`], with the
//! host's `now_ms` as the reference for a date, else the response's `date` header): a
//! `model_failed` then carries the wait the provider asked for in `retry_after_ms`, from
//! `retry-after-ms`, `retry-after` (seconds or an HTTP date) or, for `rate_limited`, the
//! providers' rate-limit reset headers. The crate reads no clock.
#![warn(missing_docs)]

pub mod anthropic;
mod context;
mod decode;
mod encode;
mod failure;
pub mod openai_chat;
pub mod openai_responses;
mod retry;
mod sse;
mod wire;

pub use context::{CallModelContext, ToolDefinition};
#[doc(hidden)]
pub use decode::{BodyError, Deltas, EventOutcome, Protocol};
pub use decode::{DecodeReport, FormatError, StreamDecoder};
pub use encode::{EncodeError, Encoded, LeftOut, Options, OptionsError};
pub use failure::{Failure, FailureCode};

/// The `meta` key of a decoded assistant message that names the API its content came from.
pub const CODEC_META_KEY: &str = "codec";

/// One of the three APIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Api {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Chat Completions.
    OpenAiChat,
    /// OpenAI Responses.
    OpenAiResponses,
}

impl Api {
    /// Every API.
    pub const ALL: [Api; 3] = [Api::Anthropic, Api::OpenAiChat, Api::OpenAiResponses];

    /// The name used on the command line and in `meta`: `anthropic`, `openai-chat`,
    /// `openai-responses`.
    pub fn name(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::OpenAiChat => "openai-chat",
            Api::OpenAiResponses => "openai-responses",
        }
    }

    /// The API named `name` (see [`Api::name`]).
    pub fn from_name(name: &str) -> Option<Api> {
        Api::ALL.into_iter().find(|api| api.name() == name)
    }

    /// The event that ends a complete response of this API.
    pub fn terminal_event(self) -> &'static str {
        match self {
            Api::Anthropic => "message_stop",
            Api::OpenAiChat => "[DONE] or a finish_reason",
            Api::OpenAiResponses => "response.completed or response.incomplete",
        }
    }

    /// Encodes `context` as this API's request body.
    pub fn encode(
        self,
        context: &CallModelContext,
        options: &Options,
    ) -> Result<Encoded, EncodeError> {
        match self {
            Api::Anthropic => anthropic::encode(context, options),
            Api::OpenAiChat => openai_chat::encode(context, options),
            Api::OpenAiResponses => openai_responses::encode(context, options),
        }
    }

    /// A decoder of this API's response with HTTP status `status`.
    pub fn decoder(
        self,
        run_id: impl Into<runcore::RunId>,
        step: runcore::Step,
        status: u16,
    ) -> AnyDecoder {
        match self {
            Api::Anthropic => {
                AnyDecoder::Anthropic(anthropic::Decoder::with_status(run_id, step, status))
            }
            Api::OpenAiChat => {
                AnyDecoder::OpenAiChat(openai_chat::Decoder::with_status(run_id, step, status))
            }
            Api::OpenAiResponses => AnyDecoder::OpenAiResponses(
                openai_responses::Decoder::with_status(run_id, step, status),
            ),
        }
    }
}

/// A decoder of any of the three APIs, chosen at run time (the CLI's `--api`).
#[derive(Debug)]
pub enum AnyDecoder {
    /// [`anthropic::Decoder`].
    Anthropic(anthropic::Decoder),
    /// [`openai_chat::Decoder`].
    OpenAiChat(openai_chat::Decoder),
    /// [`openai_responses::Decoder`].
    OpenAiResponses(openai_responses::Decoder),
}

impl AnyDecoder {
    /// See [`StreamDecoder::feed`].
    #[must_use]
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<runcore::Input> {
        match self {
            AnyDecoder::Anthropic(d) => d.feed(bytes),
            AnyDecoder::OpenAiChat(d) => d.feed(bytes),
            AnyDecoder::OpenAiResponses(d) => d.feed(bytes),
        }
    }

    /// See [`StreamDecoder::set_headers`].
    pub fn set_headers<K, V>(
        &mut self,
        headers: impl IntoIterator<Item = (K, V)>,
        now_ms: Option<u64>,
    ) where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        match self {
            AnyDecoder::Anthropic(d) => d.set_headers(headers, now_ms),
            AnyDecoder::OpenAiChat(d) => d.set_headers(headers, now_ms),
            AnyDecoder::OpenAiResponses(d) => d.set_headers(headers, now_ms),
        }
    }

    /// See [`StreamDecoder::finish_with_report`].
    pub fn finish_with_report(self) -> (Vec<runcore::Input>, DecodeReport) {
        match self {
            AnyDecoder::Anthropic(d) => d.finish_with_report(),
            AnyDecoder::OpenAiChat(d) => d.finish_with_report(),
            AnyDecoder::OpenAiResponses(d) => d.finish_with_report(),
        }
    }
}
