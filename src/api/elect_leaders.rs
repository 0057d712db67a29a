//! ElectLeaders (key 43, v0-v2), as `kafka-leader-election` sends it. A Kelp partition has
//! one replica, led by the node placement gives it (moved by Kelp itself when nodes come or
//! go), so no election is ever needed: a named partition gets ELECTION_NOT_NEEDED, as Kafka
//! answers when the preferred replica already leads (and, for an unclean election, when
//! the leader is live); all partitions (none named) gives an empty answer, as Kafka lists
//! only the partitions it elected. ALTER on the cluster.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};

use super::{encoded, outcome_fields, RequestContext};
use crate::auth::acl::Operation;
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;

/// Kafka's election types: preferred replica, unclean.
const ELECTION_TYPES: std::ops::RangeInclusive<i8> = 0..=1;

/// Handles an ElectLeaders request.
pub fn handle(ctx: &RequestContext, req: ElectLeadersRequest) -> Result<Response, ConnectionError> {
    let mut resp = ElectLeadersResponse::default();
    let denied = !ctx.cluster_allowed(Operation::Alter);
    resp.error_code = if denied {
        KelpError::ClusterAuthorizationFailed.code()
    } else {
        code::NONE
    };
    let c = &ctx.shard.cluster;
    for t in req.topic_partitions.iter().flatten() {
        let name = t.topic.0.as_str();
        let count = c.described_topic(name).map(|m| m.partitions);
        let partition_result = t
            .partitions
            .iter()
            .map(|&p| {
                let outcome = if denied {
                    Err(KelpError::ClusterAuthorizationFailed)
                } else if !count.is_some_and(|n| (0..n).contains(&p)) {
                    Err(KelpError::UnknownTopicOrPartition)
                } else if !ELECTION_TYPES.contains(&req.election_type) {
                    Err(KelpError::InvalidRequest(format!(
                        "unknown election type {}",
                        req.election_type
                    )))
                } else {
                    Err(KelpError::ElectionNotNeeded)
                };
                let (error_code, error_message) = outcome_fields("leader election", name, outcome);
                PartitionResult::default()
                    .with_partition_id(p)
                    .with_error_code(error_code)
                    .with_error_message(error_message)
            })
            .collect();
        resp.replica_election_results.push(
            ReplicaElectionResult::default()
                .with_topic(t.topic.clone())
                .with_partition_result(partition_result),
        );
    }
    encoded(Response::encode(&ctx.header, &resp))
}
