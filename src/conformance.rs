//! The backend-agnostic conformance suite (SPEC §7).
//!
//! Any type that implements [`CommitLog`](crate::store::CommitLog),
//! [`CheckpointReader`](crate::store::CheckpointReader) and [`StoreHandles`] can prove it keeps the
//! commit-log contract by running these cases. Each case is a plain function that takes a
//! fresh, empty store, drives it only through the two traits, and returns `Err` with a message
//! that says what was expected and what arrived. Nothing here panics, so a broken backend
//! produces a readable failure rather than an index-out-of-bounds inside the suite.
//!
//! # Using it from a backend crate
//!
//! Put one line in an integration test (e.g. `tests/conformance.rs`). It expands to one
//! `#[test]` per case, named after the case, each building a fresh store with the expression
//! you pass (a constructor path or a closure):
//!
//! ```ignore
//! runcore::conformance_tests!(my_backend::PostgresStore::connect_to_empty_test_db);
//! ```
//!
//! Or run every case yourself and report the results your own way:
//!
//! ```
//! use runcore::conformance;
//!
//! let results = conformance::run_all(|| runcore::store::SharedStore::new(runcore::store::MemoryStore::new()));
//! assert_eq!(results.len(), conformance::CASES.len());
//! for (case, result) in &results {
//!     assert!(result.is_ok(), "{case}: {result:?}");
//! }
//! ```
//!
//! # What the cases assume
//!
//! Nothing about a backend beyond the traits, plus three decisions where SPEC §7 is silent:
//! - The transcript digest is [`transcript_digest`](crate::store::transcript_digest), so that a
//!   [`TranscriptSnapshotRef`](crate::store::TranscriptSnapshotRef) pinned by one backend verifies on
//!   another.
//! - A retry of an already committed operation is answered from its stored receipt before any
//!   other check, so it gets `duplicate = true` even after the thread moved on or the run
//!   ended; otherwise a host that crashed after its final commit could never confirm it.
//! - Where the SPEC fixes an error's fields, the case compares the whole error value; where
//!   it fixes only the rule, it compares the stable [`code`](crate::CommitError::code).

use crate::store::{StoreError, StoreHandles};

mod claims;
mod concurrency;
mod events;
mod fences;
mod fork;
mod listings;
mod lossless;
mod operations;
mod reads;
mod support;
mod transcript;

pub use claims::{
    bad_claim_requests_are_refused, claim_epochs_grow_and_stale_claims_are_lost,
    claimed_commits_are_fenced, claims_are_granted_and_refused,
    due_work_lists_deadlines_and_orphans, racing_owners_get_one_claim,
};
pub use concurrency::{
    concurrent_commits_on_distinct_threads, concurrent_commits_on_one_thread,
    concurrent_fenced_writers_on_one_thread,
};
pub use events::{events_ordered_and_paged, sequences_are_dense_and_distinct};
pub use fences::{
    awaiting_to_awaiting_replaces_ticket, rejected_commits_change_no_read_result,
    run_id_reused_on_another_thread_is_rejected, terminal_run_is_fenced,
    ticket_appears_with_awaiting_and_disappears_with_next_commit,
};
pub use fork::forks_read_as_of_a_version;
pub use listings::{
    lost_ack_retry_appends_nothing, pending_tickets_listed_and_paged,
    thread_version_counts_commits, threads_listed_and_paged, two_writers_from_one_version,
};
pub use lossless::lossless_content_round_trips;
pub use operations::{
    operation_duplicate_returns_stored_receipt, operation_ordinal_conflict_is_rejected,
    operation_payload_reuse_is_rejected, operation_version_conflict_is_rejected,
};
pub use reads::{
    commit_then_read, commits_accumulate_and_latest_run_follows, committed_state_replays,
    empty_store_reads_are_absent, run_may_be_born_in_any_state, threads_are_isolated,
};
pub use transcript::transcript_snapshots;

/// One conformance case: it gets a fresh, empty store.
pub type Case<S> = fn(&mut S) -> CaseResult;

/// What a case returns: `Err` says what was expected and what arrived.
pub type CaseResult = Result<(), CaseFailure>;

/// A failed case: what was expected and what arrived, or which read failed in the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseFailure(pub String);

impl std::fmt::Display for CaseFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for CaseFailure {
    fn from(message: String) -> Self {
        CaseFailure(message)
    }
}

impl From<StoreError> for CaseFailure {
    fn from(error: StoreError) -> Self {
        CaseFailure(format!("a store call failed in the backend: {error}"))
    }
}

/// Declares the case list once, so [`CASES`] and [`run_all`] cannot drift apart.
macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        /// The name of every case, in the order [`run_all`] runs them. Each is also the name of
        /// a public function of this module and of a test that [`conformance_tests!`]
        /// generates.
        ///
        /// [`conformance_tests!`]: crate::conformance_tests
        pub const CASES: &[&str] = &[$(stringify!($case)),*];

        /// Every case with its name, for a store type `S`.
        pub fn cases<S: StoreHandles>() -> Vec<(&'static str, Case<S>)> {
            vec![$((stringify!($case), $case::<S> as Case<S>)),*]
        }
    };
}

cases!(
    commit_then_read,
    events_ordered_and_paged,
    commits_accumulate_and_latest_run_follows,
    run_may_be_born_in_any_state,
    terminal_run_is_fenced,
    ticket_appears_with_awaiting_and_disappears_with_next_commit,
    awaiting_to_awaiting_replaces_ticket,
    sequences_are_dense_and_distinct,
    empty_store_reads_are_absent,
    committed_state_replays,
    threads_are_isolated,
    run_id_reused_on_another_thread_is_rejected,
    operation_duplicate_returns_stored_receipt,
    operation_payload_reuse_is_rejected,
    operation_version_conflict_is_rejected,
    operation_ordinal_conflict_is_rejected,
    transcript_snapshots,
    rejected_commits_change_no_read_result,
    thread_version_counts_commits,
    two_writers_from_one_version,
    lost_ack_retry_appends_nothing,
    threads_listed_and_paged,
    pending_tickets_listed_and_paged,
    concurrent_commits_on_distinct_threads,
    concurrent_commits_on_one_thread,
    concurrent_fenced_writers_on_one_thread,
    claims_are_granted_and_refused,
    claim_epochs_grow_and_stale_claims_are_lost,
    claimed_commits_are_fenced,
    bad_claim_requests_are_refused,
    racing_owners_get_one_claim,
    due_work_lists_deadlines_and_orphans,
    lossless_content_round_trips,
    forks_read_as_of_a_version,
);

/// Runs every case, each against a fresh store from `make`, and returns `(name, result)` in
/// [`CASES`] order.
pub fn run_all<S, F>(make: F) -> Vec<(&'static str, CaseResult)>
where
    S: StoreHandles,
    F: Fn() -> S,
{
    cases::<S>()
        .into_iter()
        .map(|(name, case)| {
            let mut store = make();
            (name, case(&mut store))
        })
        .collect()
}

/// Expands to one `#[test]` per conformance case for the store built by `$make`
/// (anything callable with no arguments that returns a fresh, empty store), plus a test that
/// the expansion covers every name in [`CASES`](crate::conformance::CASES).
///
/// ```ignore
/// use runcore::store::SharedStore;
/// runcore::conformance_tests!(|| SharedStore::new(runcore::store::MemoryStore::new()));
/// ```
#[macro_export]
macro_rules! conformance_tests {
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let mut store = ($make)();
                if let Err(message) = $crate::conformance::$case(&mut store) {
                    panic!("conformance case `{}` failed: {}", stringify!($case), message);
                }
            }
        )*

        #[test]
        fn conformance_tests_cover_every_case() {
            let generated: &[&str] = &[$(stringify!($case)),*];
            assert_eq!(generated, $crate::conformance::CASES);
        }
    };
    ($make:expr $(,)?) => {
        $crate::conformance_tests!(@cases $make;
            commit_then_read,
            events_ordered_and_paged,
            commits_accumulate_and_latest_run_follows,
            run_may_be_born_in_any_state,
            terminal_run_is_fenced,
            ticket_appears_with_awaiting_and_disappears_with_next_commit,
            awaiting_to_awaiting_replaces_ticket,
            sequences_are_dense_and_distinct,
            empty_store_reads_are_absent,
            committed_state_replays,
            threads_are_isolated,
            run_id_reused_on_another_thread_is_rejected,
            operation_duplicate_returns_stored_receipt,
            operation_payload_reuse_is_rejected,
            operation_version_conflict_is_rejected,
            operation_ordinal_conflict_is_rejected,
            transcript_snapshots,
            rejected_commits_change_no_read_result,
            thread_version_counts_commits,
            two_writers_from_one_version,
            lost_ack_retry_appends_nothing,
            threads_listed_and_paged,
            pending_tickets_listed_and_paged,
            concurrent_commits_on_distinct_threads,
            concurrent_commits_on_one_thread,
            concurrent_fenced_writers_on_one_thread,
            claims_are_granted_and_refused,
            claim_epochs_grow_and_stale_claims_are_lost,
            claimed_commits_are_fenced,
            bad_claim_requests_are_refused,
            racing_owners_get_one_claim,
            due_work_lists_deadlines_and_orphans,
            lossless_content_round_trips,
            forks_read_as_of_a_version,
        );
    };
}
