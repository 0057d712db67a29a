//! OffsetDelete (key 47, v0): removes committed offsets of partitions the group no longer
//! consumes.

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use super::{code_of, encoded, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;

/// Handles an OffsetDelete request.
pub async fn handle(
    ctx: &RequestContext,
    req: OffsetDeleteRequest,
) -> Result<Response, ConnectionError> {
    // Partitions of topics the principal may not read are answered, not deleted.
    let readable = |t: &str| ctx.allowed(Operation::Read, ResourceType::Topic, t);
    let parts: Vec<(String, i32)> = req
        .topics
        .iter()
        .filter(|t| readable(t.name.0.as_str()))
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index))
        })
        .collect();
    let out = if !ctx.allowed(
        Operation::Delete,
        ResourceType::Group,
        req.group_id.0.as_str(),
    ) {
        Err(KelpError::GroupAuthorizationFailed)
    } else {
        match ctx
            .shard
            .group_call(GroupRequest::DeleteOffsets(
                req.group_id.0.to_string(),
                parts,
            ))
            .await
        {
            GroupReply::DeleteOffsets(r) => r,
            _ => Err(KelpError::CoordinatorNotAvailable),
        }
    };
    let mut resp = OffsetDeleteResponse::default();
    match out {
        Err(e) => resp.error_code = e.code(),
        Ok(results) => {
            resp.error_code = code::NONE;
            let mut results = results.into_iter();
            for t in req.topics {
                let ok = readable(t.name.0.as_str());
                let mut rt = OffsetDeleteResponseTopic::default().with_name(t.name);
                for p in t.partitions {
                    let r = if ok {
                        results
                            .next()
                            .map_or(Err(KelpError::CoordinatorNotAvailable), |(_, r)| r)
                    } else {
                        Err(KelpError::TopicAuthorizationFailed)
                    };
                    rt.partitions.push(
                        OffsetDeleteResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(code_of(&r)),
                    );
                }
                resp.topics.push(rt);
            }
        }
    }
    encoded(Response::encode(&ctx.header, &resp))
}
