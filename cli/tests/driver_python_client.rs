//! The README's Python client (`tests/python_client.py`) runs against the real binary: it
//! converses with `runcore drive` through pipes (prompt, a tool call, its result, the answer)
//! and prints the run's end cause. Skipped with a note where `python3` is not installed.

use std::process::{Command, Stdio};

#[test]
fn python_client_runs_a_tool_call_to_natural_end() {
    let available = Command::new("python3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !available {
        println!("note: python3 is not available; the Python client was not run");
        return;
    }
    let client = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python_client.py");
    let output = Command::new("python3")
        .args([client, env!("CARGO_BIN_EXE_runcore")])
        .stdin(Stdio::null())
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the client failed:\n{stdout}{stderr}"
    );
    assert_eq!(stdout, "natural_end\n", "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}
