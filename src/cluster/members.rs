//! The Kelp nodes alive over the same shared storage (SeaweedMQ), as the storage engine's
//! membership finds them (`forwarder::membership`): read by any shard, replaced whole.

use std::sync::Arc;

use arc_swap::ArcSwap;

/// One live Kelp node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveNode {
    /// Its `--node-id`.
    pub node_id: i32,
    /// Its advertised host.
    pub host: String,
    /// Its advertised port.
    pub port: i32,
}

/// The live set, by node id; empty when the engine has no membership (one node).
#[derive(Default)]
pub struct Members {
    live: ArcSwap<Vec<LiveNode>>,
}

impl Members {
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
        for n in nodes.iter().filter(|n| !old.contains(n)) {
            tracing::info!(node_id = n.node_id, host = %n.host, port = n.port, "Kelp node is live");
        }
        for n in old.iter().filter(|n| !nodes.contains(n)) {
            tracing::info!(node_id = n.node_id, host = %n.host, port = n.port, "Kelp node left");
        }
        self.live.store(Arc::new(nodes));
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
        };
        m.set(vec![a.clone()]);
        assert_eq!(*m.live(), vec![a]);
        m.set(vec![]);
        assert!(m.live().is_empty());
    }
}
