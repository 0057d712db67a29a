//! ConsumerGroupHeartbeat (key 68, v0-v1, KIP-848): members of consumer groups join, heartbeat
//! and leave; the coordinator answers with their epoch and, when it changed, their assignment.
//!
//! Checks the request's shape as Kafka does (INVALID_REQUEST with the same messages), the
//! group's READ ACL and DESCRIBE on each named topic, then hands the member's view of the
//! cluster's topics to the group's coordinator shard.

use std::sync::Arc;

use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use regex::Regex;
use uuid::Uuid;

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::cluster::{internal, Cluster, Snapshot};
use crate::error::{ConnectionError, KelpError};
use crate::group::consumer::{self, HeartbeatIn, HeartbeatOut, TopicView, LEAVE_EPOCH};
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;

/// The cluster's topics as a heartbeat sees them: a snapshot, and the internal
/// `__consumer_offsets` Kelp lists (Kafka's regex subscriptions match internal topics too).
/// With ACLs on, a regex matches only topics the heartbeat's principal may DESCRIBE: Kafka
/// filters a group's regex resolution by the principal of the heartbeat that triggers it.
struct ClusterTopics {
    snap: Arc<Snapshot>,
    /// For `__consumer_offsets`' id and the authorizer.
    cluster: Arc<Cluster>,
    /// The heartbeat's (principal, client host), for the DESCRIBE check.
    asker: (String, String),
}

impl TopicView for ClusterTopics {
    fn version(&self) -> u64 {
        self.snap.version
    }

    fn lookup(&self, name: &str) -> Option<(Uuid, i32)> {
        match self.snap.topic(name) {
            Some(t) => Some((t.id, t.partitions)),
            None => internal::is_internal(name).then(|| {
                let m = internal::consumer_offsets(&self.cluster.cluster_id);
                (m.id, m.partitions)
            }),
        }
    }

    fn matching(&self, pattern: &Regex) -> Vec<String> {
        let stored = self.snap.topics.keys();
        let offsets = internal::CONSUMER_OFFSETS;
        let listed = (!self.snap.topics.contains_key(offsets)).then_some(offsets);
        stored
            .map(String::as_str)
            .chain(listed)
            .filter(|n| pattern.is_match(n))
            .filter(|n| {
                self.cluster.authorizer.as_ref().is_none_or(|a| {
                    let (principal, host) = &self.asker;
                    a.authorize(principal, host, Operation::Describe, ResourceType::Topic, n)
                })
            })
            .map(str::to_string)
            .collect()
    }
}

/// Kafka's checks of the request's shape, each an INVALID_REQUEST with Kafka's message.
fn check_shape(req: &ConsumerGroupHeartbeatRequest, version: i16) -> Result<(), KelpError> {
    let invalid = |m: &str| Err(KelpError::InvalidRequest(m.to_string()));
    if req.group_id.0.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if req.instance_id.as_ref().is_some_and(|s| s.is_empty()) {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_ref().is_some_and(|s| s.is_empty()) {
        return invalid("RackId can't be empty.");
    }
    let epoch = req.member_epoch;
    // v1 (KIP-1082): the client chooses its member id; v0 members get one from the first answer.
    if req.member_id.is_empty() && (version >= 1 || epoch > 0 || epoch == LEAVE_EPOCH) {
        return invalid("MemberId can't be empty.");
    }
    match epoch {
        0 => {
            if req.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if req.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                );
            }
        }
        consumer::LEAVE_STATIC_EPOCH if req.instance_id.is_none() => {
            return invalid("InstanceId can't be null.");
        }
        e if e < consumer::LEAVE_STATIC_EPOCH => return invalid("MemberEpoch is invalid."),
        _ => {}
    }
    Ok(())
}

/// Handles a ConsumerGroupHeartbeat request.
pub async fn handle(
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
) -> Result<Response, ConnectionError> {
    let out = beat(ctx, req).await;
    let mut resp = ConsumerGroupHeartbeatResponse::default();
    match out {
        Ok(o) => {
            resp.error_code = crate::error::code::NONE;
            fill(&mut resp, o);
        }
        Err(e) => {
            tracing::debug!(error = %e, "consumer group heartbeat refused");
            resp.error_code = e.code();
            resp.error_message = e.message().map(sb);
        }
    }
    encoded(Response::encode(&ctx.header, &resp))
}

async fn beat(
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
) -> Result<HeartbeatOut, KelpError> {
    check_shape(&req, ctx.header.api_version)?;
    let group = req.group_id.0.to_string();
    if !ctx.allowed(Operation::Read, ResourceType::Group, &group) {
        return Err(KelpError::GroupAuthorizationFailed);
    }
    if let Some(names) = &req.subscribed_topic_names {
        if names
            .iter()
            .any(|n| !ctx.allowed(Operation::Describe, ResourceType::Topic, n.0.as_str()))
        {
            return Err(KelpError::TopicAuthorizationFailed);
        }
    }
    let owned = req.topic_partitions.map(|tps| {
        let mut a = consumer::Assignment::new();
        for tp in tps {
            a.entry(tp.topic_id).or_default().extend(tp.partitions);
        }
        a
    });
    let cluster = &ctx.shard.cluster;
    let topics: Arc<dyn TopicView> = Arc::new(ClusterTopics {
        snap: cluster.snapshot(),
        cluster: cluster.clone(),
        asker: (
            ctx.session.principal().to_string(),
            ctx.client_ip().to_string(),
        ),
    });
    let hb = HeartbeatIn {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.map(|s| s.to_string()),
        rack_id: req.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        topic_names: req
            .subscribed_topic_names
            .map(|ns| ns.into_iter().map(|n| n.0.to_string()).collect()),
        topic_regex: req.subscribed_topic_regex.map(|s| s.to_string()),
        server_assignor: req.server_assignor.map(|s| s.to_string()),
        owned,
        client_id: ctx.header.client_id.clone().unwrap_or_default(),
        client_host: ctx.client_host(),
        topics,
    };
    match ctx
        .shard
        .group_call(GroupRequest::ConsumerHeartbeat(group, Box::new(hb)))
        .await
    {
        GroupReply::ConsumerHeartbeat(r) => r,
        _ => Err(KelpError::CoordinatorNotAvailable),
    }
}

fn fill(resp: &mut ConsumerGroupHeartbeatResponse, o: HeartbeatOut) {
    resp.member_id = Some(sb(o.member_id));
    resp.member_epoch = o.member_epoch;
    resp.heartbeat_interval_ms = o.heartbeat_interval_ms;
    resp.assignment = o.assignment.map(|a| {
        let mut out = Assignment::default();
        out.topic_partitions = a
            .into_iter()
            .map(|(topic_id, ps)| {
                let mut tp = TopicPartitions::default();
                tp.topic_id = topic_id;
                tp.partitions = ps.into_iter().collect();
                tp
            })
            .collect();
        out
    });
}
