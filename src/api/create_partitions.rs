//! CreatePartitions (key 37, v0-v3): raises topics' partition counts, as `kafka-topics
//! --alter --partitions` and admin clients ask. Each topic is checked as Kafka checks it
//! (ALTER on the topic, more partitions than it has, replica assignments that fit), then
//! the storage engine makes room (`Shard::add_partitions`; SeaweedMQ cannot, and says so)
//! and the metadata shows the new partitions, led where Kelp's ownership puts them. Records
//! keep their partitions; keys may map elsewhere from then on, as on Kafka.

use std::collections::HashSet;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::{
    CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use kafka_protocol::messages::CreatePartitionsRequest;

use super::{encoded, outcome_fields, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::cluster::internal;
use crate::error::{ConnectionError, KelpError};
use crate::protocol::Response;

/// Handles a CreatePartitions request.
pub async fn handle(
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
) -> Result<Response, ConnectionError> {
    let mut seen = HashSet::new();
    let dups: HashSet<String> = req
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|n| !seen.insert(n.clone()))
        .collect();
    let mut resp = CreatePartitionsResponse::default();
    for t in &req.topics {
        let name = t.name.0.to_string();
        let outcome = if dups.contains(&name) {
            Err(KelpError::InvalidRequest("Duplicate topic name.".into()))
        } else if !ctx.allowed(Operation::Alter, ResourceType::Topic, &name) {
            Err(KelpError::TopicAuthorizationFailed)
        } else {
            grow(ctx, t, req.validate_only).await
        };
        let mut r = CreatePartitionsTopicResult::default();
        r.name = t.name.clone();
        (r.error_code, r.error_message) = outcome_fields("create partitions", &name, outcome);
        resp.results.push(r);
    }
    encoded(Response::encode(&ctx.header, &resp))
}

async fn grow(
    ctx: &RequestContext,
    t: &CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), KelpError> {
    let name = t.name.0.as_str();
    let cluster = &ctx.shard.cluster;
    let Some(meta) = cluster.topic(name) else {
        return Err(if internal::is_internal(name) {
            KelpError::InvalidRequest(format!("{name} is an internal topic Kelp does not keep"))
        } else {
            KelpError::UnknownTopicOrPartition
        });
    };
    if t.count <= meta.partitions {
        return Err(KelpError::PartitionsNotIncreased(meta.partitions, t.count));
    }
    if let Some(assignments) = &t.assignments {
        let added = t.count - meta.partitions;
        if i32::try_from(assignments.len()).ok() != Some(added) {
            return Err(KelpError::InvalidReplicaAssignment(format!(
                "Attempted to add {added} additional partitions, but only {} assignments were \
                 supplied.",
                assignments.len()
            )));
        }
        let nodes: HashSet<i32> = cluster.brokers().iter().map(|n| n.id).collect();
        for a in assignments {
            // Every partition has one replica here; Kelp's ownership, not the assignment,
            // decides which node leads it (documented).
            if a.broker_ids.len() != 1 {
                return Err(KelpError::InvalidReplicaAssignment(format!(
                    "{} replicas given where the topic has a replication factor of 1",
                    a.broker_ids.len()
                )));
            }
            if let Some(b) = a.broker_ids.iter().find(|b| !nodes.contains(&b.0)) {
                return Err(KelpError::InvalidReplicaAssignment(format!(
                    "The manual partition assignment includes broker {}, but no such broker \
                     is registered.",
                    b.0
                )));
            }
        }
    }
    ctx.shard
        .add_partitions(name, t.count, validate_only)
        .await
        .map(|_| ())
}
