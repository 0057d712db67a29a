//! The Kelp nodes alive over the same shared storage (SeaweedMQ), as the storage engine's
//! membership finds them (`forwarder::membership`): read by any shard, replaced whole.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::nodes::Node;

/// One live Kelp node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveNode {
    /// Its `--node-id`.
    pub node_id: i32,
    /// Its advertised host.
    pub host: String,
    /// Its advertised port.
    pub port: i32,
    /// The brokers it shows clients: itself, or one per shard with `--advertise-shards`.
    pub brokers: Vec<Node>,
    /// The partitions it holds, with their leader epochs.
    pub owns: HashMap<(String, i32), i32>,
    /// The SeaweedMQ broker on its host, if it named one.
    pub colocated: Option<String>,
}

impl LiveNode {
    /// Its broker for a partition or group placed on shard `pick(shard count)`.
    pub fn broker(&self, pick: impl FnOnce(usize) -> usize) -> Node {
        match self.brokers.len() {
            0 => Node {
                id: self.node_id,
                host: self.host.clone(),
                port: self.port,
                endpoints: Vec::new(),
            },
            1 => self.brokers[0].clone(),
            n => self.brokers[pick(n).min(n - 1)].clone(),
        }
    }
}

/// The live set, by node id; empty when the engine has no membership (one node).
#[derive(Default)]
pub struct Members {
    live: ArcSwap<Vec<LiveNode>>,
    /// Bumped whenever a node joins or leaves (placement may have moved).
    version: std::sync::atomic::AtomicU64,
}

impl Members {
    /// Bumped whenever a node joins or leaves.
    pub fn version(&self) -> u64 {
        self.version.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The live nodes now.
    pub fn live(&self) -> Arc<Vec<LiveNode>> {
        self.live.load_full()
    }

    /// Replaces the live set, logging who joined and who left.
    pub fn set(&self, nodes: Vec<LiveNode>) {
        let old = self.live.load();
        if **old == nodes {
            return;
        }
        let same = |a: &LiveNode, b: &LiveNode| {
            a.node_id == b.node_id && a.host == b.host && a.port == b.port
        };
        let mut moved = false;
        for n in nodes.iter().filter(|n| !old.iter().any(|o| same(o, n))) {
            tracing::info!(node_id = n.node_id, host = %n.host, port = n.port, "Kelp node is live");
            moved = true;
        }
        for n in old.iter().filter(|o| !nodes.iter().any(|n| same(o, n))) {
            tracing::info!(node_id = n.node_id, host = %n.host, port = n.port, "Kelp node left");
            moved = true;
        }
        self.live.store(Arc::new(nodes));
        if moved {
            self.version
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_set_is_replaced_whole() {
        let m = Members::default();
        assert!(m.live().is_empty());
        let a = LiveNode {
            node_id: 1,
            host: "h".into(),
            port: 9092,
            brokers: vec![],
            owns: HashMap::new(),
            colocated: None,
        };
        assert_eq!(a.broker(|_| 0).port, 9092);
        m.set(vec![a.clone()]);
        assert_eq!(*m.live(), vec![a]);
        m.set(vec![]);
        assert!(m.live().is_empty());
    }
}
