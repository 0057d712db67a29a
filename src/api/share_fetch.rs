//! ShareFetch (key 78, v1, KIP-932): a share group member's fetch, which acknowledges what
//! it handled and acquires more records, in its share session.
//!
//! Checks the member id and READ on the group (top-level errors), READ on each named topic
//! (those denied are answered TOPIC_AUTHORIZATION_FAILED and left out, as are unknown
//! topics and partitions, UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION), and the shape of
//! each partition's acknowledgement batches (a malformed set fails that partition with
//! INVALID_REQUEST, as Kafka validates before applying), then hands the request to the
//! group's coordinator shard (`shard::share`), which owns sessions and share-partitions.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ShareFetchRequest, ShareFetchResponse};
use uuid::Uuid;

use super::share_group_heartbeat::check_member_id;
use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::auth::Session;
use crate::error::{ConnectionError, KelpError};
use crate::group::share::messages::{PartitionAcks, ShareFetchIn, ShareFetchOut};
use crate::group::share::partition::{AckBatch, AckType};
use crate::group::share::session::SessionPartition;
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;
use crate::shard::Shard;

/// One partition's acknowledgement batches as Kafka validates them before applying any:
/// first ≤ last, ascending, one type for all or one per offset, each type known.
pub fn ack_batches<'a>(
    batches: impl Iterator<Item = (i64, i64, &'a [i8])>,
) -> Result<Vec<AckBatch>, KelpError> {
    let invalid = |m: &str| Err(KelpError::InvalidRequest(m.to_string()));
    let mut out: Vec<AckBatch> = Vec::new();
    for (first, last, types) in batches {
        if first > last {
            return invalid("First offset of an acknowledgement batch is after its last offset");
        }
        if out.last().is_some_and(|p| first <= p.last) {
            return invalid("Acknowledgement batches are not in ascending order");
        }
        let len = last - first + 1;
        if types.is_empty() || (types.len() != 1 && i64::try_from(types.len()) != Ok(len)) {
            return invalid("Acknowledge types do not match the batch's offsets");
        }
        let types = types
            .iter()
            .map(|&t| AckType::from_code(t))
            .collect::<Option<Vec<_>>>();
        let Some(types) = types else {
            return invalid("Invalid acknowledge type");
        };
        out.push(AckBatch { first, last, types });
    }
    Ok(out)
}

/// Who asks: (group, member), both checked as Kafka checks them, with READ on the group.
pub fn requester(
    ctx: &RequestContext,
    group: Option<&str>,
    member: Option<&str>,
) -> Result<(String, String), KelpError> {
    let member = member.unwrap_or_default();
    check_member_id(member)?;
    let group = group.unwrap_or_default();
    if group.is_empty() {
        return Err(KelpError::InvalidRequest("GroupId can't be empty.".into()));
    }
    if !ctx.allowed(Operation::Read, ResourceType::Group, group) {
        return Err(KelpError::GroupAuthorizationFailed);
    }
    Ok((group.to_string(), member.to_string()))
}

/// Whether the principal may READ the topic of `id` (unknown topics pass, to be answered
/// UNKNOWN_TOPIC_ID by the coordinator).
pub fn may_read(ctx: &RequestContext, id: &Uuid) -> bool {
    let snap = ctx.shard.cluster.snapshot();
    snap.by_id
        .get(id)
        .is_none_or(|t| ctx.allowed(Operation::Read, ResourceType::Topic, &t.name))
}

/// The broker a request was sent to: this node, or with --advertise-shards the shard's own
/// broker (node id + shard).
pub fn broker_id(ctx: &RequestContext) -> i32 {
    let cfg = &ctx.shard.config;
    let shard = if cfg.advertise_shards {
        ctx.shard.id
    } else {
        0
    };
    cfg.node_id + i32::try_from(shard).unwrap_or(0)
}

/// Sends a share request to the group's coordinator shard.
pub async fn call(
    ctx: &RequestContext,
    group: String,
    r: ShareFetchIn,
) -> Result<ShareFetchOut, KelpError> {
    match ctx
        .shard
        .group_call(GroupRequest::ShareFetch(group, Box::new(r)))
        .await
    {
        GroupReply::ShareFetch(r) => r,
        _ => Err(KelpError::CoordinatorNotAvailable),
    }
}

/// A connection closed: the coordinators of the share groups it opened sessions of release
/// its members' records.
pub async fn connection_closed(shard: &Shard, session: &Session) {
    let groups = std::mem::take(&mut *session.share_groups.borrow_mut());
    for g in groups {
        shard
            .group_call(GroupRequest::ShareClosed(g, session.id))
            .await;
    }
}

/// Handles a ShareFetch request.
pub async fn handle(
    ctx: &RequestContext,
    req: ShareFetchRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = ShareFetchResponse::default();
    let (group, member) = match requester(
        ctx,
        req.group_id.as_ref().map(|g| g.0.as_str()),
        req.member_id.as_deref(),
    ) {
        Ok(who) => who,
        Err(e) => return refused(ctx, resp, e),
    };
    // Partitions answered here and kept out of the session: not readable, or not there (a
    // session of made-up partitions would grow with every request).
    let mut denied: Vec<(SessionPartition, bool, KelpError)> = Vec::new();
    let mut added = Vec::new();
    let mut acks: Vec<PartitionAcks> = Vec::new();
    let snap = ctx.shard.cluster.snapshot();
    for t in &req.topics {
        let allowed = may_read(ctx, &t.topic_id);
        let partitions = snap.by_id.get(&t.topic_id).map(|m| m.partitions);
        for p in &t.partitions {
            let tp = (t.topic_id, p.partition_index);
            let has_acks = !p.acknowledgement_batches.is_empty();
            let refusal = match partitions {
                _ if !allowed => Some(KelpError::TopicAuthorizationFailed),
                None => Some(KelpError::UnknownTopicId),
                Some(n) if !(0..n).contains(&p.partition_index) => {
                    Some(KelpError::UnknownTopicOrPartition)
                }
                Some(_) => None,
            };
            if let Some(e) = refusal {
                denied.push((tp, has_acks, e));
                continue;
            }
            added.push(tp);
            if has_acks {
                let batches = p.acknowledgement_batches.iter().map(|b| {
                    (
                        b.first_offset,
                        b.last_offset,
                        b.acknowledge_types.as_slice(),
                    )
                });
                acks.push((tp, ack_batches(batches)));
            }
        }
    }
    let forgotten = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |&p| (t.topic_id, p)))
        .collect();
    let limit = ctx.shard.config.fetch_max_bytes;
    let max_bytes = usize::try_from(req.max_bytes).map_or(0, |b| b.min(limit));
    let opens = req.share_session_epoch == 0;
    let r = ShareFetchIn {
        member_id: member,
        connection: ctx.session.id,
        broker: super::share_fetch::broker_id(ctx),
        epoch: req.share_session_epoch,
        added,
        forgotten,
        acks,
        fetch: true,
        max_wait: Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0)),
        min_bytes: usize::try_from(req.min_bytes).unwrap_or(0),
        max_bytes,
        max_records: usize::try_from(req.max_records).unwrap_or(0),
    };
    if opens {
        // Told when the connection closes, to release what its members hold.
        ctx.session.share_groups.borrow_mut().insert(group.clone());
    }
    let out = match call(ctx, group, r).await {
        Ok(out) => out,
        Err(e) => return refused(ctx, resp, e),
    };
    resp.acquisition_lock_timeout_ms = out.lock_ms;
    let mut topics: BTreeMap<Uuid, Vec<PartitionData>> = BTreeMap::new();
    for ((topic, partition), had_acks, e) in denied {
        let mut pd = PartitionData::default();
        pd.partition_index = partition;
        pd.error_code = e.code();
        if had_acks {
            pd.acknowledge_error_code = e.code();
        }
        pd.records = Some(bytes::Bytes::new());
        topics.entry(topic).or_default().push(pd);
    }
    for p in out.partitions {
        let mut pd = PartitionData::default();
        pd.partition_index = p.partition.1;
        if let Some(e) = p.error {
            pd.error_code = e.code();
            pd.error_message = e.message().map(sb);
        }
        if let Some(Err(e)) = p.ack {
            pd.acknowledge_error_code = e.code();
            pd.acknowledge_error_message = e.message().map(sb);
        }
        // Never null: Kafka's clients refuse a null Records here.
        let size = p.records.iter().map(|b| b.len()).sum();
        let mut records = BytesMut::with_capacity(size);
        for b in &p.records {
            records.extend_from_slice(b);
        }
        pd.records = Some(records.freeze());
        pd.acquired_records = p
            .acquired
            .iter()
            .map(|a| {
                let mut ar = AcquiredRecords::default();
                ar.first_offset = a.first;
                ar.last_offset = a.last;
                ar.delivery_count = i16::try_from(a.delivery_count).unwrap_or(i16::MAX);
                ar
            })
            .collect();
        topics.entry(p.partition.0).or_default().push(pd);
    }
    resp.responses = topics
        .into_iter()
        .map(|(topic_id, partitions)| {
            let mut t = ShareFetchableTopicResponse::default();
            t.topic_id = topic_id;
            t.partitions = partitions;
            t
        })
        .collect();
    encoded(Response::encode(&ctx.header, &resp))
}

fn refused(
    ctx: &RequestContext,
    mut resp: ShareFetchResponse,
    e: KelpError,
) -> Result<Response, ConnectionError> {
    tracing::debug!(error = %e, "share fetch refused");
    resp.error_code = e.code();
    resp.error_message = e.message().map(sb);
    encoded(Response::encode(&ctx.header, &resp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::code;

    fn check(batches: &[(i64, i64, &[i8])]) -> i16 {
        match ack_batches(batches.iter().copied()) {
            Ok(_) => code::NONE,
            Err(e) => e.code(),
        }
    }

    #[test]
    fn acknowledgement_batches_are_checked_as_kafka_checks_them() {
        assert_eq!(check(&[(0, 3, &[1]), (4, 5, &[2, 3])]), code::NONE);
        assert_eq!(check(&[(3, 2, &[1])]), code::INVALID_REQUEST);
        assert_eq!(check(&[(0, 3, &[1]), (3, 5, &[1])]), code::INVALID_REQUEST);
        assert_eq!(check(&[(0, 3, &[])]), code::INVALID_REQUEST);
        assert_eq!(check(&[(0, 3, &[1, 1])]), code::INVALID_REQUEST);
        assert_eq!(check(&[(0, 0, &[4])]), code::INVALID_REQUEST);
        assert_eq!(check(&[(0, 0, &[0])]), code::NONE);
    }
}
