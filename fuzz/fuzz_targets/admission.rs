//! Fuzzes commit admission (SPEC §7, §7.1): the input bytes are a program of commits, fenced
//! and plain, valid or not, on two threads, run by `MemoryStore` (whose every commit goes
//! through the core's one admission function) and by a naive model of the contract written
//! here from the SPEC's rules, not from the store's code. Each commit's answer — accepted with
//! its version, a duplicate with the first receipt, or the error's code — must be the model's.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use runcore::{CommitOperation, CommitReceipt, EndCause, Message, RunDisposition, RunId, ThreadCommit, ThreadId};
use runcore::store::{CommitLog, MemoryStore, StoreError};

/// What the model knows of a run.
struct Run {
    thread: String,
    commits: u64,
    ended: bool,
}

/// The contract, naively: counters and maps, checked in the SPEC's order.
#[derive(Default)]
struct Model {
    versions: BTreeMap<String, u64>,
    runs: BTreeMap<String, Run>,
    /// Operation id (run, ordinal) → (payload hash, the receipt's thread version).
    operations: BTreeMap<(String, u64), (String, u64)>,
}

/// What a commit got: a new version, a duplicate of the version first committed, or an error.
#[derive(Debug, PartialEq)]
enum Answer {
    Appended(u64),
    Duplicate(u64),
    Refused(&'static str),
}

impl Model {
    fn admit(&mut self, thread: &str, run: &str, ended: bool, fence: Option<(u64, u64, &str)>) -> Answer {
        if run.is_empty() {
            return Answer::Refused("empty_run_id");
        }
        if let Some((ordinal, _, hash)) = fence {
            if let Some((stored, version)) = self.operations.get(&(run.to_owned(), ordinal)) {
                return if stored == hash {
                    Answer::Duplicate(*version)
                } else {
                    Answer::Refused("payload_mismatch")
                };
            }
        }
        let version = self.versions.get(thread).copied().unwrap_or(0);
        let stored = self.runs.get(run);
        if let Some((ordinal, expected, _)) = fence {
            if expected != version {
                return Answer::Refused("version_conflict");
            }
            if ordinal != stored.map_or(0, |r| r.commits) {
                return Answer::Refused("ordinal_conflict");
            }
        }
        if stored.is_some_and(|r| r.ended) {
            return Answer::Refused("already_terminal");
        }
        if stored.is_some_and(|r| r.thread != thread) {
            return Answer::Refused("run_on_other_thread");
        }
        let version = version + 1;
        self.versions.insert(thread.to_owned(), version);
        let entry = self.runs.entry(run.to_owned()).or_insert(Run {
            thread: thread.to_owned(),
            commits: 0,
            ended: false,
        });
        entry.commits += 1;
        entry.ended = ended;
        if let Some((ordinal, _, hash)) = fence {
            self.operations.insert((run.to_owned(), ordinal), (hash.to_owned(), version));
        }
        Answer::Appended(version)
    }
}

fn answer_of(result: Result<(u64, bool), StoreError>) -> Answer {
    match result {
        Ok((version, false)) => Answer::Appended(version),
        Ok((version, true)) => Answer::Duplicate(version),
        Err(StoreError::Rejected(error)) => Answer::Refused(error.code()),
        Err(other) => panic!("MemoryStore never fails: {other}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut store = MemoryStore::new();
    let mut model = Model::default();
    for (step, chunk) in data.chunks_exact(4).enumerate() {
        let [what, target, skew, text] = [chunk[0], chunk[1], chunk[2], chunk[3]];
        let thread = if target & 1 == 0 { "a" } else { "b" };
        // The run: usually one of this thread's, sometimes the other thread's, or none.
        let run = match target >> 1 & 7 {
            0..=2 => format!("{thread}/run-{}", target >> 1 & 3),
            3..=5 => format!("a/run-{}", target >> 4 & 1),
            6 => format!("b/run-{}", target >> 4 & 1),
            _ => String::new(),
        };
        let ended = what & 2 != 0;
        let disposition = if ended {
            RunDisposition::Ended {
                run_id: RunId::new(run.as_str()),
                cause: EndCause::NaturalEnd,
            }
        } else {
            RunDisposition::Running {
                run_id: RunId::new(run.as_str()),
            }
        };
        let messages = match text % 4 {
            0 => Vec::new(),
            n => vec![Message::user(format!("m{n}"))],
        };
        let commit = ThreadCommit::assemble(
            ThreadId::new(thread),
            disposition,
            true,
            messages,
            Vec::new(),
            Vec::new(),
        );
        let (expected, result) = if what & 1 == 0 {
            // Fenced: the version and the ordinal right, or off by the skew.
            let version = model.versions.get(thread).copied().unwrap_or(0);
            let commits = model.runs.get(&run).map_or(0, |r| r.commits);
            let off = |n: u64, bits: u8| match bits & 3 {
                0 | 1 => n,
                2 => n.wrapping_add(1),
                _ => n.saturating_sub(1),
            };
            // A retry of an earlier ordinal now and then (a lost acknowledgement).
            let ordinal = if skew & 0x30 == 0x30 { commits.saturating_sub(1) } else { off(commits, skew >> 2) };
            let operation = CommitOperation::new(commit, ordinal, off(version, skew));
            let hash = operation.payload_hash.clone();
            let expected = model.admit(thread, &run, ended, Some((ordinal, operation.expected_thread_version, &hash)));
            let result = store.commit_operation(operation).map(|r: CommitReceipt| {
                assert_eq!(r.payload_hash, hash, "step {step}: the receipt's hash");
                (r.record.thread_version, r.duplicate)
            });
            (expected, result)
        } else {
            let expected = model.admit(thread, &run, ended, None);
            (expected, store.commit(commit).map(|r| (r.thread_version, false)))
        };
        assert_eq!(answer_of(result), expected, "step {step}: thread {thread}, run {run:?}");
    }
});
