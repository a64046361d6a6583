//! The backend-agnostic conformance suite (SPEC §7). Filled in by the store work.
