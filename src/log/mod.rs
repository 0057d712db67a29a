//! The embedded durable log (`--storage local`): per-partition segment files of raw record
//! batches under `<data-dir>/topics/<topic>-<partition>/`, sparse indexes, group commit,
//! recovery, retention, and the durable metadata and group offsets stores.
//!
//! Layout and fsync policy: docs/storage.md. Owned by the shards (each opens only the
//! partitions it owns); calls glommio for file I/O (writes on its blocking pool: [`appender`]) and `record/` for batch headers.
//! `partition/` keeps the cache and offsets and calls into [`PartitionLog`].
//! In test builds, `faults` fails, tears and forgets the log's file I/O on demand.

pub mod appender;
pub mod cleaner;
#[cfg(test)]
mod cleaner_tests;
pub mod compact;
pub mod direct;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
pub mod faults;
pub mod index;
pub mod meta;
pub mod offsets_store;
pub mod partition_log;
pub mod prealloc;
pub mod recovery;
pub mod retention;
pub mod scan;
pub mod segment;
pub mod usage;

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::error::KelpError;

pub use partition_log::{PartitionLog, RollSettings, Ticket};

/// Failures of the durable log.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LogError {
    /// A write, fdatasync or file creation failed: what was appended is not durable.
    #[error("log write failed: {0}")]
    Write(String),
    /// A batch whose base offset is not the one after everything written and queued.
    #[error("batch at offset {got} queued where offset {expected} is next")]
    OutOfOrder {
        /// The offset the log takes next.
        expected: i64,
        /// The base offset offered.
        got: i64,
    },
    /// The log refuses writes until the broker restarts: bytes it had acknowledged as written
    /// may be gone from the page cache and the disk.
    #[error("log fenced until restart: {0}")]
    Fenced(String),
    /// Reading appended data back failed.
    #[error("log read failed: {0}")]
    Read(String),
    /// Start-up could not make sense of what is on disk.
    #[error("log recovery failed: {0}")]
    Recovery(String),
    /// The data directory cannot be created or written: fails the start, not a produce.
    #[error("data directory {path}: {reason}")]
    DataDir {
        /// The directory or file that failed.
        path: String,
        /// The OS error.
        reason: String,
    },
}

// Here rather than in `error`, which stays a leaf that every module may import.
impl From<LogError> for KelpError {
    fn from(e: LogError) -> Self {
        KelpError::Storage(e.to_string())
    }
}

/// Directory of one partition's segments.
pub fn partition_dir(data_dir: &Path, topic: &str, partition: i32) -> PathBuf {
    topics_dir(data_dir).join(format!("{topic}-{partition}"))
}

/// Parent of every partition directory.
pub fn topics_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("topics")
}

/// Directory of the metadata and group offsets files.
pub fn meta_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("meta")
}

/// fsync of a directory, so entries created or renamed in it survive a crash.
pub async fn sync_dir(dir: &Path) -> Result<(), LogError> {
    appender::sync_dir(dir)
        .await
        .map_err(|e| LogError::Write(e.to_string()))
}

/// Creates the data directory layout and proves it writable, before any shard starts: a
/// broker that cannot write must fail at start, not at the first produce.
pub fn prepare_data_dir(data_dir: &Path) -> Result<(), LogError> {
    let fail = |p: &Path, e: std::io::Error| LogError::DataDir {
        path: p.display().to_string(),
        reason: e.to_string(),
    };
    for d in [
        data_dir.to_path_buf(),
        topics_dir(data_dir),
        meta_dir(data_dir),
    ] {
        std::fs::create_dir_all(&d).map_err(|e| fail(&d, e))?;
    }
    let probe = meta_dir(data_dir).join(".write-probe");
    std::fs::write(&probe, b"kelp").map_err(|e| fail(&probe, e))?;
    std::fs::remove_file(&probe).map_err(|e| fail(&probe, e))?;
    Ok(())
}
