//! Stable placement of partitions and consumer groups on shards.

/// FNV-1a's offset basis: the hash of nothing.
pub(super) const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a of `data` continuing from `h`: stable across runs and platforms, unlike std's
/// randomised hasher.
pub(super) fn fnv1a_from(mut h: u64, data: &[u8]) -> u64 {
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn fnv1a(data: &[u8]) -> u64 {
    fnv1a_from(FNV_BASIS, data)
}

/// The shard owning `(topic, partition)` among `shards`. A topic's partitions go round-robin
/// from a per-topic starting shard, so one topic spreads evenly over all cores.
pub fn owner(topic: &str, partition: i32, shards: usize) -> usize {
    debug_assert!(shards > 0);
    let start = fnv1a(topic.as_bytes()) % shards as u64;
    ((start + partition.max(0) as u64) % shards as u64) as usize
}

/// The shard coordinating consumer group `group_id` among `shards`.
pub fn group_owner(group_id: &str, shards: usize) -> usize {
    debug_assert!(shards > 0);
    (fnv1a(group_id.as_bytes()) % shards as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_and_spread() {
        assert_eq!(owner("orders", 3, 4), owner("orders", 3, 4));
        let mut counts = [0usize; 4];
        for p in 0..8 {
            counts[owner("orders", p, 4)] += 1;
        }
        assert_eq!(counts, [2, 2, 2, 2]);
        assert_eq!(owner("x", 5, 1), 0);
    }
}
