//! The broker nodes Kelp shows its clients (Metadata, FindCoordinator, DescribeCluster).
//!
//! By default the whole process is one node at the advertised address: every shard accepts
//! every request and forwards what it does not own over the channel mesh. With
//! `--advertise-shards` each shard is a node of its own, on a port of its own, named leader
//! of the partitions it owns and coordinator of the groups it owns, so clients send each
//! request straight to the core that serves it and the cross-core hop disappears. Owns no
//! I/O; placement comes from [`routing`], so both always agree.

use super::routing;
use crate::config::{Config, Listener};

/// One node as clients see it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    /// Broker id.
    pub id: i32,
    /// Host clients connect to.
    pub host: String,
    /// Port clients connect to.
    pub port: i32,
    /// Its address on every listener (`host`/`port` are the default listener's).
    #[serde(default)]
    pub endpoints: Vec<NodeEndpoint>,
}

/// A node's address on one named listener.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeEndpoint {
    /// The listener's name.
    pub listener: String,
    /// Host clients of that listener connect to.
    pub host: String,
    /// Port clients of that listener connect to.
    pub port: i32,
}

impl Node {
    /// Where a client that came in on `listener` reaches this node. A node without that
    /// listener (a cluster whose nodes disagree on their listeners) is shown at its default
    /// address.
    pub fn on(&self, listener: &str) -> (&str, i32) {
        self.endpoints
            .iter()
            .find(|e| e.listener == listener)
            .map_or((self.host.as_str(), self.port), |e| {
                (e.host.as_str(), e.port)
            })
    }
}

/// Every node Kelp advertises; the first is the controller.
#[derive(Debug, Clone)]
pub struct Nodes {
    list: Vec<Node>,
}

impl Nodes {
    /// The nodes for `shards` shards under `config`: one, or one per shard with
    /// `--advertise-shards` (ids `node_id + shard`, ports [`Listener::shard_port`]), each
    /// with an address per listener.
    pub fn new(config: &Config, shards: usize) -> Self {
        // `server::run` refuses listener flags that do not resolve before anything builds
        // nodes; only a test could get here with bad ones.
        let listeners = config.listeners().unwrap_or_default();
        let node = |id: i32, port_of: &dyn Fn(&Listener) -> u16| {
            let endpoints: Vec<NodeEndpoint> = listeners
                .iter()
                .map(|l| NodeEndpoint {
                    listener: l.name.clone(),
                    host: l.advertised_host.clone(),
                    port: i32::from(port_of(l)),
                })
                .collect();
            let (host, port) = endpoints
                .first()
                .map_or(("127.0.0.1".to_string(), 0), |e| (e.host.clone(), e.port));
            Node {
                id,
                host,
                port,
                endpoints,
            }
        };
        let list = if config.advertise_shards {
            (0..shards.max(1))
                .map(|s| node(config.node_id + s as i32, &|l| l.shard_port(s)))
                .collect()
        } else {
            vec![node(config.node_id, &|l| l.advertised_port)]
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
        assert!(top.check_ports(1).is_ok());
        assert!(top.check_ports(2).is_err());
        let listen_top =
            Config::parse_from(["kelp", "--listen", "127.0.0.1:65535", "--advertise-shards"]);
        assert!(listen_top.check_ports(1).is_err());
        // Shard ports of one listener on another's port.
        let clash = Config::parse_from([
            "kelp",
            "--listeners",
            "PLAINTEXT://:9092,SSL://:9093",
            "--advertise-shards",
        ]);
        assert!(clash.check_ports(1).is_err());
        assert!(
            Config::parse_from(["kelp", "--listeners", "PLAINTEXT://:9092,SSL://:9093"])
                .check_ports(4)
                .is_ok()
        );
    }

    #[test]
    fn every_node_has_an_address_per_listener() {
        let nodes = Nodes::new(
            &Config::parse_from([
                "kelp",
                "--listeners",
                "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9192",
                "--advertised-listeners",
                "SSL://broker.example:9999",
                "--advertise-shards",
            ]),
            2,
        );
        let n = &nodes.all()[1];
        assert_eq!((n.host.as_str(), n.port), ("127.0.0.1", 9094));
        assert_eq!(n.on("PLAINTEXT"), ("127.0.0.1", 9094));
        // Shard ports follow each listener's bound port; the advertised host is kept.
        assert_eq!(n.on("SSL"), ("broker.example", 9194));
        assert_eq!(n.on("OTHER"), ("127.0.0.1", 9094));
    }
}
