//! DescribeProducers (key 61, v0): the idempotent and transactional producers a partition
//! keeps state for, with their epoch, last sequence and open transaction's first offset, as
//! `kafka-transactions describe-producers` shows them. READ on the topic.

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::{encoded, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;
use crate::shard::ops::ProducersItem;

/// Handles a DescribeProducers request.
pub async fn handle(
    ctx: &RequestContext,
    req: DescribeProducersRequest,
) -> Result<Response, ConnectionError> {
    let snapshot = ctx.shard.cluster.snapshot();
    // (topic index, partition, early error) in request order.
    let mut slots: Vec<(usize, i32, Option<KelpError>)> = Vec::new();
    let mut items = Vec::new();
    for (ti, t) in req.topics.iter().enumerate() {
        let name = t.name.0.to_string();
        let denied = !ctx.allowed(Operation::Read, ResourceType::Topic, &name);
        let parts = snapshot.topic(&name).map(|m| m.partitions);
        for &p in &t.partition_indexes {
            let early = if denied {
                Some(KelpError::TopicAuthorizationFailed)
            } else if !parts.is_some_and(|n| (0..n).contains(&p)) {
                Some(KelpError::UnknownTopicOrPartition)
            } else {
                items.push(ProducersItem {
                    topic: name.clone(),
                    partition: p,
                });
                None
            };
            slots.push((ti, p, early));
        }
    }
    let mut results = ctx.shard.scatter(items).await.into_iter();
    let mut topics: Vec<TopicResponse> = req
        .topics
        .iter()
        .map(|t| TopicResponse::default().with_name(t.name.clone()))
        .collect();
    for (ti, p, early) in slots {
        let outcome = match early {
            Some(e) => Err(e),
            None => results
                .next()
                .unwrap_or(Err(KelpError::CoordinatorNotAvailable)),
        };
        let mut pr = PartitionResponse::default().with_partition_index(p);
        match outcome {
            Ok(producers) => {
                pr.error_code = code::NONE;
                pr.active_producers = producers
                    .into_iter()
                    .map(|(pid, epoch, seq, txn_start)| {
                        ProducerState::default()
                            .with_producer_id(ProducerId(pid))
                            .with_producer_epoch(i32::from(epoch))
                            .with_last_sequence(seq)
                            .with_last_timestamp(-1)
                            .with_coordinator_epoch(-1)
                            .with_current_txn_start_offset(txn_start)
                    })
                    .collect();
            }
            Err(e) => {
                pr.error_code = e.code();
                pr.error_message = e.message().map(super::sb);
            }
        }
        topics[ti].partitions.push(pr);
    }
    let resp = DescribeProducersResponse::default().with_topics(topics);
    encoded(Response::encode(&ctx.header, &resp))
}
