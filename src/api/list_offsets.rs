//! ListOffsets (key 2, v1-v8): earliest, latest, max timestamp and by-timestamp lookups.

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::ListOffsetsRequest;

use super::{code_of, encoded, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{ConnectionError, KelpError};
use crate::protocol::Response;
use crate::shard::ops::OffsetsItem;

/// Handles a ListOffsets request.
pub async fn handle(
    ctx: &RequestContext,
    req: ListOffsetsRequest,
) -> Result<Response, ConnectionError> {
    let allowed: Vec<bool> = req
        .topics
        .iter()
        .map(|t| ctx.allowed(Operation::Describe, ResourceType::Topic, t.name.0.as_str()))
        .collect();
    let mut items = Vec::new();
    for (t, _) in req.topics.iter().zip(&allowed).filter(|(_, ok)| **ok) {
        for p in &t.partitions {
            items.push(OffsetsItem {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                timestamp: p.timestamp,
                committed: req.isolation_level == 1,
            });
        }
    }
    let mut results = ctx.shard.scatter(items).await.into_iter();
    let mut resp = ListOffsetsResponse::default();
    for (t, ok) in req.topics.into_iter().zip(allowed) {
        let mut tr = ListOffsetsTopicResponse::default().with_name(t.name.clone());
        for p in t.partitions {
            let r = if ok {
                results
                    .next()
                    .unwrap_or(Err(KelpError::ShardUnavailable(usize::MAX)))
            } else {
                Err(KelpError::TopicAuthorizationFailed)
            };
            let mut pr = ListOffsetsPartitionResponse::default();
            pr.partition_index = p.partition_index;
            pr.error_code = code_of(&r);
            let epoch = match &r {
                Ok(_) => ctx
                    .shard
                    .cluster
                    .ownership
                    .lead(t.name.0.as_str(), p.partition_index)
                    .unwrap_or(-1),
                Err(_) => -1,
            };
            let (ts, off) = r.unwrap_or((-1, -1));
            pr.timestamp = ts;
            pr.offset = off;
            // The leader epoch field exists from v4 on; older versions cannot carry it.
            if ctx.header.api_version >= 4 {
                pr.leader_epoch = epoch;
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    encoded(Response::encode(&ctx.header, &resp))
}
