//! Metadata (key 3, v0-v12): the advertised nodes (this broker as one node, or one per shard
//! with `--advertise-shards`; every live Kelp node over SeaweedMQ) and each partition's
//! leader and leader epoch among them (`cluster::leaders`); unknown topics are auto-created
//! when the request and the broker allow it.

use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest};

use super::{encoded, sb, topic_name, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::cluster::{internal, Cluster, TopicMeta};
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;

fn topic_entry(meta: &TopicMeta, cluster: &Cluster, ops: i32) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    t.error_code = code::NONE;
    t.is_internal = internal::is_internal(&meta.name);
    t.name = Some(topic_name(meta.name.clone()));
    t.topic_id = meta.id;
    t.topic_authorized_operations = ops;
    t.partitions = (0..meta.partitions)
        .map(|i| {
            let (leader, epoch) = cluster.leader(&meta.name, i);
            let node = leader.id;
            let mut p = MetadataResponsePartition::default();
            p.partition_index = i;
            p.leader_id = BrokerId(node);
            p.leader_epoch = epoch;
            p.replica_nodes = vec![BrokerId(node)];
            p.isr_nodes = vec![BrokerId(node)];
            p
        })
        .collect();
    t
}

fn error_entry(name: Option<&str>, id: uuid::Uuid, err: &KelpError) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    t.error_code = err.code();
    t.name = name.map(|n| topic_name(n.to_string()));
    t.topic_id = id;
    t.topic_authorized_operations = i32::MIN;
    t
}

/// Handles a Metadata request.
pub async fn handle(
    ctx: &RequestContext,
    req: MetadataRequest,
) -> Result<Response, ConnectionError> {
    let v = ctx.header.api_version;
    let cluster = &ctx.shard.cluster;
    // v0 asks for all topics with an empty list; later versions with null. Before v4 there
    // is no flag and the broker's auto-create setting alone decides.
    let requested = match req.topics {
        Some(ref ts) if !(v == 0 && ts.is_empty()) => Some(ts),
        _ => None,
    };
    let allow_auto = v < 4 || req.allow_auto_topic_creation;
    // Kafka's "not asked for" is i32::MIN (v8-v10 ask per request; later versions for
    // topics only).
    let topic_ops = |name: &str| {
        ctx.operations_if(
            v >= 8 && req.include_topic_authorized_operations,
            ResourceType::Topic,
            name,
        )
    };
    let topics: Vec<MetadataResponseTopic> = match requested {
        None => {
            // Kafka lists only the topics the principal may describe.
            let mut all: Vec<Arc<TopicMeta>> = cluster
                .described_topics()
                .into_iter()
                .filter(|m| ctx.allowed(Operation::Describe, ResourceType::Topic, &m.name))
                .collect();
            all.sort_by(|a, b| a.name.cmp(&b.name));
            all.into_iter()
                .map(|m| topic_entry(&m, cluster, topic_ops(&m.name)))
                .collect()
        }
        Some(ts) => {
            let mut out = Vec::with_capacity(ts.len());
            for t in ts {
                // Java clients asking by topic id send an empty name beside it (the field's
                // default), not a null one.
                let by_id = t.name.as_ref().is_none_or(|n| n.0.is_empty()) && !t.topic_id.is_nil();
                let name = if by_id { None } else { t.name.as_ref() };
                out.push(match name {
                    Some(name)
                        if !ctx.allowed(
                            Operation::Describe,
                            ResourceType::Topic,
                            name.0.as_str(),
                        ) =>
                    {
                        error_entry(
                            Some(name.0.as_str()),
                            t.topic_id,
                            &KelpError::TopicAuthorizationFailed,
                        )
                    }
                    Some(name) if internal::is_internal(name.0.as_str()) => {
                        match cluster.described_topic(name.0.as_str()) {
                            Some(m) => topic_entry(&m, cluster, topic_ops(&m.name)),
                            None => error_entry(
                                Some(name.0.as_str()),
                                t.topic_id,
                                &KelpError::UnknownTopicOrPartition,
                            ),
                        }
                    }
                    Some(name) => {
                        let create = allow_auto && ctx.may_create_topic(name.0.as_str());
                        match ctx.shard.topic_or_create(name.0.as_str(), create).await {
                            Ok(Some(m)) => topic_entry(&m, cluster, topic_ops(&m.name)),
                            Ok(None) => error_entry(
                                Some(name.0.as_str()),
                                t.topic_id,
                                &KelpError::UnknownTopicOrPartition,
                            ),
                            Err(e) => error_entry(Some(name.0.as_str()), t.topic_id, &e),
                        }
                    }
                    None => match cluster.described_topic_by_id(&t.topic_id) {
                        Some(m)
                            if !ctx.allowed(Operation::Describe, ResourceType::Topic, &m.name) =>
                        {
                            error_entry(None, t.topic_id, &KelpError::TopicAuthorizationFailed)
                        }
                        Some(m) => topic_entry(&m, cluster, topic_ops(&m.name)),
                        None => error_entry(None, t.topic_id, &KelpError::UnknownTopicId),
                    },
                });
            }
            out
        }
    };
    let mut resp = MetadataResponse::default();
    resp.brokers = cluster
        .brokers()
        .iter()
        .map(|n| {
            // The addresses of the listener this client came in on.
            let (host, port) = n.on(&ctx.session.listener.name);
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(n.id))
                .with_host(sb(host))
                .with_port(port)
        })
        .collect();
    resp.cluster_id = Some(sb(cluster.cluster_id.clone()));
    resp.controller_id = BrokerId(cluster.controller().id);
    resp.cluster_authorized_operations = ctx.operations_if(
        (8..=10).contains(&v) && req.include_cluster_authorized_operations,
        ResourceType::Cluster,
        crate::auth::acl::CLUSTER_NAME,
    );
    resp.topics = topics;
    encoded(Response::encode(&ctx.header, &resp))
}
