//! The broker nodes Kelp shows its clients (Metadata, FindCoordinator, DescribeCluster).
//!
//! By default the whole process is one node at the advertised address: every shard accepts
//! every request and forwards what it does not own over the channel mesh. With
//! `--advertise-shards` each shard is a node of its own, on a port of its own, named leader
//! of the partitions it owns and coordinator of the groups it owns, so clients send each
//! request straight to the core that serves it and the cross-core hop disappears. Owns no
//! I/O; placement comes from [`routing`], so both always agree.

use super::routing;
use crate::config::Config;

/// One node as clients see it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    /// Broker id.
    pub id: i32,
    /// Host clients connect to.
    pub host: String,
    /// Port clients connect to.
    pub port: i32,
}

/// Every node Kelp advertises; the first is the controller.
#[derive(Debug, Clone)]
pub struct Nodes {
    list: Vec<Node>,
}

impl Nodes {
    /// The nodes for `shards` shards under `config`: one, or one per shard with
    /// `--advertise-shards` (ids `node_id + shard`, ports [`Config::shard_port`]).
    pub fn new(config: &Config, shards: usize) -> Self {
        let host = config.advertised_host();
        let list = if config.advertise_shards {
            (0..shards.max(1))
                .map(|s| Node {
                    id: config.node_id + s as i32,
                    host: host.clone(),
                    port: i32::from(config.shard_port(s)),
                })
                .collect()
        } else {
            vec![Node {
                id: config.node_id,
                host,
                port: config.advertised_port(),
            }]
        };
        Nodes { list }
    }

    /// Every node, shard order.
    pub fn all(&self) -> &[Node] {
        &self.list
    }

    /// The controller (DescribeCluster, Metadata): the first node.
    pub fn controller(&self) -> &Node {
        &self.list[0]
    }

    /// Whether `id` names one of these nodes (manual replica assignments).
    pub fn contains(&self, id: i32) -> bool {
        self.list.iter().any(|n| n.id == id)
    }

    /// The leader of `(topic, partition)`: its owning shard's node, or the single node.
    pub fn leader(&self, topic: &str, partition: i32) -> &Node {
        self.pick(|n| routing::owner(topic, partition, n))
    }

    /// The coordinator of consumer group `group`: its owning shard's node, or the single node.
    pub fn coordinator(&self, group: &str) -> &Node {
        self.pick(|n| routing::group_owner(group, n))
    }

    fn pick(&self, owner: impl Fn(usize) -> usize) -> &Node {
        match self.list.len() {
            1 => &self.list[0],
            n => &self.list[owner(n)],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn config(args: &[&str]) -> Config {
        let mut all = vec!["kelp", "--listen", "127.0.0.1:9092"];
        all.extend_from_slice(args);
        Config::parse_from(all)
    }

    #[test]
    fn one_node_by_default() {
        let nodes = Nodes::new(&config(&["--node-id", "3"]), 4);
        assert_eq!(nodes.all().len(), 1);
        assert_eq!(nodes.leader("t", 2).id, 3);
        assert_eq!(nodes.coordinator("g").port, 9092);
        assert!(nodes.contains(3) && !nodes.contains(4));
    }

    #[test]
    fn a_node_per_shard_follows_ownership() {
        let nodes = Nodes::new(&config(&["--advertise-shards", "--node-id", "10"]), 4);
        let ports: Vec<i32> = nodes.all().iter().map(|n| n.port).collect();
        assert_eq!(ports, [9093, 9094, 9095, 9096]);
        assert_eq!(nodes.controller().id, 10);
        for p in 0..8 {
            let leader = nodes.leader("orders", p);
            assert_eq!(leader.id, 10 + routing::owner("orders", p, 4) as i32);
            assert_eq!(leader.port, 9093 + routing::owner("orders", p, 4) as i32);
        }
        assert_eq!(
            nodes.coordinator("grp").id,
            10 + routing::group_owner("grp", 4) as i32
        );
        let base = Nodes::new(
            &config(&["--advertise-shards", "--shard-base-port", "20000"]),
            2,
        );
        assert_eq!(base.all()[1].port, 20001);
        let top = config(&["--advertise-shards", "--shard-base-port", "65535"]);
        assert!(top.check_shard_ports(1).is_ok());
        assert!(top.check_shard_ports(2).is_err());
        let listen_top = Config::parse_from(["kelp", "--listen", "127.0.0.1:65535"]);
        assert!(listen_top.check_shard_ports(1).is_err());
    }
}
