//! Shared test support of the binary's tests: snapshot settings.
//!
//! Snapshots live in the workspace's top-level `snapshots/` directory, beside the core's, named
//! `<test crate>__<name>.snap` (the same names they had before the binary moved into `cli/`).
#![allow(dead_code, unused_macros, unused_imports)]

pub mod collector;
pub mod console;
pub mod process;

/// Snapshots a rendered text under the workspace's `snapshots/` directory with a readable name
/// (`<test crate>__<name>.snap`), without the expression in the header.
macro_rules! snapshot {
    ($name:expr, $value:expr) => {
        insta::with_settings!({
            snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            let name = format!("{}__{}", env!("CARGO_CRATE_NAME"), $name);
            insta::assert_snapshot!(name, $value);
        })
    };
}

pub(crate) use snapshot;
