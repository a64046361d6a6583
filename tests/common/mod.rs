//! Shared test support: snapshot settings and proptest configuration.
//!
//! Every test file that uses these declares `mod common;`. Not every file uses every item.
#![allow(dead_code, unused_macros, unused_imports)]

pub mod harness;

use proptest::test_runner::{Config, FileFailurePersistence};

pub mod strategies;

/// Snapshots a rendered text under the top-level `snapshots/` directory with a readable name
/// (`<test file>__<name>.snap`), without the expression in the header.
macro_rules! snapshot {
    ($name:expr, $value:expr) => {
        insta::with_settings!({
            snapshot_path => "../snapshots",
            prepend_module_to_snapshot => true,
            omit_expression => true,
        }, {
            insta::assert_snapshot!($name, $value);
        })
    };
}

/// Snapshots a serializable value as pretty JSON (see [`snapshot!`]).
macro_rules! snapshot_json {
    ($name:expr, $value:expr) => {
        insta::with_settings!({
            snapshot_path => "../snapshots",
            prepend_module_to_snapshot => true,
            omit_expression => true,
        }, {
            insta::assert_json_snapshot!($name, $value);
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
