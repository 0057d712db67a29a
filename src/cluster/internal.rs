//! Kafka's internal topics as clients see them. Kelp keeps group offsets in its own offset
//! store (and transaction state in the engine's records), not in a topic; but Kafka lists
//! `__consumer_offsets` in Metadata with `is_internal` set, and clients rely on it: regex
//! subscriptions and `exclude.internal.topics` skip it, franz-go's tests look for it. So it
//! is listed, as Kafka 4 creates it (50 partitions), while holding no records here: produce
//! to it is refused as Kafka refuses it to clients, and it cannot be created or deleted.
//! A stored topic of that name from before this (auto-created by a client) is kept as it is.
//! Pure; called by the Metadata, Produce, CreateTopics and DeleteTopics paths.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::TopicMeta;

/// The group offsets topic's name.
pub const CONSUMER_OFFSETS: &str = "__consumer_offsets";
/// Its partition count: Kafka's `offsets.topic.num.partitions` default.
pub const CONSUMER_OFFSETS_PARTITIONS: i32 = 50;

/// Whether `name` is one of Kafka's internal topics that Kelp lists.
pub fn is_internal(name: &str) -> bool {
    name == CONSUMER_OFFSETS
}

/// `__consumer_offsets` of the cluster `cluster_id`: its id is derived from the cluster id,
/// so every Kelp node of one cluster, and every restart, gives clients the same one.
pub fn consumer_offsets(cluster_id: &str) -> TopicMeta {
    TopicMeta {
        name: CONSUMER_OFFSETS.to_string(),
        id: Uuid::new_v5(
            &Uuid::NAMESPACE_OID,
            format!("kelp/{cluster_id}/{CONSUMER_OFFSETS}").as_bytes(),
        ),
        partitions: CONSUMER_OFFSETS_PARTITIONS,
        configs: BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_per_cluster() {
        let a = consumer_offsets("c1");
        assert_eq!(a, consumer_offsets("c1"));
        assert_ne!(a.id, consumer_offsets("c2").id);
        assert!(!a.id.is_nil());
        assert!(is_internal(&a.name) && !is_internal("consumer_offsets"));
    }
}
