//! ShareGroupHeartbeat (key 76, v1, KIP-932): members of share groups join, heartbeat and
//! leave; the coordinator answers with their epoch and, when it changed, their partitions.
//!
//! Checks the request as Kafka does (INVALID_REQUEST with Kafka's messages), READ on the
//! group and DESCRIBE on each subscribed topic, then hands it to the group's coordinator
//! shard.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{ConnectionError, KelpError};
use crate::group::consumer::{TopicView, LEAVE_EPOCH};
use crate::group::share::group::ShareHeartbeatOut;
use crate::group::share::messages::ShareHeartbeatIn;
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;
use crate::shard::share::SnapshotTopics;

/// Longest member id Kafka accepts in share RPCs (a UUID's text is 36).
pub const MAX_MEMBER_ID: usize = 36;

/// Kafka's check of a share member id, shared by the share RPCs.
pub fn check_member_id(id: &str) -> Result<(), KelpError> {
    if id.is_empty() || id.len() > MAX_MEMBER_ID {
        return Err(KelpError::InvalidRequest(
            "Invalid member id in the request.".into(),
        ));
    }
    Ok(())
}

fn check_shape(req: &ShareGroupHeartbeatRequest) -> Result<(), KelpError> {
    let invalid = |m: &str| Err(KelpError::InvalidRequest(m.to_string()));
    check_member_id(&req.member_id)?;
    if req.group_id.0.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if req.rack_id.as_ref().is_some_and(|s| s.is_empty()) {
        return invalid("RackId can't be empty.");
    }
    if req.member_epoch == 0
        && req
            .subscribed_topic_names
            .as_ref()
            .is_none_or(|t| t.is_empty())
    {
        return invalid("SubscribedTopicNames must be set in first request.");
    }
    if req.member_epoch < LEAVE_EPOCH {
        return invalid("MemberEpoch is invalid.");
    }
    Ok(())
}

/// Handles a ShareGroupHeartbeat request.
pub async fn handle(
    ctx: &RequestContext,
    req: ShareGroupHeartbeatRequest,
) -> Result<Response, ConnectionError> {
    let member_id = req.member_id.clone();
    let group = req.group_id.0.to_string();
    let mut resp = ShareGroupHeartbeatResponse::default();
    resp.member_id = Some(member_id);
    match beat(ctx, req).await {
        Ok(o) => {
            resp.member_epoch = o.member_epoch;
            let interval = ctx
                .shard
                .cluster
                .group_config(&group, "share.heartbeat.interval.ms")
                .and_then(|v| v.parse::<u64>().ok())
                .map(Duration::from_millis)
                .unwrap_or(ctx.shard.groups.shares.settings().group.heartbeat_interval);
            resp.heartbeat_interval_ms = i32::try_from(interval.as_millis()).unwrap_or(i32::MAX);
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
        Err(e) => {
            tracing::debug!(error = %e, "share group heartbeat refused");
            resp.error_code = e.code();
            resp.error_message = e.message().map(sb);
        }
    }
    encoded(Response::encode(&ctx.header, &resp))
}

async fn beat(
    ctx: &RequestContext,
    req: ShareGroupHeartbeatRequest,
) -> Result<ShareHeartbeatOut, KelpError> {
    check_shape(&req)?;
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
    let topics: Arc<dyn TopicView> = Arc::new(SnapshotTopics(ctx.shard.cluster.snapshot()));
    let hb = ShareHeartbeatIn {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        rack_id: req.rack_id.map(|s| s.to_string()),
        topic_names: req
            .subscribed_topic_names
            .map(|ns| ns.into_iter().map(|n| n.0.to_string()).collect()),
        client: (
            ctx.header.client_id.clone().unwrap_or_default(),
            ctx.client_host(),
        ),
        topics,
    };
    match ctx
        .shard
        .group_call(GroupRequest::ShareHeartbeat(group, Box::new(hb)))
        .await
    {
        GroupReply::ShareHeartbeat(r) => r,
        _ => Err(KelpError::CoordinatorNotAvailable),
    }
}
