//! ShareAcknowledge (key 79, v1, KIP-932): a share group member acknowledges records in
//! its share session without fetching (commitSync/commitAsync, and close with epoch -1).
//! The same checks as ShareFetch; every named partition is answered.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::share_acknowledge_response::{
    PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use uuid::Uuid;

use super::share_fetch::{ack_batches, call, may_read, requester};
use super::{encoded, sb, RequestContext};
use crate::error::{ConnectionError, KelpError};
use crate::group::share::messages::{PartitionAcks, ShareFetchIn};
use crate::protocol::Response;

/// Handles a ShareAcknowledge request.
pub async fn handle(
    ctx: &RequestContext,
    req: ShareAcknowledgeRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = ShareAcknowledgeResponse::default();
    let who = requester(
        ctx,
        req.group_id.as_ref().map(|g| g.0.as_str()),
        req.member_id.as_deref(),
    );
    let (group, member) = match who {
        Ok(who) => who,
        Err(e) => return refused(ctx, resp, e),
    };
    let mut topics: BTreeMap<Uuid, Vec<PartitionData>> = BTreeMap::new();
    let mut acks: Vec<PartitionAcks> = Vec::new();
    for t in &req.topics {
        let allowed = may_read(ctx, &t.topic_id);
        for p in &t.partitions {
            let tp = (t.topic_id, p.partition_index);
            if !allowed {
                let mut pd = PartitionData::default();
                pd.partition_index = p.partition_index;
                pd.error_code = KelpError::TopicAuthorizationFailed.code();
                topics.entry(t.topic_id).or_default().push(pd);
                continue;
            }
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
    let r = ShareFetchIn {
        member_id: member,
        connection: ctx.session.id,
        broker: super::share_fetch::broker_id(ctx),
        epoch: req.share_session_epoch,
        added: Vec::new(),
        forgotten: Vec::new(),
        acks,
        fetch: false,
        max_wait: Duration::ZERO,
        min_bytes: 0,
        max_bytes: 0,
        max_records: 0,
    };
    let out = match call(ctx, group, r).await {
        Ok(out) => out,
        Err(e) => return refused(ctx, resp, e),
    };
    for p in out.partitions {
        let mut pd = PartitionData::default();
        pd.partition_index = p.partition.1;
        if let Some(Err(e)) = p.ack {
            pd.error_code = e.code();
            pd.error_message = e.message().map(sb);
        }
        topics.entry(p.partition.0).or_default().push(pd);
    }
    resp.responses = topics
        .into_iter()
        .map(|(topic_id, partitions)| {
            let mut t = ShareAcknowledgeTopicResponse::default();
            t.topic_id = topic_id;
            t.partitions = partitions;
            t
        })
        .collect();
    encoded(Response::encode(&ctx.header, &resp))
}

fn refused(
    ctx: &RequestContext,
    mut resp: ShareAcknowledgeResponse,
    e: KelpError,
) -> Result<Response, ConnectionError> {
    tracing::debug!(error = %e, "share acknowledge refused");
    resp.error_code = e.code();
    resp.error_message = e.message().map(sb);
    encoded(Response::encode(&ctx.header, &resp))
}
