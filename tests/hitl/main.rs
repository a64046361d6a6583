//! Human in the loop (SPEC §4, §8.3, §8.5, §11 T5): approvals, the wait controls (cancel,
//! expiry, abort, stop, pause, abandoning tools) and the resume checks, through the public
//! API.
//!
//! Every scenario asserts the behaviour explicitly first (the harness also checks its
//! invariants after every drained output), then snapshots the rendered trace, so a snapshot is
//! a reviewed picture of behaviour that is already checked.
//!
//! - [`approvals`]: T5 allow, deny, two gated calls.
//! - [`resume_validation`]: duplicate, stale and forged resumes; result kinds that do not fit.
//! - [`expiry`]: expired resumes, `expire_wait`, deadlines.
//! - [`wait_controls`]: cancel, abort, stop, pause, abandoning tools.
//! - [`resume_commits`]: what an accepted resume commits (context, audit, ticket deletion).
//! - [`support`]: the helpers they share.

#[path = "../common/mod.rs"]
mod common;
mod support;

mod approvals;
mod expiry;
mod resume_commits;
mod resume_validation;
mod wait_controls;
