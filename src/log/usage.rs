//! What the embedded log takes on disk, as DescribeLogDirs reports it: the bytes of each
//! partition's segment files (`*.log`, as Kafka counts a log's size: indexes left out) and
//! the file system's size and free space under the topics directory. Plain std::fs and
//! statvfs, run on the blocking pool by the caller.

use std::path::Path;

use super::segment::parse_log_name;

/// The topics directory and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    /// The topics directory, absolute.
    pub path: String,
    /// Segment bytes of each partition asked about, in the order asked.
    pub sizes: Vec<u64>,
    /// The file system's size (-1: unknown).
    pub total_bytes: i64,
    /// Its space available to an unprivileged writer (-1: unknown).
    pub usable_bytes: i64,
}

/// The topics directory of `data_dir` with the sizes of `partitions` (0 for a partition
/// without a directory yet, or one that cannot be listed).
pub fn describe(data_dir: &Path, partitions: &[(String, i32)]) -> Usage {
    let dir = super::topics_dir(data_dir);
    let path = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
    let sizes = partitions
        .iter()
        .map(|(t, p)| segment_bytes(&super::partition_dir(data_dir, t, *p)))
        .collect();
    let (total_bytes, usable_bytes) = crate::disk::file_system(&dir).unwrap_or((-1, -1));
    Usage {
        path: path.display().to_string(),
        sizes,
        total_bytes,
        usable_bytes,
    }
}

fn segment_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().and_then(parse_log_name).is_some())
        .filter_map(|e| {
            let len = e.metadata().ok()?.len();
            // An active segment's file also holds the zeros written ahead of its end.
            Some(super::prealloc::logical_len(&e.path()).map_or(len, |l| l.min(len)))
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_segment_files_only() {
        let d = std::env::temp_dir().join(format!("kelp-usage-{}", uuid::Uuid::new_v4()));
        let p = crate::log::partition_dir(&d, "t-1", 0);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join(crate::log::segment::log_name(0)), vec![0u8; 300]).unwrap();
        std::fs::write(p.join(crate::log::segment::log_name(7)), vec![0u8; 50]).unwrap();
        std::fs::write(p.join("00000000000000000000.index"), vec![0u8; 999]).unwrap();
        let parts = vec![("t-1".to_string(), 0), ("t-1".to_string(), 1)];
        let info = describe(&d, &parts);
        assert_eq!(info.sizes, vec![350, 0]);
        assert!(info.path.ends_with("/topics"), "{}", info.path);
        assert!(
            info.total_bytes > 0 && info.usable_bytes >= 0 && info.usable_bytes <= info.total_bytes
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
