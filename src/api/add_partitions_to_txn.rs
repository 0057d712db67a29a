//! AddPartitionsToTxn (key 24, v0-v3): a transactional producer names the partitions it is
//! about to write, so the coordinator ([`crate::shard::txn`]) writes markers to them when the
//! transaction ends. Every partition is checked first (WRITE on its topic, it exists); if one
//! fails, the others answer OPERATION_NOT_ATTEMPTED, as Kafka.

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};

use super::{encoded, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;
use crate::shard::txn::TxnRequest;

/// Kafka's code for partitions left alone because another one failed.
const OPERATION_NOT_ATTEMPTED: i16 = 55;

/// Handles an AddPartitionsToTxn request.
pub async fn handle(
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> Result<Response, ConnectionError> {
    let v = ctx.header.api_version;
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
            })
            .await
            .map(|_| ()),
    };
    let any_bad = rows.iter().any(|r| r.2.is_some());
    let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (topic, p, own) in rows {
        let error_code = match (&outcome, own) {
            (Err(e), _) => super::txn::code_for(e, v, 2),
            (Ok(()), Some(e)) => e.code(),
            (Ok(()), None) if any_bad => OPERATION_NOT_ATTEMPTED,
            (Ok(()), None) => code::NONE,
        };
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
    let resp = AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics);
    encoded(Response::encode(&ctx.header, &resp))
}
