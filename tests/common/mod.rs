//! Shared test support: snapshot settings and proptest configuration.
//!
//! Every test crate that uses these declares `mod common;` (a directory test crate such as
//! `tests/hitl/`: `#[path = "../common/mod.rs"] mod common;`). Not every crate uses every item.
#![allow(dead_code, unused_macros, unused_imports)]

pub mod harness;

use proptest::test_runner::{Config, FileFailurePersistence};

pub mod strategies;

/// Snapshots a rendered text under the top-level `snapshots/` directory with a readable name
/// (`<test crate>__<name>.snap`), without the expression in the header.
///
/// The path is absolute and the prefix is the test crate's name rather than insta's module
/// prefix, so a test in a module of a directory test crate (`tests/hitl/expiry.rs`) finds the
/// same snapshot as one at the crate root (`hitl__<name>.snap`, not `hitl__expiry__<name>.snap`).
macro_rules! snapshot {
    ($name:expr, $value:expr) => {
        insta::with_settings!({
            snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            let name = format!("{}__{}", env!("CARGO_CRATE_NAME"), $name);
            insta::assert_snapshot!(name, $value);
        })
    };
}

/// Snapshots a serializable value as pretty JSON (see [`snapshot!`]).
macro_rules! snapshot_json {
    ($name:expr, $value:expr) => {
        insta::with_settings!({
            snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            let name = format!("{}__{}", env!("CARGO_CRATE_NAME"), $name);
            insta::assert_json_snapshot!(name, $value);
        })
    };
}

pub(crate) use snapshot;
pub(crate) use snapshot_json;

/// A proptest config with `cases` cases whose failing seeds are persisted under the top-level
/// `proptest-regressions/` directory as `<file>.txt` (cargo runs tests from the package root).
pub fn proptest_config(file: &'static str, cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(file))),
        ..Config::default()
    }
}
