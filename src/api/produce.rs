//! Produce (key 0, v3-v12): validate batches where the request arrived, append them on the
//! owning shards, answer by acks. Once the appends are queued the connection may go on to
//! its next request, so pipelined produces share one fdatasync (group commit). Transactional
//! batches are admitted by their transaction's coordinator first (KIP-890: v12 adds the
//! partition, older versions must have added it).

use kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};

use super::{encoded, topic_name, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::produce_request::ProduceRequest;
use crate::protocol::Response;
use crate::record::ValidatedBatches;
use crate::shard::ops::ProduceItem;

/// Handles a Produce request; acks=0 requests get no response.
pub async fn handle(
    ctx: &RequestContext,
    req: ProduceRequest,
) -> Result<Option<Response>, ConnectionError> {
    let txn_id = req
        .transactional_id
        .as_ref()
        .map(|t| t.to_string())
        .filter(|t| !t.is_empty());
    let request_error = if !matches!(req.acks, -1..=1) {
        Some(KelpError::InvalidRequiredAcks(req.acks))
    } else {
        // Kafka: a transactional produce needs WRITE on its transactional id.
        txn_id
            .as_deref()
            .and_then(|id| super::txn::check_id(ctx, id, Operation::Write).err())
    };

    // A client's timeout of 0 or less still leaves a moment for the storage engine.
    let timeout = std::time::Duration::from_millis(req.timeout_ms.max(100) as u64);
    // Per partition: either an early error or an item for its owner, in request order.
    // Sized up front: a request's allocations are few and do not grow with its partitions.
    let count: usize = req.topics.iter().map(|t| t.partitions.len()).sum();
    let mut slots: Vec<(usize, i32, Result<usize, KelpError>)> = Vec::with_capacity(count);
    let mut items = Vec::with_capacity(count);
    let mut names = Vec::with_capacity(req.topics.len());
    for (ti, topic) in req.topics.into_iter().enumerate() {
        let parts = topic.partitions.len();
        let shared: std::sync::Arc<str> = topic.name.as_str().into();
        let meta = match &request_error {
            Some(e) => Err(e.clone()),
            None if !ctx.allowed(Operation::Write, ResourceType::Topic, &topic.name) => {
                Err(KelpError::TopicAuthorizationFailed)
            }
            None => match ctx
                .shard
                .topic_or_create(&topic.name, ctx.may_create_topic(&topic.name))
                .await
            {
                Ok(Some(m)) => Ok(m),
                Ok(None) => Err(KelpError::UnknownTopicOrPartition),
                Err(e) => Err(e),
            },
        };
        for p in topic.partitions {
            let slot = meta.clone().and_then(|m| {
                if p.index < 0 || p.index >= m.partitions {
                    return Err(KelpError::UnknownTopicOrPartition);
                }
                let records = p.records.ok_or(KelpError::InvalidRecord("null records"))?;
                let batches = ValidatedBatches::validate(records, m.max_message_bytes())?;
                if m.compacted() {
                    batches.require_keys()?;
                }
                if txn_id.is_none() && batches.headers().any(|h| h.is_transactional()) {
                    // Kafka: transactional records need the request's transactional id
                    // (and WRITE on it).
                    return Err(KelpError::TransactionalIdAuthorizationFailed);
                }
                items.push(ProduceItem {
                    topic: shared.clone(),
                    partition: p.index,
                    batches,
                    acks: req.acks,
                    timeout,
                    log_append_time: m.log_append_time(),
                });
                Ok(items.len() - 1)
            });
            if let Err(e) = &slot {
                tracing::debug!(topic = %topic.name, partition = p.index, error = %e, "produce rejected");
            }
            slots.push((ti, p.index, slot));
        }
        names.push((topic.name, parts));
    }
    if let Some(id) = txn_id.as_deref() {
        admit_transactional(ctx, id, &mut slots, &mut items).await;
    }

    // The connection may start its next request once the appends are queued, when the
    // storage engine keeps their order from there on.
    let pipelined = ctx.shard.engine.pipelines_produce();
    let mut results = ctx
        .shard
        .scatter_ordered(items, || {
            if pipelined {
                ctx.started()
            }
        })
        .await
        .into_iter();
    if req.acks == 0 {
        return Ok(None);
    }
    let mut topics: Vec<TopicProduceResponse> = names
        .into_iter()
        .map(|(n, parts)| {
            TopicProduceResponse::default()
                .with_name(topic_name(n))
                .with_partition_responses(Vec::with_capacity(parts))
        })
        .collect();
    for (ti, index, slot) in slots {
        let mut pr = PartitionProduceResponse::default();
        pr.index = index;
        pr.log_append_time_ms = -1;
        let outcome = match slot {
            Ok(_) => results
                .next()
                .unwrap_or(Err(KelpError::ShardUnavailable(usize::MAX))),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(a) => {
                pr.error_code = code::NONE;
                pr.base_offset = a.base;
                pr.log_start_offset = a.log_start;
                pr.log_append_time_ms = a.append_time;
            }
            Err(e) => {
                pr.error_code = super::txn::produce_code(&e, ctx.header.api_version);
                pr.base_offset = -1;
                pr.log_start_offset = -1;
                pr.error_message = Some(super::sb(e.to_string()));
            }
        }
        topics[ti].partition_responses.push(pr);
    }
    let resp = ProduceResponse::default().with_responses(topics);
    encoded(Response::encode(&ctx.header, &resp)).map(Some)
}

/// The producer id and epoch of an item's transactional batches; Err when its batches do not
/// all belong to one producer's transaction.
fn transactional_producer(item: &ProduceItem) -> Option<Result<(i64, i16), ()>> {
    let mut headers = item.batches.headers();
    let first = headers.next()?;
    let producer = (first.producer_id, first.producer_epoch);
    let same = |h: &crate::record::batch::BatchHeader| {
        h.is_transactional() == first.is_transactional()
            && (h.producer_id, h.producer_epoch) == producer
    };
    if !headers.all(same) {
        return Some(Err(()));
    }
    first.is_transactional().then_some(Ok(producer))
}

/// Asks the coordinator of `id` to admit the request's transactional writes; those it
/// refuses leave `items` and answer their error in `slots`.
async fn admit_transactional(
    ctx: &RequestContext,
    id: &str,
    slots: &mut [(usize, i32, Result<usize, KelpError>)],
    items: &mut Vec<ProduceItem>,
) {
    let producers: Vec<Option<Result<(i64, i16), ()>>> =
        items.iter().map(transactional_producer).collect();
    let Some(producer) = producers.iter().flatten().find_map(|p| p.ok()) else {
        if producers.iter().all(Option::is_none) {
            return;
        }
        let verdicts = producers
            .iter()
            .map(|p| p.map(|_| KelpError::InvalidRecord("mixed producers in one partition")))
            .collect();
        return drop_refused(slots, items, verdicts);
    };
    let wanted: Vec<(String, i32)> = items
        .iter()
        .zip(&producers)
        .filter(|(_, p)| **p == Some(Ok(producer)))
        .map(|(it, _)| (it.topic.to_string(), it.partition))
        .collect();
    let implicit = ctx.header.api_version >= 12;
    let verdict = super::txn::admit(ctx, id, producer, wanted, Vec::new(), implicit).await;
    if let Err(e) = &verdict {
        tracing::debug!(transactional_id = %id, error = %e, "transactional produce refused");
    }
    let verdicts = (0..items.len())
        .map(|i| match producers[i] {
            None => None,
            Some(Ok(p)) if p != producer => Some(KelpError::InvalidProducerIdMapping),
            Some(Err(())) => Some(KelpError::InvalidRecord("mixed producers in one partition")),
            Some(Ok(_)) => match &verdict {
                Err(e) => Some(e.clone()),
                Ok((missing, _))
                    if missing
                        .iter()
                        .any(|(t, p)| **t == *items[i].topic && *p == items[i].partition) =>
                {
                    Some(KelpError::TransactionAbortable)
                }
                Ok(_) => None,
            },
        })
        .collect();
    drop_refused(slots, items, verdicts);
}

/// Takes out of `items` those whose verdict is an error, and sets it on their slots.
fn drop_refused(
    slots: &mut [(usize, i32, Result<usize, KelpError>)],
    items: &mut Vec<ProduceItem>,
    verdicts: Vec<Option<KelpError>>,
) {
    if verdicts.iter().all(Option::is_none) {
        return;
    }
    let mut verdicts = verdicts.into_iter();
    let mut kept = Vec::with_capacity(items.len());
    let mut taken = std::mem::take(items).into_iter();
    for slot in slots.iter_mut().filter(|s| s.2.is_ok()) {
        let (Some(verdict), Some(item)) = (verdicts.next(), taken.next()) else {
            break;
        };
        match verdict {
            Some(e) => slot.2 = Err(e),
            None => {
                slot.2 = Ok(kept.len());
                kept.push(item);
            }
        }
    }
    *items = kept;
}
