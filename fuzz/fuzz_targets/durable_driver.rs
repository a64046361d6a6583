//! Fuzzes the durable driver (SPEC §12.2) over `MemoryStore`: the input bytes are driver
//! lines (split on `\n`), and one byte in front says which commits the store refuses. Whatever
//! they are, the driver must not panic; every line must end with its `idle` — or, once the
//! store refused a commit, with that refusal's one `store` line, after which the session is
//! over; and no commit the store refused is announced: every `commit` line handed out is in
//! the store, in order, and the thread's version is the number of commit lines.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runcore::driver::{idle_line};
use runcore::host::{DurableDriver, DurableOptions};
use runcore::{CommitOperation, CommitReceipt, CommitRecord, ThreadCommit, ThreadId};
use runcore::store::{CommitLog, CommittedThreadView, Intercept, Intercepted, MemoryStore, SharedStore, StoreError};
use serde_json::Value;

/// `MemoryStore`, refusing the commits whose number has its bit set in `refuse`; every other
/// port is the store's ([`Intercepted`] forwards it).
struct Flaky {
    inner: SharedStore<MemoryStore>,
    refuse: u8,
    commits: u32,
}

impl Flaky {
    fn refused(&mut self) -> Option<StoreError> {
        self.commits += 1;
        (self.commits <= 8 && self.refuse >> (self.commits - 1) & 1 == 1)
            .then(|| StoreError::unavailable("the fuzzer's store is down"))
    }
}

impl Intercept for Flaky {
    type Inner = SharedStore<MemoryStore>;
    fn inner(&self) -> &Self::Inner {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut Self::Inner {
        &mut self.inner
    }
    fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
        match self.refused() {
            Some(error) => Err(error),
            None => self.inner.commit(commit),
        }
    }
    fn commit_operation(&mut self, operation: CommitOperation) -> Result<CommitReceipt, StoreError> {
        match self.refused() {
            Some(error) => Err(error),
            None => self.inner.commit_operation(operation),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&refuse, lines)) = data.split_first() else {
        return;
    };
    let shared = SharedStore::new(MemoryStore::new());
    let store = Intercepted(Flaky { inner: shared.clone(), refuse, commits: 0 });
    let thread = ThreadId::new("t");
    let options = DurableOptions::new(runcore::AgentConfig::for_thread("t"));
    let Ok((mut driver, started)) = DurableDriver::start(store, options) else {
        return;
    };
    let mut announced = 0u64;
    let count = |lines: &[String]| {
        lines
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["type"] == "commit")
            .count() as u64
    };
    announced += count(&started.lines);
    if started.refused.is_some() {
        return;
    }
    for (i, line) in lines.split(|&b| b == b'\n').enumerate() {
        let number = i as u64 + 1;
        let out = match driver.handle_line(line) {
            Ok(out) => out,
            Err(ended) => {
                assert!(driver.ended().is_some(), "line {number}: ended, but the driver says not: {ended}");
                break;
            }
        };
        announced += count(&out.lines);
        let last: Value = serde_json::from_str(out.lines.last().expect("a line has output")).unwrap();
        match &out.refused {
            None => {
                let idle = idle_line(number, driver.driver().agent().poll_timeout());
                assert_eq!(out.lines.last(), Some(&idle), "line {number} ends with its idle");
            }
            Some(_) => {
                assert_eq!(last["type"], "error", "line {number}: a refusal's line is last");
                assert_eq!(last["error"]["kind"], "store", "line {number}");
            }
        }
        let idles = out.lines.iter().filter(|l| l.starts_with(r#"{"type":"idle""#)).count();
        assert!(idles <= 1, "line {number}: at most one idle");
        assert_eq!(
            shared.thread_version(&thread).unwrap(),
            announced,
            "line {number}: every announced commit is in the store, and only those"
        );
        if out.refused.is_some() {
            assert!(driver.handle_line(b"{\"type\":\"abort\"}").is_err(), "the session is over");
            break;
        }
    }
});
