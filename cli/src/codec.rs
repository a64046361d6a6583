//! `runcore codec encode|decode` (SPEC §12.6): the provider codecs of `runcore-providers` on
//! stdin and stdout.
//!
//! Exit status: 0 success (a failed or cut-short response is data: a `model_failed` line);
//! 1 stdin, stdout or `--headers-file` failed, the call_model line or the options are not what
//! encode needs, or a 2xx body is not the API's format at all (one line on stderr naming the
//! byte offset, nothing on stdout); 2 a usage error.
//!
//! `decode --header 'Name: value'` (repeatable) and `--headers-file FILE` give the decoder the
//! response's headers, so a `model_failed` line carries `retry_after_ms` (SPEC §13); a date in
//! them is a delay from `--now-ms`, else the response's `date` header, else now.

use std::io::{self, Read, Write};
use std::process::ExitCode;

use runcore_providers::{CallModelContext, Options, OptionsError};
use serde_json::Value;

use crate::args::{CodecAction, CodecArgs, CodecDecodeArgs, CodecEncodeArgs, parse_header};
use crate::write_stdout;

/// Runs `runcore codec …`.
pub fn main(args: CodecArgs) -> ExitCode {
    match args.action {
        CodecAction::Encode(args) => encode(args),
        CodecAction::Decode(args) => decode(args),
    }
}

fn fail(command: &str, message: &str) -> ExitCode {
    eprintln!("runcore codec {command}: {message}");
    ExitCode::FAILURE
}

fn encode(args: CodecEncodeArgs) -> ExitCode {
    let mut options = match args.options.as_deref().map(serde_json::from_str::<Value>) {
        None => serde_json::Map::new(),
        Some(Ok(Value::Object(options))) => options,
        Some(Ok(_)) => return fail("encode", "--options must be a JSON object"),
        Some(Err(error)) => return fail("encode", &format!("--options is not JSON: {error}")),
    };
    if let Some(model) = args.model {
        options.insert("model".into(), Value::from(model));
    }
    let options = match Options::from_value(Value::Object(options)) {
        Ok(options) => options,
        Err(OptionsError::MissingModel) => {
            return fail(
                "encode",
                "a model is required: --model M or \"model\" in --options",
            );
        }
        Err(error) => return fail("encode", &format!("--{error}")),
    };
    let mut input = String::new();
    if let Err(error) = io::stdin().read_to_string(&mut input) {
        return fail("encode", &format!("reading stdin failed: {error}"));
    }
    let context: CallModelContext = match serde_json::from_str(input.trim()) {
        Ok(context) => context,
        Err(error) => {
            return fail(
                "encode",
                &format!("stdin is not a full-context call_model line: {error}"),
            );
        }
    };
    let encoded = match args.api.api().encode(&context, &options) {
        Ok(encoded) => encoded,
        Err(error) => return fail("encode", &error.to_string()),
    };
    for left_out in &encoded.left_out {
        eprintln!("{}", serde_json::json!({ "left_out": left_out }));
    }
    write_stdout(&format!("{}\n", encoded.body))
}

/// The headers of `--headers-file` then `--header`.
fn headers(args: &CodecDecodeArgs) -> Result<Vec<(String, String)>, String> {
    let mut headers = Vec::new();
    if let Some(path) = &args.headers_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading --headers-file {} failed: {e}", path.display()))?;
        for (number, line) in (1usize..).zip(text.lines()) {
            let line = line.trim();
            if line.is_empty() || line.starts_with("HTTP/") {
                continue;
            }
            let header = parse_header(line)
                .map_err(|e| format!("--headers-file {} line {number}: {e}", path.display()))?;
            headers.push(header);
        }
    }
    headers.extend(args.headers.iter().cloned());
    Ok(headers)
}

/// Now, for a date in the headers when neither `--now-ms` nor a `date` header says when the
/// response arrived.
fn now_ms() -> Option<u64> {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    u64::try_from(since.as_millis()).ok()
}

fn decode(args: CodecDecodeArgs) -> ExitCode {
    let headers = match headers(&args) {
        Ok(headers) => headers,
        Err(message) => return fail("decode", &message),
    };
    let has_date = headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("date"));
    let now = args
        .now_ms
        .or_else(|| if has_date { None } else { now_ms() });
    let mut decoder = args.api.api().decoder(args.run_id, args.step, args.status);
    decoder.set_headers(headers, now);
    let mut stdin = io::stdin().lock();
    let mut stdout = io::stdout().lock();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let read = match stdin.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return fail("decode", &format!("reading stdin failed: {error}")),
        };
        // Deltas are passed on as they arrive (a body that yields one is the API's format).
        let inputs = decoder.feed(buffer.get(..read).unwrap_or_default());
        if let Err(exit) = write_inputs(&mut stdout, &inputs) {
            return exit;
        }
    }
    let (inputs, report) = decoder.finish_with_report();
    if let Some(error) = report.format_error {
        return fail("decode", &error.to_string());
    }
    match write_inputs(&mut stdout, &inputs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(exit) => exit,
    }
}

fn write_inputs(out: &mut impl Write, inputs: &[runcore::Input]) -> Result<(), ExitCode> {
    if inputs.is_empty() {
        return Ok(());
    }
    let mut text = String::new();
    for input in inputs {
        match serde_json::to_string(input) {
            Ok(line) => {
                text.push_str(&line);
                text.push('\n');
            }
            Err(error) => return Err(fail("decode", &format!("internal error: {error}"))),
        }
    }
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(fail("decode", &format!("writing stdout failed: {e}"))),
    }
}
