//! What clients are told: the brokers, each partition's leader and leader epoch, each
//! group's coordinator. One node (local, memory) answers from its own [`super::nodes`];
//! several nodes over SeaweedMQ answer from the live set ([`super::members`]): a partition's
//! leader is the live node whose record says it holds the partition (the newest epoch),
//! else the node placement designates, which is taking it over; a group's coordinator is
//! the node placement designates. Within a node the shard placement ([`super::routing`])
//! picks the broker when nodes advertise one broker per shard.

use super::members::LiveNode;
use super::nodes::Node;
use super::ownership::{designated, group_key, partition_key};
use super::{routing, Cluster};
use crate::error::KelpError;

/// The live node placement gives a partition to: among the live nodes on the host of its
/// SeaweedMQ leader broker (`storage_leader`) when there are any, so its publishes stay on
/// the host, else among all; then by rendezvous hashing of the key.
fn placed_partition<'a>(
    live: &'a [LiveNode],
    key: u64,
    storage_leader: Option<&str>,
) -> Option<&'a LiveNode> {
    if let Some(b) = storage_leader {
        let near = || live.iter().filter(|n| n.colocated.as_deref() == Some(b));
        if let Some(id) = designated(key, near().map(|n| n.node_id)) {
            return near().find(|n| n.node_id == id);
        }
    }
    placed(live, key)
}

/// The live node placement gives `key` to.
fn placed(live: &[LiveNode], key: u64) -> Option<&LiveNode> {
    let id = designated(key, live.iter().map(|n| n.node_id))?;
    live.iter().find(|n| n.node_id == id)
}

impl Cluster {
    /// The live nodes when leadership is leased and the live set is known.
    fn live_view(&self) -> Option<std::sync::Arc<Vec<LiveNode>>> {
        if !self.ownership.leased() {
            return None;
        }
        let live = self.members.live();
        (!live.is_empty()).then_some(live)
    }

    /// Every broker clients may connect to, by id.
    pub fn brokers(&self) -> Vec<Node> {
        match self.live_view() {
            None => self.nodes.all().to_vec(),
            Some(live) => {
                let mut all: Vec<Node> = live
                    .iter()
                    .flat_map(|n| match n.brokers.is_empty() {
                        true => vec![n.broker(|_| 0)],
                        false => n.brokers.clone(),
                    })
                    .collect();
                all.sort_by_key(|n| n.id);
                all.dedup_by_key(|n| n.id);
                all
            }
        }
    }

    /// The controller clients are shown: the first broker of the lowest live node id.
    pub fn controller(&self) -> Node {
        match self.live_view() {
            None => self.nodes.controller().clone(),
            Some(live) => live
                .iter()
                .min_by_key(|n| n.node_id)
                .map_or_else(|| self.nodes.controller().clone(), |n| n.broker(|_| 0)),
        }
    }

    /// The leader broker of a partition and its leader epoch (-1: not known yet).
    pub fn leader(&self, topic: &str, partition: i32) -> (Node, i32) {
        let Some(live) = self.live_view() else {
            return (self.nodes.leader(topic, partition).clone(), 0);
        };
        let key = (topic.to_string(), partition);
        let holder = live
            .iter()
            .filter_map(|n| n.owns.get(&key).map(|&e| (e, n)))
            .max_by_key(|&(e, _)| e);
        let pick = |shards| routing::owner(topic, partition, shards);
        if let Some((epoch, n)) = holder {
            return (n.broker(pick), epoch);
        }
        match self.placed_partition(&live, topic, partition) {
            Some(n) => (n.broker(pick), -1),
            None => (self.nodes.leader(topic, partition).clone(), -1),
        }
    }

    /// The coordinator broker of a consumer group.
    pub fn coordinator(&self, group: &str) -> Node {
        let Some(live) = self.live_view() else {
            return self.nodes.coordinator(group).clone();
        };
        match placed(&live, group_key(group)) {
            Some(n) => n.broker(|shards| routing::group_owner(group, shards)),
            None => self.nodes.coordinator(group).clone(),
        }
    }

    /// Whether placement gives `(topic, partition)` to this node among the live nodes (it
    /// is taking the lease, or holds it).
    pub fn placed_here(&self, topic: &str, partition: i32) -> bool {
        self.placed_node(topic, partition) == Some(self.node_id)
    }

    /// The node placement gives `(topic, partition)` to among the live nodes (None with one
    /// node, or before the live set is known).
    pub fn placed_node(&self, topic: &str, partition: i32) -> Option<i32> {
        let live = self.live_view()?;
        self.placed_partition(&live, topic, partition)
            .map(|n| n.node_id)
    }

    fn placed_partition<'a>(
        &self,
        live: &'a [LiveNode],
        topic: &str,
        partition: i32,
    ) -> Option<&'a LiveNode> {
        let leader = self.ownership.storage_leader(topic, partition);
        placed_partition(live, partition_key(topic, partition), leader.as_deref())
    }

    /// Why transactions cannot run now, if they cannot: with several Kelp nodes a
    /// transaction's coordinator could not have its markers written on partitions another
    /// node leads; before the live set is known (a node starting), the client retries.
    pub fn transactions_refused(&self) -> Option<KelpError> {
        if !self.ownership.leased() {
            return None;
        }
        match self.members.live().len() {
            0 => Some(KelpError::CoordinatorNotAvailable),
            1 => None,
            n => Some(KelpError::TransactionsNeedOneNode(n)),
        }
    }

    /// Whether this node coordinates `group` now (always, with one node).
    pub fn coordinates(&self, group: &str) -> bool {
        match self.live_view() {
            None => true,
            Some(live) => placed(&live, group_key(group)).map(|n| n.node_id) == Some(self.node_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use clap::Parser;

    use super::*;
    use crate::config::Config;

    fn node(id: i32, owns: &[(&str, i32, i32)]) -> LiveNode {
        LiveNode {
            node_id: id,
            host: "127.0.0.1".into(),
            port: 9000 + id,
            brokers: vec![],
            owns: owns
                .iter()
                .map(|&(t, p, e)| ((t.to_string(), p), e))
                .collect::<HashMap<_, _>>(),
            colocated: None,
        }
    }

    #[test]
    fn leaders_follow_holders_then_placement() {
        let c = Cluster::new(
            &Config::parse_from(["kelp", "--listen", "127.0.0.1:9092", "--node-id", "1"]),
            1,
        );
        // One node: itself for everything.
        assert_eq!(c.leader("t", 0), (c.nodes.all()[0].clone(), 0));
        assert_eq!(c.transactions_refused(), None);
        c.ownership.start_leasing();
        // Leasing, live set not read yet: retry; one live node: transactions run.
        assert_eq!(
            c.transactions_refused(),
            Some(KelpError::CoordinatorNotAvailable)
        );
        c.members.set(vec![node(1, &[])]);
        assert_eq!(c.transactions_refused(), None);
        c.members.set(vec![
            node(1, &[]),
            node(2, &[("t", 0, 9)]),
            node(3, &[("t", 0, 4)]),
        ]);
        assert_eq!(
            c.transactions_refused(),
            Some(KelpError::TransactionsNeedOneNode(3))
        );
        assert_eq!(c.brokers().len(), 3);
        assert_eq!(c.controller().id, 1);
        let (n, epoch) = c.leader("t", 0);
        assert_eq!(
            (n.id, n.port, epoch),
            (2, 9002, 9),
            "the newest epoch's holder leads"
        );
        let (n, epoch) = c.leader("t", 1);
        let want = designated(partition_key("t", 1), [1, 2, 3]).unwrap();
        assert_eq!((n.id, epoch), (want, -1));
        let g = c.coordinator("grp");
        assert_eq!(Some(g.id), designated(group_key("grp"), [1, 2, 3]));
        assert_eq!(c.coordinates("grp"), g.id == 1);
    }

    #[test]
    fn nodes_advertising_shards_lead_through_the_owning_shard() {
        let c = Cluster::new(
            &Config::parse_from(["kelp", "--listen", "127.0.0.1:9092", "--node-id", "100"]),
            1,
        );
        c.ownership.start_leasing();
        let shards = |base: i32| -> Vec<Node> {
            (0..2)
                .map(|s| Node {
                    id: base + s,
                    host: "127.0.0.1".into(),
                    port: 20000 + base + s,
                    endpoints: Vec::new(),
                })
                .collect()
        };
        let mut a = node(100, &[("t", 3, 1)]);
        a.brokers = shards(100);
        let mut b = node(200, &[]);
        b.brokers = shards(200);
        c.members.set(vec![a, b]);
        let ids: Vec<i32> = c.brokers().iter().map(|n| n.id).collect();
        assert_eq!(ids, [100, 101, 200, 201]);
        assert_eq!(c.controller().id, 100);
        let (n, epoch) = c.leader("t", 3);
        assert_eq!(n.id, 100 + routing::owner("t", 3, 2) as i32);
        assert_eq!(epoch, 1);
        let coord = c.coordinator("grp");
        let node = designated(group_key("grp"), [100, 200]).unwrap();
        assert_eq!(coord.id, node + routing::group_owner("grp", 2) as i32);
    }

    #[test]
    fn partitions_go_to_a_node_on_their_seaweedmq_leaders_host() {
        let c = Cluster::new(
            &Config::parse_from(["kelp", "--listen", "127.0.0.1:9092", "--node-id", "1"]),
            1,
        );
        c.ownership.start_leasing();
        let on = |id, broker: Option<&str>| {
            let mut n = node(id, &[]);
            n.colocated = broker.map(String::from);
            n
        };
        c.members.set(vec![
            on(1, Some("b1:1")),
            on(2, Some("b2:1")),
            on(3, Some("b2:1")),
            on(4, None),
        ]);
        let leaders: Vec<String> = ["b1:1", "b2:1", "b3:1", ""]
            .iter()
            .cycle()
            .take(40)
            .map(|s| s.to_string())
            .collect();
        assert!(c.ownership.set_storage_leaders("t", leaders.clone()));
        assert!(!c.ownership.set_storage_leaders("t", leaders.clone()));
        for (p, l) in leaders.iter().enumerate() {
            let p = p as i32;
            let placed = c.placed_node("t", p).unwrap();
            let anywhere = designated(partition_key("t", p), [1, 2, 3, 4]).unwrap();
            match l.as_str() {
                "b1:1" => assert_eq!(placed, 1),
                "b2:1" => {
                    assert_eq!(placed, designated(partition_key("t", p), [2, 3]).unwrap())
                }
                // A broker with no Kelp node on its host, or none known: any live node.
                _ => assert_eq!(placed, anywhere),
            }
            assert_eq!(c.leader("t", p), (node(placed, &[]).broker(|_| 0), -1));
            assert_eq!(c.placed_here("t", p), placed == 1);
        }
        c.ownership.forget_storage_leaders("t");
        assert_eq!(
            c.placed_node("t", 0),
            designated(partition_key("t", 0), [1, 2, 3, 4])
        );
    }
}
