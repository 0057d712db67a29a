//! ListTransactions (key 66, v0-v1): every transactional id the coordinators know (each
//! shard answers for its own), filtered by state, producer id and (v1) how long the
//! transaction has been open; only the ids the principal may DESCRIBE.

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError};
use crate::protocol::Response;
use crate::shard::txn::{TxnAnswer, TxnRequest};
use crate::txn::TxnState;

const STATES: [TxnState; 6] = [
    TxnState::Empty,
    TxnState::Ongoing,
    TxnState::PrepareCommit,
    TxnState::PrepareAbort,
    TxnState::CompleteCommit,
    TxnState::CompleteAbort,
];

/// Handles a ListTransactions request.
pub async fn handle(
    ctx: &RequestContext,
    req: ListTransactionsRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = ListTransactionsResponse::default();
    let known: Vec<&str> = STATES.iter().map(|s| s.name()).collect();
    resp.unknown_state_filters = req
        .state_filters
        .iter()
        .filter(|f| !known.contains(&f.as_str()))
        .cloned()
        .collect();
    let now = crate::clock::now_ms();
    for shard in 0..ctx.shard.count {
        let Ok(TxnAnswer::List(all)) = ctx.shard.txn_call_on(shard, TxnRequest::List).await else {
            resp.error_code = code::COORDINATOR_NOT_AVAILABLE;
            continue;
        };
        for (id, m) in all {
            let state_ok = req.state_filters.is_empty()
                || req
                    .state_filters
                    .iter()
                    .any(|f| f.as_str() == m.state.name());
            let pid_ok = req.producer_id_filters.is_empty()
                || req.producer_id_filters.contains(&ProducerId(m.producer_id));
            // v1: only transactions open longer than the filter (-1: all).
            let age_ok = req.duration_filter < 0
                || (m.started_ms >= 0 && now - m.started_ms > req.duration_filter);
            if state_ok
                && pid_ok
                && age_ok
                && ctx.allowed(Operation::Describe, ResourceType::TransactionalId, &id)
            {
                resp.transaction_states.push(
                    TransactionState::default()
                        .with_transactional_id(TransactionalId(sb(id)))
                        .with_producer_id(ProducerId(m.producer_id))
                        .with_transaction_state(sb(m.state.name())),
                );
            }
        }
    }
    encoded(Response::encode(&ctx.header, &resp))
}
