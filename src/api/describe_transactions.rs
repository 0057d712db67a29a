//! DescribeTransactions (key 65, v0): the coordinator's view of transactional ids, as
//! `kafka-transactions describe` shows it. DESCRIBE on each id; an id nobody initialised is
//! TRANSACTIONAL_ID_NOT_FOUND.

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId,
};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::Operation;
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;
use crate::shard::txn::{TxnAnswer, TxnRequest};

/// Handles a DescribeTransactions request.
pub async fn handle(
    ctx: &RequestContext,
    req: DescribeTransactionsRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = DescribeTransactionsResponse::default();
    for tid in req.transactional_ids {
        let id = tid.0.to_string();
        let mut st = TransactionState::default()
            .with_transactional_id(tid)
            .with_transaction_state(sb(""))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
            .with_transaction_start_time_ms(-1);
        let found = match super::txn::check_id(ctx, &id, Operation::Describe) {
            Err(e) => Err(e),
            Ok(()) => match ctx.shard.txn_call(TxnRequest::Describe { id }).await {
                Ok(TxnAnswer::Meta(Some(m))) => Ok(m),
                Ok(_) => Err(KelpError::TransactionalIdNotFound),
                Err(e) => Err(e),
            },
        };
        match found {
            Ok(m) => {
                st.error_code = code::NONE;
                st.transaction_state = sb(m.state.name());
                st.transaction_timeout_ms = m.timeout_ms;
                st.transaction_start_time_ms = m.started_ms;
                st.producer_id = ProducerId(m.producer_id);
                st.producer_epoch = m.epoch;
                let mut topics: Vec<TopicData> = Vec::new();
                for (t, p) in m.partitions {
                    match topics.iter_mut().find(|d| d.topic.0.as_str() == t) {
                        Some(d) => d.partitions.push(p),
                        None => topics.push(
                            TopicData::default()
                                .with_topic(super::topic_name(t))
                                .with_partitions(vec![p]),
                        ),
                    }
                }
                st.topics = topics;
            }
            Err(e) => st.error_code = e.code(),
        }
        resp.transaction_states.push(st);
    }
    encoded(Response::encode(&ctx.header, &resp))
}
