//! Which Kelp node leads each partition and coordinates each consumer group when several
//! nodes share one SeaweedMQ, and whether this node may act on a partition now.
//!
//! Placement is rendezvous hashing over the live node ids ([`designated`]): every node
//! computes the same owner from the same live set, and a node joining or leaving moves only
//! the keys it wins or held. A partition's owner must also hold the partition's filer lease
//! (taken by `forwarder::ownership`), whose generation-backed epoch is the Kafka leader
//! epoch. This module keeps what the shards ask on every append and read: the partitions
//! this node holds, each with its epoch and the instant after which it must stop acting on
//! it (its lease may have expired by then and another node may hold it). With one node (the
//! local and memory engines) nothing is leased and this node leads everything.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;

use crate::error::KelpError;

/// A partition this node holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The leader epoch of this tenure.
    pub epoch: i32,
    /// Past this instant the lease may be gone: nothing more is appended.
    pub until: Instant,
    /// The partition's tenures (leader epoch, first offset), oldest first, this one last.
    pub history: Arc<Vec<(i32, i64)>>,
    /// Idempotent producers' batches stored before this tenure, oldest first, as the
    /// previous leader's journal and SeaweedMQ show them: the producer state this tenure
    /// starts from, so a retry is still recognised as a duplicate.
    pub producers: Arc<Vec<ProducedBatch>>,
}

/// One idempotent producer's batch stored in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducedBatch {
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub epoch: i16,
    /// Sequence of the batch's first record.
    pub first_seq: i32,
    /// Sequence of its last record.
    pub last_seq: i32,
    /// Offset of its first record.
    pub first_offset: i64,
}

/// The tenures of a partition on one node that leads everything: epoch 0 from offset 0.
pub const ONE_NODE_HISTORY: &[(i32, i64)] = &[(0, 0)];

/// Partitions held by this node, keyed by (topic, partition).
pub type HeldMap = HashMap<(String, i32), Held>;

/// This node's leadership, read by every shard, replaced whole by the forwarder.
#[derive(Default)]
pub struct Ownership {
    leased: AtomicBool,
    held: ArcSwap<HeldMap>,
    version: AtomicU64,
    changed: event_listener::Event,
    /// Partitions a request is waiting for, to be taken before the others.
    asked: std::sync::Mutex<Vec<(String, i32)>>,
    asked_event: event_listener::Event,
    /// Per topic, each partition's SeaweedMQ leader broker ("" unknown), as the storage
    /// engine last read it: placement prefers the node on that broker's host.
    storage_leaders: ArcSwap<HashMap<String, Arc<Vec<String>>>>,
}

impl Ownership {
    /// Whether leadership is leased (several nodes over SeaweedMQ) rather than total.
    pub fn leased(&self) -> bool {
        self.leased.load(Ordering::Acquire)
    }

    /// Turns leasing on: from now on this node leads only the partitions it holds.
    pub fn start_leasing(&self) {
        self.leased.store(true, Ordering::Release);
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// The leader epoch under which this node may act on `(topic, partition)` now, or
    /// NOT_LEADER_OR_FOLLOWER.
    pub fn lead(&self, topic: &str, partition: i32) -> Result<i32, KelpError> {
        if !self.leased() {
            return Ok(0);
        }
        self.held_now(topic, partition, |h| h.epoch)
    }

    /// `f` of the partition's tenure while it is safe to act on, else NOT_LEADER_OR_FOLLOWER.
    /// Looked up only on the leased path, by a borrowed key: single-node appends pay
    /// nothing, leased ones no allocation.
    fn held_now<T>(
        &self,
        topic: &str,
        partition: i32,
        f: impl FnOnce(&Held) -> T,
    ) -> Result<T, KelpError> {
        match self.held.load().get(super::key::key(&(topic, partition))) {
            Some(h) if Instant::now() < h.until => Ok(f(h)),
            _ => Err(KelpError::NotLeaderOrFollower),
        }
    }

    /// The tenures of a partition this node leads now (OffsetForLeaderEpoch), or
    /// NOT_LEADER_OR_FOLLOWER.
    pub fn history(&self, topic: &str, partition: i32) -> Result<Arc<Vec<(i32, i64)>>, KelpError> {
        if !self.leased() {
            return Ok(Arc::new(ONE_NODE_HISTORY.to_vec()));
        }
        self.held_now(topic, partition, |h| h.history.clone())
    }

    /// The producer state a tenure of a partition held now starts from (empty with one
    /// node, or when the partition is not held).
    pub fn producers(&self, topic: &str, partition: i32) -> Arc<Vec<ProducedBatch>> {
        if !self.leased() {
            return Arc::default();
        }
        self.held_now(topic, partition, |h| h.producers.clone())
            .unwrap_or_default()
    }

    /// Records a topic's SeaweedMQ leader broker per partition; true when that changed.
    pub fn set_storage_leaders(&self, topic: &str, leaders: Vec<String>) -> bool {
        let now = self.storage_leaders.load();
        if now.get(topic).is_some_and(|l| **l == leaders) {
            return false;
        }
        let mut next = HashMap::clone(&now);
        next.insert(topic.to_string(), Arc::new(leaders));
        self.storage_leaders.store(Arc::new(next));
        true
    }

    /// Forgets a deleted topic's SeaweedMQ leaders.
    pub fn forget_storage_leaders(&self, topic: &str) {
        let now = self.storage_leaders.load();
        if now.contains_key(topic) {
            let mut next = HashMap::clone(&now);
            next.remove(topic);
            self.storage_leaders.store(Arc::new(next));
        }
    }

    /// The SeaweedMQ leader broker of a partition, when known.
    pub fn storage_leader(&self, topic: &str, partition: i32) -> Option<String> {
        let all = self.storage_leaders.load();
        let l = all.get(topic)?.get(usize::try_from(partition).ok()?)?;
        (!l.is_empty()).then(|| l.clone())
    }

    /// The partitions held now.
    pub fn held(&self) -> Arc<HeldMap> {
        self.held.load_full()
    }

    /// Replaces the held partitions; shards notice the new version and drop the state of
    /// partitions they no longer lead.
    pub fn set_held(&self, held: HeldMap) {
        self.held.store(Arc::new(held));
        self.version.fetch_add(1, Ordering::AcqRel);
        self.changed.notify(usize::MAX);
    }

    /// Asks for `(topic, partition)` to be taken first: a request is waiting for it.
    pub fn ask(&self, topic: &str, partition: i32) {
        let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        let key = (topic.to_string(), partition);
        if !asked.contains(&key) {
            asked.push(key);
        }
        drop(asked);
        self.asked_event.notify(usize::MAX);
    }

    /// The partitions asked for since the last call.
    pub fn take_asked(&self) -> Vec<(String, i32)> {
        std::mem::take(&mut *self.asked.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Fires when a partition is asked for; register before [`Ownership::take_asked`].
    pub fn listen_asked(&self) -> event_listener::EventListener {
        self.asked_event.listen()
    }

    /// Fires on the next change of the held set; register before checking.
    pub fn listen(&self) -> event_listener::EventListener {
        self.changed.listen()
    }

    /// Bumped whenever the held set changes.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}

/// Mixes a 64-bit value (splitmix64's finaliser): FNV alone spreads short suffixes poorly.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a over `parts`, each followed by a 0xff separator so ("ab", "c") and ("a", "bc")
/// differ.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    parts.iter().fold(super::routing::FNV_BASIS, |h, part| {
        super::routing::fnv1a_from(super::routing::fnv1a_from(h, part), &[0xff])
    })
}

/// The node among `live` (node ids) that owns `key`: highest random weight. None when no
/// node is live.
pub fn designated(key: u64, live: impl IntoIterator<Item = i32>) -> Option<i32> {
    live.into_iter()
        .max_by_key(|&n| (mix(key ^ mix(n as u32 as u64)), n))
}

/// The placement key of a partition.
pub fn partition_key(topic: &str, partition: i32) -> u64 {
    fnv1a(&[b"p", topic.as_bytes(), &partition.to_be_bytes()])
}

/// The placement key of a consumer group.
pub fn group_key(group: &str) -> u64 {
    fnv1a(&[b"g", group.as_bytes()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_node_leads_everything_until_leasing_starts() {
        let o = Ownership::default();
        assert_eq!(o.lead("t", 0), Ok(0));
        o.start_leasing();
        assert_eq!(o.lead("t", 0), Err(KelpError::NotLeaderOrFollower));
        let v = o.version();
        let mut m = HeldMap::new();
        let until = Instant::now() + Duration::from_secs(60);
        let history = Arc::new(vec![(7, 40)]);
        m.insert(
            ("t".into(), 0),
            Held {
                epoch: 7,
                until,
                history: history.clone(),
                producers: Arc::default(),
            },
        );
        m.insert(
            ("t".into(), 1),
            Held {
                epoch: 3,
                until: Instant::now(),
                history: history.clone(),
                producers: Arc::default(),
            },
        );
        o.set_held(m);
        assert!(o.version() > v);
        assert_eq!(o.lead("t", 0), Ok(7));
        assert_eq!(o.history("t", 0), Ok(history));
        // A lease past its safe end is not acted on, even before the forwarder drops it.
        assert_eq!(o.lead("t", 1), Err(KelpError::NotLeaderOrFollower));
    }

    #[test]
    fn rendezvous_moves_only_what_it_must_and_spreads() {
        let three = [1, 2, 3];
        let mut counts: HashMap<i32, usize> = HashMap::new();
        let mut moved = 0;
        for p in 0..300 {
            let k = partition_key("orders", p);
            let before = designated(k, three).unwrap();
            *counts.entry(before).or_default() += 1;
            let after = designated(k, [1, 3]).unwrap();
            if before != 2 {
                assert_eq!(before, after, "a key whose owner stayed live must not move");
            } else {
                moved += 1;
            }
            // Order of the live list does not matter.
            assert_eq!(designated(k, [3, 1, 2]), Some(before));
        }
        assert_eq!(moved, counts[&2]);
        for n in three {
            assert!(counts[&n] > 70, "uneven spread: {counts:?}");
        }
        assert_eq!(designated(group_key("g"), []), None);
        assert_ne!(partition_key("a", 1), group_key("a"));
    }
}
