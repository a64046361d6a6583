//! `NativeProviderDecoder` and `providerEncode`, wrapped by `providers.anthropic`,
//! `providers.openaiChat`… in `index.js`: the provider codecs of `runcore-providers` (SPEC §13).
//!
//! Translation only: `encode` reads the `call_model` output and the options (JSON text from
//! `index.js`) with the crate's own serde types and returns the crate's `Encoded` as JSON text;
//! a decoder wraps the crate's decoder and returns its inputs as the JSON text of an array of
//! driver input lines (`agent.handle` takes each as it is). Every rule lives in the crate.

use napi::bindgen_prelude::Uint8Array;
use napi_derive::napi;
use runcore_providers::{AnyDecoder, Api, CallModelContext, Options};
use serde_json::{Value, json};

use crate::errors::{guard, internal};

/// A codec error: `index.js` throws it as `CodecError` with `code` and `message`.
fn codec_error(code: &str, message: impl Into<String>) -> napi::Error {
    napi::Error::from_reason(format!(
        "runcore:{}",
        json!({"kind": "codec", "code": code, "message": message.into()})
    ))
}

fn api_named(name: &str) -> napi::Result<Api> {
    Api::from_name(name).ok_or_else(|| {
        codec_error(
            "api",
            format!(
                "unknown API {name:?}: expected \"anthropic\", \"openai-chat\" or \"openai-responses\""
            ),
        )
    })
}

// Only reached through the exported function below, which a test build does not register.
#[cfg_attr(test, allow(dead_code))]
fn encode_now(api: &str, call_model: &str, options: &str) -> napi::Result<String> {
    let api = api_named(api)?;
    let options: Value = serde_json::from_str(options)
        .map_err(|e| codec_error("options", format!("options are not JSON: {e}")))?;
    let options =
        Options::from_value(options).map_err(|e| codec_error("options", e.to_string()))?;
    let context: CallModelContext = serde_json::from_str(call_model).map_err(|e| {
        codec_error(
            "call_model",
            format!("callModel is not a full-context call_model output: {e}"),
        )
    })?;
    let encoded = api
        .encode(&context, &options)
        .map_err(|e| codec_error("options", e.to_string()))?;
    serde_json::to_string(&encoded).map_err(|e| internal(format!("encoded body: {e}")))
}

/// Encodes a `call_model` output (JSON text, full-context mode) as the request body of API
/// `api`: the JSON text of `{"body": …, "left_out": […]}`.
#[napi]
#[cfg_attr(test, allow(dead_code))]
pub fn provider_encode(api: String, call_model: String, options: String) -> napi::Result<String> {
    guard(|| encode_now(&api, &call_model, &options))
        .map_err(|()| internal("runcore panicked (a bug) in encode"))?
}

/// Now, in milliseconds since the epoch: the reference for a date in the headers when neither
/// `nowMs` nor a `date` header gives one.
fn clock_ms() -> Option<u64> {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    u64::try_from(since.as_millis()).ok()
}

/// A stream decoder of one model call's response.
#[napi]
pub struct NativeProviderDecoder {
    api: Api,
    inner: Option<AnyDecoder>,
    format_error: Option<String>,
}

fn inputs_json(inputs: &[runcore::Input]) -> napi::Result<String> {
    serde_json::to_string(inputs).map_err(|e| internal(format!("decoded inputs: {e}")))
}

#[napi]
impl NativeProviderDecoder {
    /// A decoder for API `api`'s response to call `step` of run `run_id` with HTTP `status`;
    /// `headers` is the JSON text of the response's `[name, value]` pairs (from `index.js`), so
    /// that a `model_failed` carries `retry_after_ms`; a date in them is a delay from `now_ms`,
    /// else the response's `date` header, else now.
    #[napi(constructor)]
    pub fn new(
        api: String,
        run_id: String,
        step: f64,
        status: Option<f64>,
        headers: Option<String>,
        now_ms: Option<f64>,
    ) -> napi::Result<Self> {
        let api = api_named(&api)?;
        if !(step.is_finite() && step >= 0.0 && step <= f64::from(u32::MAX) && step.fract() == 0.0)
        {
            return Err(codec_error(
                "options",
                format!("step must be an integer from 0 to {}, got {step}", u32::MAX),
            ));
        }
        let status = match status {
            None => 200,
            Some(s) if s.is_finite() && s.fract() == 0.0 && (100.0..=999.0).contains(&s) => {
                s as u16
            }
            Some(s) => {
                return Err(codec_error(
                    "options",
                    format!("status must be an HTTP status (100 to 999), got {s}"),
                ));
            }
        };
        let now_ms = match now_ms {
            None => None,
            Some(n)
                if n.is_finite()
                    && n >= 0.0
                    && n.fract() == 0.0
                    && n <= 9_007_199_254_740_991.0 =>
            {
                Some(n as u64)
            }
            Some(n) => {
                return Err(codec_error(
                    "options",
                    format!("nowMs must be a non-negative integer (milliseconds), got {n}"),
                ));
            }
        };
        let mut decoder = api.decoder(run_id, step as u32, status);
        if let Some(headers) = headers {
            let headers: Vec<(String, String)> = serde_json::from_str(&headers).map_err(|e| {
                codec_error(
                    "options",
                    format!("headers must be [name, value] pairs: {e}"),
                )
            })?;
            let has_date = headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case("date"));
            let now = now_ms.or_else(|| if has_date { None } else { clock_ms() });
            decoder.set_headers(headers, now);
        }
        Ok(NativeProviderDecoder {
            api,
            inner: Some(decoder),
            format_error: None,
        })
    }

    fn finished(&self) -> napi::Error {
        codec_error(
            "finished",
            format!(
                "this {} decoder is finished: make a new one for the next response",
                self.api.name()
            ),
        )
    }

    /// Feeds the next bytes; the JSON text of the inputs they complete.
    #[napi]
    pub fn feed(&mut self, data: Uint8Array) -> napi::Result<String> {
        let Some(decoder) = self.inner.as_mut() else {
            return Err(self.finished());
        };
        guard(|| inputs_json(&decoder.feed(&data)))
            .map_err(|()| internal("runcore panicked (a bug) in feed"))?
    }

    /// Ends the body: the JSON text of the last inputs (exactly one `model_done` or
    /// `model_failed` last).
    #[napi]
    pub fn finish(&mut self) -> napi::Result<String> {
        let Some(decoder) = self.inner.take() else {
            return Err(self.finished());
        };
        let (inputs, report) = guard(|| decoder.finish_with_report())
            .map_err(|()| internal("runcore panicked (a bug) in finish"))?;
        self.format_error = report.format_error.map(|e| e.to_string());
        inputs_json(&inputs)
    }

    /// After `finish()`: where a 2xx body stopped being the API's format, if it never was.
    #[napi(getter)]
    pub fn format_error(&self) -> Option<String> {
        self.format_error.clone()
    }
}
