//! EndTxn (key 26, v0-v5): commits or aborts the producer's transaction. The coordinator
//! stores the decision, writes the markers to every partition of the transaction and settles
//! its groups' offsets before answering ([`crate::shard::txn`]). v5 is transactions v2
//! (KIP-890): the epoch moves on with every end and the answer carries the producer id and
//! epoch of the next transaction.

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};

use super::{encoded, RequestContext};
use crate::auth::acl::Operation;
use crate::error::{code, ConnectionError};
use crate::protocol::Response;
use crate::shard::txn::{TxnAnswer, TxnRequest};

/// Handles an EndTxn request.
pub async fn handle(ctx: &RequestContext, req: EndTxnRequest) -> Result<Response, ConnectionError> {
    let id = req.transactional_id.0.to_string();
    let v2 = ctx.header.api_version >= 5;
    let outcome = match super::txn::check_id(ctx, &id, Operation::Write) {
        Err(e) => Err(e),
        Ok(()) => {
            ctx.shard
                .txn_call(TxnRequest::End {
                    id,
                    producer_id: req.producer_id.0,
                    epoch: req.producer_epoch,
                    commit: req.committed,
                    v2,
                })
                .await
        }
    };
    let (error_code, producer) = match &outcome {
        Ok(TxnAnswer::Producer(pid, epoch)) => (code::NONE, (*pid, *epoch)),
        Ok(_) => (code::NONE, (-1, -1)),
        Err(e) => (super::txn::code_for(e, ctx.header.api_version, 2), (-1, -1)),
    };
    let resp = EndTxnResponse::default()
        .with_error_code(error_code)
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1);
    encoded(Response::encode(&ctx.header, &resp))
}
