//! The npm package `runcore`: the deterministic core of AI agent runs in Node.js, over the very
//! code `runcore drive` runs. This crate exports three native classes; `index.js` wraps them
//! in the package's API (`Agent`, `Driver`, the stores, the error classes) and `index.d.ts`
//! types it.
//!
//! Every output is the driver's own output line: it crosses as a tape (`tape`) from which
//! `index.js` builds exactly the object `JSON.parse` makes of the line `runcore drive` writes,
//! or as that JSON text, so the package's objects and the binary's lines cannot drift. Every error
//! crosses as a thrown `Error` carrying its JSON body (see `errors`), and a Rust panic is
//! caught at the boundary.

#![warn(missing_docs)]
// Every `unsafe` block says why it is sound, and every `unsafe fn` what its callers owe.
#![deny(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

mod agent;
mod driver;
mod errors;
mod napi_memory;
mod providers;
mod raw;
pub mod shared_candidates;
mod store;
mod tape;
