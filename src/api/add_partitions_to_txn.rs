//! AddPartitionsToTxn (key 24, v0-v5): a transactional producer names the partitions it is
//! about to write, so the coordinator ([`crate::shard::txn`]) writes markers to them when the
//! transaction ends. Every partition is checked first (WRITE on its topic, it exists); if one
//! fails, the others answer OPERATION_NOT_ATTEMPTED, as Kafka. v4+ is brokers' batched form
//! (KIP-890): several transactions, each added or only verified; it needs CLUSTER_ACTION.

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};

use super::{encoded, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;
use crate::shard::txn::TxnRequest;
use crate::txn::AddMode;

/// Kafka's code for partitions left alone because another one failed.
const OPERATION_NOT_ATTEMPTED: i16 = 55;

/// Handles an AddPartitionsToTxn request.
pub async fn handle(
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> Result<Response, ConnectionError> {
    let v = ctx.header.api_version;
    if v >= 4 {
        return from_brokers(ctx, req).await;
    }
    let id = req.v3_and_below_transactional_id.0.to_string();
    let snapshot = ctx.shard.cluster.snapshot();
    // (topic, partition, its own error).
    let mut rows: Vec<(String, i32, Option<KelpError>)> = Vec::new();
    for t in &req.v3_and_below_topics {
        let name = t.name.0.to_string();
        let own = if !ctx.allowed(Operation::Write, ResourceType::Topic, &name) {
            Some(KelpError::TopicAuthorizationFailed)
        } else {
            None
        };
        let parts = snapshot.topic(&name).map(|m| m.partitions);
        for &p in &t.partitions {
            let e = own.clone().or_else(|| match parts {
                Some(n) if (0..n).contains(&p) => None,
                _ => Some(KelpError::UnknownTopicOrPartition),
            });
            rows.push((name.clone(), p, e));
        }
    }
    let outcome: Result<(), KelpError> = match super::txn::check_id(ctx, &id, Operation::Write) {
        Err(e) => Err(e),
        Ok(()) if rows.iter().any(|r| r.2.is_some()) => Ok(()),
        Ok(()) => ctx
            .shard
            .txn_call(TxnRequest::Add {
                id,
                producer_id: req.v3_and_below_producer_id.0,
                epoch: req.v3_and_below_producer_epoch,
                partitions: rows.iter().map(|(t, p, _)| (t.clone(), *p)).collect(),
                groups: Vec::new(),
                mode: AddMode::Client,
            })
            .await
            .map(|_| ()),
    };
    let any_bad = rows.iter().any(|r| r.2.is_some());
    let codes = rows.into_iter().map(|(topic, p, own)| {
        let error_code = match (&outcome, own) {
            (Err(e), _) => super::txn::code_for(e, v, 2),
            (Ok(()), Some(e)) => e.code(),
            (Ok(()), None) if any_bad => OPERATION_NOT_ATTEMPTED,
            (Ok(()), None) => code::NONE,
        };
        (topic, p, error_code)
    });
    let resp =
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(by_topic(codes));
    encoded(Response::encode(&ctx.header, &resp))
}

/// Per-partition codes grouped by topic, in first-seen order.
fn by_topic(
    codes: impl IntoIterator<Item = (String, i32, i16)>,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (topic, p, error_code) in codes {
        let result = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(p)
            .with_partition_error_code(error_code);
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.results_by_partition.push(result),
            None => topics.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(super::topic_name(topic))
                    .with_results_by_partition(vec![result]),
            ),
        }
    }
    topics
}

/// v4+: transactions batched by a broker, each added (transactions v2) or verified; a
/// partition its transaction has not added answers TRANSACTION_ABORTABLE on verification.
async fn from_brokers(
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> Result<Response, ConnectionError> {
    if !ctx.cluster_allowed(Operation::ClusterAction) {
        let resp = AddPartitionsToTxnResponse::default()
            .with_error_code(code::CLUSTER_AUTHORIZATION_FAILED);
        return encoded(Response::encode(&ctx.header, &resp));
    }
    let mut results = Vec::with_capacity(req.transactions.len());
    for t in req.transactions {
        let id = t.transactional_id.0.to_string();
        let partitions: Vec<(String, i32)> = t
            .topics
            .iter()
            .flat_map(|tp| {
                let name = tp.name.0.to_string();
                tp.partitions.iter().map(move |&p| (name.clone(), p))
            })
            .collect();
        let verdict = match super::txn::check_id(ctx, &id, Operation::Write) {
            Err(e) => Err(e),
            Ok(()) => {
                super::txn::admit(
                    ctx,
                    &id,
                    (t.producer_id.0, t.producer_epoch),
                    partitions.clone(),
                    Vec::new(),
                    !t.verify_only,
                )
                .await
            }
        };
        let codes = partitions.into_iter().map(|(topic, p)| {
            let error_code = match &verdict {
                Err(e) => e.code(),
                Ok((missing, _)) if missing.iter().any(|(t, q)| *t == topic && *q == p) => {
                    code::TRANSACTION_ABORTABLE
                }
                Ok(_) => code::NONE,
            };
            (topic, p, error_code)
        });
        results.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(t.transactional_id)
                .with_topic_results(by_topic(codes)),
        );
    }
    let resp = AddPartitionsToTxnResponse::default().with_results_by_transaction(results);
    encoded(Response::encode(&ctx.header, &resp))
}
