//! DeleteRecords (key 21, v0-v2): moves partitions' log start offsets forward (offset -1 means
//! the high watermark); whole segments below it are deleted by the owning shard.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::DeleteRecordsRequest;

use super::{code_of, encoded, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{ConnectionError, KelpError};
use crate::protocol::Response;
use crate::shard::ops::DeleteRecordsItem;

/// Handles a DeleteRecords request.
pub async fn handle(
    ctx: &RequestContext,
    req: DeleteRecordsRequest,
) -> Result<Response, ConnectionError> {
    let deletable = |t: &str| ctx.allowed(Operation::Delete, ResourceType::Topic, t);
    let items = req
        .topics
        .iter()
        .filter(|t| deletable(t.name.0.as_str()))
        .flat_map(|t| {
            t.partitions.iter().map(|p| DeleteRecordsItem {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                offset: p.offset,
            })
        })
        .collect();
    let mut results = ctx.shard.scatter(items).await.into_iter();
    let mut resp = DeleteRecordsResponse::default();
    for t in req.topics {
        let ok = deletable(t.name.0.as_str());
        let mut tr = DeleteRecordsTopicResult::default().with_name(t.name);
        for p in t.partitions {
            let r = if ok {
                results
                    .next()
                    .unwrap_or(Err(KelpError::ShardUnavailable(usize::MAX)))
            } else {
                Err(KelpError::TopicAuthorizationFailed)
            };
            let mut pr = DeleteRecordsPartitionResult::default();
            pr.partition_index = p.partition_index;
            pr.error_code = code_of(&r);
            pr.low_watermark = r.unwrap_or(-1);
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    encoded(Response::encode(&ctx.header, &resp))
}
