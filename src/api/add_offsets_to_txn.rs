//! AddOffsetsToTxn (key 25, v0-v3): a transactional producer is about to commit a group's
//! offsets in its transaction (TxnOffsetCommit); the coordinator settles them with the
//! transaction's outcome.

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use super::{encoded, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;
use crate::shard::txn::TxnRequest;
use crate::txn::AddMode;

/// Handles an AddOffsetsToTxn request.
pub async fn handle(
    ctx: &RequestContext,
    req: AddOffsetsToTxnRequest,
) -> Result<Response, ConnectionError> {
    let id = req.transactional_id.0.to_string();
    let group = req.group_id.0.to_string();
    let outcome = match super::txn::check_id(ctx, &id, Operation::Write) {
        Err(e) => Err(e),
        Ok(()) if !ctx.allowed(Operation::Read, ResourceType::Group, &group) => {
            Err(KelpError::GroupAuthorizationFailed)
        }
        Ok(()) => ctx
            .shard
            .txn_call(TxnRequest::Add {
                id,
                producer_id: req.producer_id.0,
                epoch: req.producer_epoch,
                partitions: Vec::new(),
                groups: vec![group],
                mode: AddMode::Client,
            })
            .await
            .map(|_| ()),
    };
    let error_code = match &outcome {
        Ok(()) => code::NONE,
        Err(e) => super::txn::code_for(e, ctx.header.api_version, 2),
    };
    let resp = AddOffsetsToTxnResponse::default().with_error_code(error_code);
    encoded(Response::encode(&ctx.header, &resp))
}
