mod common;
use common::harness::{Harness, Reply};
use runcore::*;
use serde_json::json;

#[test]
fn smoke_tool_then_text() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([
        Reply::call("c1", "echo", json!({"x":1})),
        Reply::text("done"),
    ]);
    h.prompt("hi").unwrap();
    h.drive();
    println!("{}", h.rendered());
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
}

#[test]
fn smoke_gated() {
    let config = AgentConfig::default().with_tool("rm", ToolSpec::gated("remove", Some(100)));
    let mut h = Harness::new(config);
    h.script([
        Reply::calls(&[("c1", "rm"), ("c2", "echo"), ("c3", "rm")]),
        Reply::text("done"),
    ]);
    h.prompt("hi").unwrap();
    h.drive();
    h.resume(ResumeResult::allow()).unwrap();
    h.resume(ResumeResult::deny("no")).unwrap();
    h.drive();
    println!("{}", h.rendered());
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
}
