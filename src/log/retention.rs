//! Retention decisions: which old segments `retention.bytes` and `retention.ms` delete.
//!
//! Pure: the shard's retention tick feeds in the sealed segments and applies the answer
//! through [`super::PartitionLog::delete_below`], moving the partition's log start offset.
//! Like Kafka, only whole segments go, oldest first, and never the active segment.

/// A topic's retention limits (-1: unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// `retention.bytes`: the partition's size above which its oldest segments go.
    pub bytes: i64,
    /// `retention.ms`: the age, by the newest batch timestamp, past which a segment goes.
    pub ms: i64,
}

/// One sealed segment as retention sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealedSegment {
    /// Its first offset.
    pub base: i64,
    /// The offset after its last batch: the new log start if it goes.
    pub next_offset: i64,
    /// Its bytes, counted against `retention.bytes`.
    pub size: u64,
    /// Largest batch timestamp in the segment (-1: none).
    pub max_timestamp: i64,
}

/// The offset below which segments should be deleted, if any: oldest sealed segments go
/// while the log without them is still at least `retention.bytes`, or while their newest
/// record is older than `retention.ms`.
pub fn delete_before(
    sealed: &[SealedSegment],
    total_size: u64,
    r: Retention,
    now_ms: i64,
) -> Option<i64> {
    let mut size = total_size;
    let mut cut = None;
    for s in sealed {
        let over_size = r.bytes >= 0 && size.saturating_sub(s.size) >= r.bytes as u64;
        let too_old = r.ms >= 0 && s.max_timestamp >= 0 && s.max_timestamp < now_ms - r.ms;
        if !(over_size || too_old) {
            break;
        }
        size -= s.size;
        cut = Some(s.next_offset);
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(base: i64, size: u64, ts: i64) -> SealedSegment {
        SealedSegment {
            base,
            next_offset: base + 10,
            size,
            max_timestamp: ts,
        }
    }

    #[test]
    fn by_bytes_and_by_time() {
        let sealed = [seg(0, 100, 1000), seg(10, 100, 2000), seg(20, 100, 3000)];
        // 300 sealed + 50 active.
        let unlimited = Retention { bytes: -1, ms: -1 };
        assert_eq!(delete_before(&sealed, 350, unlimited, 10_000), None);
        let bytes = Retention { bytes: 150, ms: -1 };
        // 350 → 250 → 150 (still >= 150) → stop before going under.
        assert_eq!(delete_before(&sealed, 350, bytes, 0), Some(20));
        let time = Retention {
            bytes: -1,
            ms: 1500,
        };
        // now 2600: only the segment whose newest record is before 1100 goes.
        assert_eq!(delete_before(&sealed, 350, time, 2600), Some(10));
        // now 3600: records before 2100 go; the last sealed one (3000) stays.
        assert_eq!(delete_before(&sealed, 350, time, 3600), Some(20));
        assert_eq!(delete_before(&sealed, 350, time, 2400), None);
    }
}
