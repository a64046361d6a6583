//! `runcore schema`: the JSON Schema (draft 2020-12) of the driver's lines (SPEC §12).
//!
//! The snapshot of `runcore schema` is the committed schema file: any change to the line types
//! shows up here as a reviewed diff. The schema is checked to be what it claims (JSON, draft
//! 2020-12, the input and output line schemas as embedded resources), and then checked against
//! real traffic: every input line of the scenario files must validate against the input
//! schema and every line the driver writes for them against the output schema, while lines the
//! driver rejects as `invalid_json` must fail the input schema too. Validation uses Python's
//! `jsonschema` package when `python3` has it, and is skipped with a note otherwise (the crate
//! takes no Rust dependency for it).

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use runcore::driver::{input_line_schema, json_schema, output_line_schema};
use serde_json::{Value, json};

const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scenarios");
const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

fn runcore(args: &[&str], stdin: &[u8]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_runcore"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn runcore");
    let mut pipe = child.stdin.take().expect("stdin");
    let input = stdin.to_vec();
    let writer = std::thread::spawn(move || pipe.write_all(&input));
    let output = child.wait_with_output().expect("wait for runcore");
    writer.join().expect("writer").expect("write stdin");
    assert!(
        output.status.success(),
        "runcore {args:?}: {}",
        output.status
    );
    assert!(output.stderr.is_empty(), "runcore {args:?} wrote to stderr");
    String::from_utf8(output.stdout).expect("UTF-8")
}

fn schema_of(args: &[&str]) -> Value {
    let text = runcore(args, b"");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("runcore {args:?} is not JSON: {e}"))
}

#[test]
fn schema_is_the_committed_file() {
    let text = runcore(&["schema"], b"");
    common::snapshot!("schema", text.clone());
    let schema: Value = serde_json::from_str(&text).expect("runcore schema prints JSON");
    assert_eq!(schema["$schema"], DRAFT_2020_12);
    assert_eq!(
        schema,
        json_schema(),
        "the binary prints the library's schema"
    );
    for (name, id) in [
        ("input_line", "urn:runcore:driver:input-line"),
        ("output_line", "urn:runcore:driver:output-line"),
    ] {
        let embedded = &schema["$defs"][name];
        assert_eq!(embedded["$id"], id, "{name} is an embedded resource");
        assert!(
            embedded.get("$schema").is_none(),
            "{name}: one $schema, at the root"
        );
    }
}

#[test]
fn schema_input_and_output_print_one_line_schema_each() {
    for (arg, expected) in [
        ("input", input_line_schema()),
        ("output", output_line_schema()),
    ] {
        let schema = schema_of(&["schema", arg]);
        assert_eq!(schema["$schema"], DRAFT_2020_12, "schema {arg}");
        assert_eq!(schema, expected, "schema {arg}");
    }
}

#[test]
fn every_line_type_of_spec_12_is_in_the_schema() {
    let tags = |schema: &Value| -> Vec<String> {
        let mut tags = Vec::new();
        let variants = schema["oneOf"]
            .as_array()
            .or_else(|| schema["anyOf"].as_array());
        for variant in variants.into_iter().flatten() {
            if let Some(tag) = variant["properties"]["type"]["const"].as_str() {
                tags.push(tag.to_owned());
            }
        }
        tags.sort();
        tags
    };
    let mut input = vec![
        "config",
        "prompt",
        "steer",
        "follow_up",
        "abort",
        "pause",
        "model_delta",
        "model_done",
        "model_failed",
        "tool_progress",
        "tool_done",
        "resume",
        "resume_ticket",
        "cancel_wait",
        "stop",
        "expire_wait",
        "abandon_tools",
        // SPEC §12.1
        "continue",
        "timeout",
        // SPEC §12.4
        "compact",
        // SPEC §8.2
        "clear_queues",
        "set_queue_modes",
        // SPEC §12.6
        "import",
    ];
    input.sort();
    assert_eq!(tags(&input_line_schema()), input);
    let mut output = vec![
        "call_model",
        "execute_tools",
        "commit",
        "event",
        "error",
        "idle",
    ];
    output.sort();
    assert_eq!(tags(&output_line_schema()), output);
}

// ----- validation against real traffic (Python jsonschema) -------------------------------------

/// Validates each line of `lines` (one JSON document per line) against `schema`; lines
/// prefixed `!` must fail. Prints one line per problem and exits 1 if there is any.
const VALIDATE: &str = r#"
import json, sys
from jsonschema import Draft202012Validator
schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
validator = Draft202012Validator(schema)
problems, checked = [], 0
for number, line in enumerate(open(sys.argv[2], encoding="utf-8"), 1):
    line = line.rstrip("\n")
    must_fail = line.startswith("!")
    document = json.loads(line[1:] if must_fail else line)
    errors = list(validator.iter_errors(document))
    checked += 1
    if must_fail and not errors:
        problems.append(f"line {number}: accepted but the driver rejects it: {line[:200]}")
    if not must_fail and errors:
        best = min(errors, key=lambda e: len(list(e.path)))
        problems.append(f"line {number}: {best.message[:300]} at {list(best.path)}: {line[:200]}")
for problem in problems:
    print(problem)
print(f"checked {checked}")
sys.exit(1 if problems else 0)
"#;

fn python_jsonschema_available() -> bool {
    Command::new("python3")
        .args(["-c", "import jsonschema"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs [`VALIDATE`] on `schema` and `lines`; panics with the problems it prints.
fn validate(name: &str, schema: &Value, lines: &[String]) {
    let temp = tempfile::Builder::new()
        .prefix("runcore-driver-schema-")
        .tempdir()
        .expect("temp dir");
    let dir = temp.path();
    let schema_path = dir.join(format!("{name}.schema.json"));
    let lines_path = dir.join(format!("{name}.jsonl"));
    std::fs::write(&schema_path, schema.to_string()).expect("write schema");
    std::fs::write(&lines_path, lines.join("\n") + "\n").expect("write lines");
    let output = Command::new("python3")
        .args(["-c", VALIDATE])
        .args([&schema_path, &lines_path].map(|p| p.as_os_str()))
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{name}: lines do not match the schema:\n{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(&format!("checked {}", lines.len())),
        "{name}: {stdout}"
    );
}

fn scenario_files() -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(SCENARIOS)
        .expect("tests/scenarios")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files
}

/// The scenario's output lines, in full or delta context mode (the cold half of T6 runs on a
/// fresh driver here: its lines are rejected there, which gives error lines to validate too).
fn outputs_of(path: &Path, delta: bool) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("read scenario");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    if delta {
        let first: Value = serde_json::from_str(&lines[0]).expect("JSON");
        if first["type"] == "config" {
            let mut config = first;
            config["context"] = json!("delta");
            lines[0] = config.to_string();
        } else {
            lines.insert(0, json!({"type": "config", "context": "delta"}).to_string());
        }
    }
    runcore(&["drive"], (lines.join("\n") + "\n").as_bytes())
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn scenario_lines_validate_against_the_schema() {
    if !python_jsonschema_available() {
        println!("note: python3 with the jsonschema package is not available; skipped");
        return;
    }
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    for path in scenario_files() {
        let text = std::fs::read_to_string(&path).expect("read scenario");
        inputs.extend(text.lines().map(str::to_owned));
        outputs.extend(outputs_of(&path, false));
        outputs.extend(outputs_of(&path, true));
    }
    assert!(
        outputs.iter().any(|l| l.contains(r#""base":"#)),
        "delta lines included"
    );
    assert!(outputs.iter().any(|l| l.starts_with(r#"{"type":"error""#)));

    // Lines the driver rejects as invalid_json must fail the input schema as well.
    let rejected = [
        json!({"type": "dance"}),
        json!({"text": "no type"}),
        json!({"type": "steer"}),
        json!({"type": "abort", "extra": true}),
        json!({"type": "model_delta", "run_id": "r", "step": "one", "text": "x"}),
        json!({"type": "model_done", "run_id": "r", "step": 1,
               "message": {"role": "user", "content": [], "stop_reason": "stop"}}),
        json!({"type": "tool_done", "run_id": "r", "call_id": "c", "content": 7}),
        json!({"type": "config", "tools": {"t": {"policy": "sometimes"}}}),
        json!({"type": "expire_wait"}),
        json!([1, 2, 3]),
    ];
    let mut driver = runcore::driver::Driver::new();
    for line in &rejected {
        let out = driver.handle_line(line.to_string().as_bytes());
        assert!(
            out[0].contains(r#""kind":"invalid_json""#),
            "{line}: {out:?}"
        );
        inputs.push(format!("!{line}"));
    }
    // Output lines that break the contract must fail the output schema.
    for line in [
        json!({"type": "idle"}),
        json!({"type": "idle", "line": "one"}),
        json!({"type": "error", "line": 1, "error": {"kind": "busy"}}),
        json!({"type": "call_model", "run_id": "r", "step": 1, "final_step": false}),
        json!({"type": "shrug"}),
    ] {
        outputs.push(format!("!{line}"));
    }

    validate("input", &input_line_schema(), &inputs);
    validate("output", &output_line_schema(), &outputs);
    // The compound document resolves its embedded resources the same way.
    for (name, lines) in [("input_line", &inputs), ("output_line", &outputs)] {
        let mut root = json_schema();
        root["$ref"] = json!(format!("#/$defs/{name}"));
        validate(&format!("compound_{name}"), &root, lines);
    }
}
