//! EndTxn (key 26, v0-v4): commits or aborts the producer's transaction. The coordinator
//! stores the decision, writes the markers to every partition of the transaction and settles
//! its groups' offsets before answering ([`crate::shard::txn`]).

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use super::{encoded, RequestContext};
use crate::auth::acl::Operation;
use crate::error::{code, ConnectionError};
use crate::protocol::Response;
use crate::shard::txn::TxnRequest;

/// Handles an EndTxn request.
pub async fn handle(ctx: &RequestContext, req: EndTxnRequest) -> Result<Response, ConnectionError> {
    let id = req.transactional_id.0.to_string();
    let outcome = match super::txn::check_id(ctx, &id, Operation::Write) {
        Err(e) => Err(e),
        Ok(()) => ctx
            .shard
            .txn_call(TxnRequest::End {
                id,
                producer_id: req.producer_id.0,
                epoch: req.producer_epoch,
                commit: req.committed,
            })
            .await
            .map(|_| ()),
    };
    let error_code = match &outcome {
        Ok(()) => code::NONE,
        Err(e) => super::txn::code_for(e, ctx.header.api_version, 2),
    };
    let resp = EndTxnResponse::default().with_error_code(error_code);
    encoded(Response::encode(&ctx.header, &resp))
}
