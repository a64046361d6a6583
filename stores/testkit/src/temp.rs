//! [`TempDir`]: a directory that is removed when dropped (std only).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh, empty directory, removed with everything in it when dropped.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

impl TempDir {
    /// A new directory under the system's temporary directory.
    pub fn new(prefix: &str) -> std::io::Result<TempDir> {
        Self::new_in(std::env::temp_dir(), prefix)
    }

    /// A new directory under `base` (created if missing), named
    /// `{prefix}-{pid}-{counter}-{nanos}` so concurrent tests and processes never share one.
    pub fn new_in(base: impl AsRef<Path>, prefix: &str) -> std::io::Result<TempDir> {
        let base = base.as_ref();
        std::fs::create_dir_all(base)?;
        let pid = std::process::id();
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let path = base.join(format!("{prefix}-{pid}-{n}-{nanos}"));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(TempDir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside the directory.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_distinct_and_removed() {
        let a = TempDir::new("testkit").unwrap();
        let b = TempDir::new("testkit").unwrap();
        assert_ne!(a.path(), b.path());
        std::fs::write(a.join("f"), b"x").unwrap();
        let path = a.path().to_owned();
        drop(a);
        assert!(!path.exists());
        assert!(b.path().is_dir());
    }
}
