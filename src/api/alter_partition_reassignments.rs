//! AlterPartitionReassignments (key 45, v0-v1), as `kafka-reassign-partitions --execute` and
//! admin clients send it. A Kelp partition has one replica, led by the broker Kelp's
//! placement gives it, and nothing copies replicas between brokers: a reassignment to the
//! partition's own leader is already done (NONE, as Kafka answers a reassignment to the
//! current replicas); any other target is refused with Kafka's codes (unknown broker or
//! another broker: INVALID_REPLICA_ASSIGNMENT; more or fewer replicas:
//! INVALID_REPLICATION_FACTOR), and a cancellation finds nothing to cancel
//! (NO_REASSIGNMENT_IN_PROGRESS). ALTER on the cluster.

use std::collections::HashSet;

use kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};

use super::{encoded, outcome_fields, sb, RequestContext};
use crate::auth::acl::Operation;
use crate::cluster::Cluster;
use crate::error::{ConnectionError, KelpError};
use crate::protocol::Response;

/// Handles an AlterPartitionReassignments request.
pub fn handle(
    ctx: &RequestContext,
    req: AlterPartitionReassignmentsRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = AlterPartitionReassignmentsResponse::default();
    resp.allow_replication_factor_change = req.allow_replication_factor_change;
    let denied = !ctx.cluster_allowed(Operation::Alter);
    if denied {
        let e = KelpError::ClusterAuthorizationFailed;
        resp.error_code = e.code();
        resp.error_message = e.message().map(sb);
    }
    let c = &ctx.shard.cluster;
    let brokers: HashSet<i32> = c.brokers().iter().map(|n| n.id).collect();
    for t in &req.topics {
        let name = t.name.0.as_str();
        let count = c.described_topic(name).map(|m| m.partitions);
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                let outcome = if denied {
                    Err(KelpError::ClusterAuthorizationFailed)
                } else if !count.is_some_and(|n| (0..n).contains(&p.partition_index)) {
                    Err(KelpError::UnknownTopicOrPartition)
                } else {
                    check(c, &brokers, name, p)
                };
                let (error_code, error_message) =
                    outcome_fields("partition reassignment", name, outcome);
                ReassignablePartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(error_code)
                    .with_error_message(error_message)
            })
            .collect();
        resp.responses.push(
            ReassignableTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions),
        );
    }
    encoded(Response::encode(&ctx.header, &resp))
}

/// Whether partition `p` of `topic` can have the replicas asked for (see the module docs).
fn check(
    c: &Cluster,
    brokers: &HashSet<i32>,
    topic: &str,
    p: &ReassignablePartition,
) -> Result<(), KelpError> {
    let Some(replicas) = &p.replicas else {
        return Err(KelpError::NoReassignmentInProgress);
    };
    if replicas.is_empty() {
        return Err(KelpError::InvalidReplicaAssignment(
            "The replica list cannot be empty.".into(),
        ));
    }
    let mut seen = HashSet::new();
    for r in replicas {
        if !seen.insert(r.0) {
            return Err(KelpError::InvalidReplicaAssignment(
                "Duplicate replica ids in partition reassignment replica list.".into(),
            ));
        }
        if !brokers.contains(&r.0) {
            return Err(KelpError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes broker {}, but no such broker is \
                 registered.",
                r.0
            )));
        }
    }
    if replicas.len() != 1 {
        return Err(KelpError::InvalidReplicationFactor(
            i16::try_from(replicas.len()).unwrap_or(i16::MAX),
        ));
    }
    let (leader, _) = c.leader(topic, p.partition_index);
    if replicas[0].0 != leader.id {
        return Err(KelpError::InvalidReplicaAssignment(format!(
            "Kelp places partitions on brokers itself: {topic}-{} has its one replica on broker \
             {}",
            p.partition_index, leader.id
        )));
    }
    Ok(())
}
