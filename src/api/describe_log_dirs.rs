//! DescribeLogDirs (key 35, v1-v4): this node's log directory with the bytes of each
//! partition it leads, as `kafka-log-dirs --describe` and admin UIs show topic sizes.
//! DESCRIBE on the cluster. Every partition is a current replica (offset lag 0, never a
//! future one). Engines that keep no partition log on this host name where the partitions
//! live instead (`memory`, the SeaweedMQ filer directory), sizes -1: Kafka's admin client
//! takes an answer without any log directory for a refusal.

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::Operation;
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;

/// Handles a DescribeLogDirs request.
pub async fn handle(
    ctx: &RequestContext,
    req: DescribeLogDirsRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = DescribeLogDirsResponse::default();
    if !ctx.cluster_allowed(Operation::Describe) {
        resp.error_code = KelpError::ClusterAuthorizationFailed.code();
        return encoded(Response::encode(&ctx.header, &resp));
    }
    let parts = partitions(ctx, &req);
    {
        let dir = ctx.shard.engine.describe_log_dir(parts.clone()).await;
        let mut topics: Vec<DescribeLogDirsTopic> = Vec::new();
        for ((topic, p), size) in parts.into_iter().zip(dir.sizes) {
            let part = DescribeLogDirsPartition::default()
                .with_partition_index(p)
                .with_partition_size(size)
                .with_offset_lag(0)
                .with_is_future_key(false);
            match topics.last_mut().filter(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partitions.push(part),
                None => topics.push(
                    DescribeLogDirsTopic::default()
                        .with_name(TopicName(sb(topic)))
                        .with_partitions(vec![part]),
                ),
            }
        }
        resp.results.push(
            DescribeLogDirsResult::default()
                .with_error_code(code::NONE)
                .with_log_dir(sb(dir.path))
                .with_topics(topics)
                .with_total_bytes(dir.total_bytes)
                .with_usable_bytes(dir.usable_bytes),
        );
    }
    resp.error_code = code::NONE;
    encoded(Response::encode(&ctx.header, &resp))
}

/// The partitions asked about (all when the request names none) that this node leads,
/// grouped by topic in the order first asked; unknown ones are left out, as Kafka does.
fn partitions(ctx: &RequestContext, req: &DescribeLogDirsRequest) -> Vec<(String, i32)> {
    let c = &ctx.shard.cluster;
    let mut asked: Vec<(String, i32)> = Vec::new();
    match &req.topics {
        None => {
            let mut all: Vec<_> = c.snapshot().topics.values().cloned().collect();
            all.sort_by(|a, b| a.name.cmp(&b.name));
            for t in all {
                asked.extend((0..t.partitions).map(|p| (t.name.clone(), p)));
            }
        }
        Some(topics) => {
            for t in topics {
                let Some(meta) = c.topic(t.topic.0.as_str()) else {
                    continue;
                };
                let known = t
                    .partitions
                    .iter()
                    .filter(|&&p| (0..meta.partitions).contains(&p));
                asked.extend(known.map(|&p| (meta.name.clone(), p)));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    asked.retain(|(t, p)| super::led_here(ctx, t, *p) && seen.insert((t.clone(), *p)));
    let mut first: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (i, (t, _)) in asked.iter().enumerate() {
        first.entry(t.clone()).or_insert(i);
    }
    // Stable: partitions keep their order within a topic.
    asked.sort_by_key(|(t, _)| first.get(t).copied());
    asked
}
