//! Kafka partition index ↔ SeaweedMQ partition ring range.
//!
//! SeaweedMQ splits a topic over a ring of [`RING_SIZE`] slots. A topic with `n` partitions
//! gets `n` equal ranges of `RING_SIZE / n` slots, the last one stretched to the end of the
//! ring; Kafka partition `k` is the `k`-th range (spec §4.3). The mapping depends only on `n`,
//! never on the order in which the broker lists assignments.

use crate::pb::messaging_pb::BrokerPartitionAssignment;
use crate::pb::schema_pb::Partition;

/// Number of slots in the SeaweedMQ partition ring (`8*9*5*7`).
pub const RING_SIZE: i32 = 2520;

/// The `[start, stop)` ring range of Kafka partition `k` of a topic with `n` partitions.
///
/// Returns `None` when `n` is not in `1..=RING_SIZE` or `k` is not in `0..n`.
pub fn kafka_range(n: i32, k: i32) -> Option<(i32, i32)> {
    if !(1..=RING_SIZE).contains(&n) || !(0..n).contains(&k) {
        return None;
    }
    let size = RING_SIZE / n;
    let start = k * size;
    let stop = if k == n - 1 { RING_SIZE } else { start + size };
    Some((start, stop))
}

/// The assignment of Kafka partition `k` among the assignments of one topic generation.
///
/// `n` is `assignments.len()`. Returns `None` when `k` is out of range or no assignment has
/// exactly the expected range.
pub fn find_assignment(
    assignments: &[BrokerPartitionAssignment],
    k: i32,
) -> Option<&BrokerPartitionAssignment> {
    let n = i32::try_from(assignments.len()).ok()?;
    let (start, stop) = kafka_range(n, k)?;
    assignments.iter().find(|a| {
        a.partition
            .as_ref()
            .is_some_and(|p| p.range_start == start && p.range_stop == stop)
    })
}

/// The Kafka partition index of ring partition `p` in a topic with `n` partitions.
///
/// Returns `None` when `p` is not exactly one of the `n` ranges.
pub fn kafka_index(n: i32, p: &Partition) -> Option<i32> {
    if !(1..=RING_SIZE).contains(&n) {
        return None;
    }
    let k = (p.range_start / (RING_SIZE / n)).min(n - 1);
    (kafka_range(n, k)? == (p.range_start, p.range_stop)).then_some(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assignment(start: i32, stop: i32, leader: &str) -> BrokerPartitionAssignment {
        BrokerPartitionAssignment {
            partition: Some(Partition {
                ring_size: RING_SIZE,
                range_start: start,
                range_stop: stop,
                unix_time_ns: 42,
            }),
            leader_broker: leader.to_owned(),
            follower_broker: String::new(),
        }
    }

    #[test]
    fn one_partition_covers_the_ring() {
        assert_eq!(kafka_range(1, 0), Some((0, 2520)));
        assert_eq!(kafka_range(1, 1), None);
    }

    #[test]
    fn four_partitions() {
        let want = [(0, 630), (630, 1260), (1260, 1890), (1890, 2520)];
        for (k, w) in want.iter().enumerate() {
            assert_eq!(kafka_range(4, k as i32), Some(*w));
        }
        assert_eq!(kafka_range(4, 4), None);
        assert_eq!(kafka_range(4, -1), None);
    }

    #[test]
    fn seven_partitions_last_is_stretched() {
        assert_eq!(kafka_range(7, 0), Some((0, 360)));
        assert_eq!(kafka_range(7, 5), Some((1800, 2160)));
        assert_eq!(kafka_range(7, 6), Some((2160, 2520)));
    }

    #[test]
    fn uneven_split_stretches_last() {
        // 2520 / 11 = 229, last range [2290, 2520).
        assert_eq!(kafka_range(11, 10), Some((2290, 2520)));
        let p = Partition {
            range_start: 2290,
            range_stop: 2520,
            ..Default::default()
        };
        assert_eq!(kafka_index(11, &p), Some(10));
    }

    #[test]
    fn invalid_counts() {
        assert_eq!(kafka_range(0, 0), None);
        assert_eq!(kafka_range(2521, 0), None);
        assert_eq!(kafka_index(0, &Partition::default()), None);
    }

    #[test]
    fn find_ignores_listing_order() {
        let a = vec![
            assignment(1890, 2520, "d"),
            assignment(0, 630, "a"),
            assignment(1260, 1890, "c"),
            assignment(630, 1260, "b"),
        ];
        let leaders: Vec<_> = (0..4)
            .map(|k| find_assignment(&a, k).map(|x| x.leader_broker.as_str()))
            .collect();
        assert_eq!(leaders, [Some("a"), Some("b"), Some("c"), Some("d")]);
        assert!(find_assignment(&a, 4).is_none());
        assert!(find_assignment(&[], 0).is_none());
    }

    #[test]
    fn find_rejects_foreign_ranges() {
        // Three assignments but ranges of a 4-partition layout: k=2 should not match.
        let a = vec![
            assignment(0, 840, "a"),
            assignment(840, 1680, "b"),
            assignment(1260, 1890, "c"),
        ];
        assert!(find_assignment(&a, 2).is_none());
        assert_eq!(
            find_assignment(&a, 1).map(|x| x.leader_broker.as_str()),
            Some("b")
        );
    }

    #[test]
    fn index_round_trips() {
        for n in [1, 2, 3, 4, 7, 11, 16, 100, 2520] {
            for k in 0..n {
                let (s, e) = kafka_range(n, k).expect("valid range");
                let p = Partition {
                    ring_size: RING_SIZE,
                    range_start: s,
                    range_stop: e,
                    unix_time_ns: 1,
                };
                assert_eq!(kafka_index(n, &p), Some(k), "n={n} k={k}");
            }
        }
        let off = Partition {
            range_start: 1,
            range_stop: 630,
            ..Default::default()
        };
        assert_eq!(kafka_index(4, &off), None);
    }
}
