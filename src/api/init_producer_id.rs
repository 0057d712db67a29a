//! InitProducerId (key 22, v0-v4): hands out producer ids and bumps epochs. Sequence checks
//! happen per partition on the owning shard (`partition::producer_state`). With a
//! transactional id the id's coordinator answers ([`crate::shard::txn`]): the same producer id
//! at a new epoch, which fences the previous producer, after aborting its open transaction.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{encoded, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;
use crate::shard::txn::{TxnAnswer, TxnRequest};

/// Handles an InitProducerId request.
pub async fn handle(
    ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = InitProducerIdResponse::default();
    // Kafka treats an empty transactional id as none.
    let txn_id = req
        .transactional_id
        .as_ref()
        .map(|t| t.0.to_string())
        .filter(|t| !t.is_empty());
    if let Some(id) = txn_id {
        let outcome = match super::txn::check_id(ctx, &id, Operation::Write) {
            Err(e) => Err(e),
            Ok(()) => {
                ctx.shard
                    .txn_call(TxnRequest::Init {
                        id,
                        timeout_ms: req.transaction_timeout_ms,
                        client: (req.producer_id.0, req.producer_epoch),
                    })
                    .await
            }
        };
        match outcome {
            Ok(TxnAnswer::Producer(pid, epoch)) => {
                resp.error_code = code::NONE;
                resp.producer_id = ProducerId(pid);
                resp.producer_epoch = epoch;
            }
            Ok(_) => {
                resp.error_code = code::UNKNOWN_SERVER_ERROR;
                resp.producer_id = ProducerId(-1);
                resp.producer_epoch = -1;
            }
            Err(e) => {
                resp.error_code = super::txn::code_for(&e, ctx.header.api_version, 4);
                resp.producer_id = ProducerId(-1);
                resp.producer_epoch = -1;
            }
        }
    } else if !ctx.cluster_allowed(Operation::IdempotentWrite)
        && !ctx.allowed_any(Operation::Write, ResourceType::Topic)
    {
        // Kafka: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on
        // some topic.
        resp.error_code = KelpError::ClusterAuthorizationFailed.code();
        resp.producer_id = ProducerId(-1);
        resp.producer_epoch = -1;
    } else if req.producer_id.0 >= 0 && req.producer_epoch >= 0 {
        // A known producer re-initialising (KIP-360): same id, next epoch.
        resp.error_code = code::NONE;
        resp.producer_id = req.producer_id;
        resp.producer_epoch = req.producer_epoch.saturating_add(1);
    } else {
        match ctx.shard.allocate_producer_id().await {
            Ok(id) => {
                resp.error_code = code::NONE;
                resp.producer_id = ProducerId(id);
                resp.producer_epoch = 0;
            }
            Err(e) => {
                // As Kafka when no producer id block is available yet: retriable for every
                // client (a storage error code is fatal to some in InitProducerId).
                tracing::warn!(error = %e, "no producer id");
                resp.error_code = code::COORDINATOR_LOAD_IN_PROGRESS;
                resp.producer_id = ProducerId(-1);
                resp.producer_epoch = -1;
            }
        }
    }
    encoded(Response::encode(&ctx.header, &resp))
}
