//! DescribeTopicPartitions (key 75, v0; KIP-966): topics' partitions with their leaders, as
//! Metadata gives them, a page at a time. Kafka 4's `kafka-topics --describe` and admin
//! clients ask with it. A page holds at most `response_partition_limit` partitions (capped at
//! Kafka's default 2000), starts at the request's cursor and names the next page's cursor.
//! Topics come sorted by name; asking for none lists every topic the principal may
//! describe, `__consumer_offsets` included (`cluster::internal`).

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponse, DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{BrokerId, DescribeTopicPartitionsRequest};

use super::{encoded, topic_name, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::cluster::internal;
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;

/// Kafka's `max.request.partition.size.limit` default: the most partitions of one answer.
const MAX_PARTITIONS: i32 = 2000;

fn error_topic(name: &str, err: &KelpError) -> DescribeTopicPartitionsResponseTopic {
    let mut t = DescribeTopicPartitionsResponseTopic::default();
    t.error_code = err.code();
    t.name = Some(topic_name(name));
    t.topic_authorized_operations = i32::MIN;
    t
}

/// Handles a DescribeTopicPartitions request.
pub fn handle(
    ctx: &RequestContext,
    req: DescribeTopicPartitionsRequest,
) -> Result<Response, ConnectionError> {
    let cluster = &ctx.shard.cluster;
    let describable = |name: &str| ctx.allowed(Operation::Describe, ResourceType::Topic, name);
    let mut names: Vec<String> = if req.topics.is_empty() {
        // Kafka lists only the topics the principal may describe.
        cluster
            .described_topics()
            .into_iter()
            .map(|m| m.name.clone())
            .filter(|n| describable(n))
            .collect()
    } else {
        req.topics.iter().map(|t| t.name.0.to_string()).collect()
    };
    names.sort();
    names.dedup();
    let limit = if req.response_partition_limit > 0 {
        req.response_partition_limit.min(MAX_PARTITIONS)
    } else {
        MAX_PARTITIONS
    };
    let cursor = req
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index.max(0)));

    let mut resp = DescribeTopicPartitionsResponse::default();
    let mut left = limit;
    for name in names {
        let start = match &cursor {
            // Pages before the cursor's topic were answered already.
            Some((topic, _)) if name < *topic => continue,
            Some((topic, p)) if name == *topic => *p,
            _ => 0,
        };
        if !describable(&name) {
            resp.topics
                .push(error_topic(&name, &KelpError::TopicAuthorizationFailed));
            continue;
        }
        let Some(meta) = cluster.described_topic(&name) else {
            resp.topics
                .push(error_topic(&name, &KelpError::UnknownTopicOrPartition));
            continue;
        };
        if left == 0 {
            resp.next_cursor = Some(next(&name, start));
            break;
        }
        let end = meta.partitions.min(start.saturating_add(left));
        let mut t = DescribeTopicPartitionsResponseTopic::default();
        t.error_code = code::NONE;
        t.name = Some(topic_name(meta.name.clone()));
        t.topic_id = meta.id;
        t.is_internal = internal::is_internal(&meta.name);
        t.topic_authorized_operations = ctx.authorized_operations(ResourceType::Topic, &meta.name);
        t.partitions = (start..end)
            .map(|i| {
                let (leader, epoch) = cluster.leader(&meta.name, i);
                let node = BrokerId(leader.id);
                let mut p = DescribeTopicPartitionsResponsePartition::default();
                p.error_code = code::NONE;
                p.partition_index = i;
                p.leader_id = node;
                p.leader_epoch = epoch;
                p.replica_nodes = vec![node];
                p.isr_nodes = vec![node];
                p.eligible_leader_replicas = Some(Vec::new());
                p.last_known_elr = Some(Vec::new());
                p
            })
            .collect();
        left -= end.saturating_sub(start).max(0);
        resp.topics.push(t);
        if end < meta.partitions {
            resp.next_cursor = Some(next(&name, end));
            break;
        }
    }
    encoded(Response::encode(&ctx.header, &resp))
}

fn next(topic: &str, partition: i32) -> Cursor {
    let mut c = Cursor::default();
    c.topic_name = topic_name(topic);
    c.partition_index = partition;
    c
}
