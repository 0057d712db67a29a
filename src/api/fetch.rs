//! Fetch (key 1, v4-v16): whole cached batches, response and partition byte limits with the
//! first-batch rule, long-poll woken by appends. Fetch sessions are not kept: session id 0.

use std::time::{Duration, Instant};

use kafka_protocol::messages::FetchRequest;

use super::RequestContext;
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::fetch_response::{self, PartitionOut, TopicOut};
use crate::protocol::Response;
use crate::shard::ops::{ReadItem, WaitItem};

/// Longest long-poll honoured, whatever the client asks.
const MAX_WAIT_CAP: Duration = Duration::from_secs(30);

/// A read of a Fetch's partitions slower than this is logged: reads are bounded by their
/// syncs' waits (half a second each), so this means one of them did not end as it should.
const SLOW_READ: Duration = Duration::from_secs(2);

/// Handles a Fetch request.
pub async fn handle(ctx: &RequestContext, req: FetchRequest) -> Result<Response, ConnectionError> {
    let v = ctx.header.api_version;
    let snapshot = ctx.shard.cluster.snapshot();

    // Resolve topics (by id from v13) and lay out the response skeleton.
    let mut topics: Vec<TopicOut> = Vec::with_capacity(req.topics.len());
    let mut wanted: Vec<(usize, usize, i64, usize)> = Vec::new(); // topic idx, part idx, offset, max
    for t in &req.topics {
        let meta = if v >= 13 {
            snapshot.by_id.get(&t.topic_id).cloned()
        } else {
            snapshot.topic(t.topic.0.as_str()).cloned()
        };
        let missing = if v >= 13 {
            code::UNKNOWN_TOPIC_ID
        } else {
            code::UNKNOWN_TOPIC_OR_PARTITION
        };
        let name = meta
            .as_ref()
            .map_or_else(|| t.topic.0.to_string(), |m| m.name.clone());
        // Kafka answers a topic the principal may not read as not authorized, known or not.
        let denied = !ctx.allowed(Operation::Read, ResourceType::Topic, &name);
        let mut out = TopicOut {
            name,
            topic_id: *t.topic_id.as_bytes(),
            partitions: Vec::with_capacity(t.partitions.len()),
        };
        for p in &t.partitions {
            let mut po = PartitionOut {
                index: p.partition,
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                ..Default::default()
            };
            match &meta {
                _ if denied => po.error_code = code::TOPIC_AUTHORIZATION_FAILED,
                None => po.error_code = missing,
                Some(_) => wanted.push((
                    topics.len(),
                    out.partitions.len(),
                    p.fetch_offset,
                    p.partition_max_bytes.max(0) as usize,
                )),
            }
            out.partitions.push(po);
        }
        topics.push(out);
    }

    let max_wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP);
    let deadline = Instant::now() + max_wait;
    let min_bytes = req.min_bytes.max(0) as usize;
    // Kafka caps the response at the broker's fetch.max.bytes whatever the client asks.
    let limit = ctx.shard.config.fetch_max_bytes;
    let max_bytes = if req.max_bytes <= 0 {
        limit
    } else {
        (req.max_bytes as usize).min(limit)
    };
    // read_committed (isolation level 1, v4+): up to the last stable offset, with the
    // aborted transactions among the records.
    let committed = req.isolation_level == 1;
    loop {
        let items = wanted
            .iter()
            .map(|&(ti, pi, offset, max)| ReadItem {
                topic: topics[ti].name.clone(),
                partition: topics[ti].partitions[pi].index,
                offset,
                max_bytes: max.min(max_bytes),
                response_max: max_bytes,
                committed,
            })
            .collect();
        let read_started = Instant::now();
        let results = ctx.shard.scatter(items).await;
        if read_started.elapsed() > SLOW_READ {
            let parts: Vec<String> = wanted
                .iter()
                .map(|&(ti, pi, offset, _)| {
                    format!(
                        "{}-{}@{offset}",
                        topics[ti].name, topics[ti].partitions[pi].index
                    )
                })
                .collect();
            tracing::warn!(elapsed = ?read_started.elapsed(), corr = ctx.header.correlation_id,
                partitions = %parts.join(","), "slow fetch read");
        }
        let (total, any_error) = fill(&mut topics, &wanted, results, max_bytes, committed);
        if total >= min_bytes || any_error || Instant::now() >= deadline || wanted.is_empty() {
            break;
        }
        let waits = wanted
            .iter()
            .map(|&(ti, pi, offset, _)| {
                let po = &topics[ti].partitions[pi];
                WaitItem {
                    topic: topics[ti].name.clone(),
                    partition: po.index,
                    // Wait for data past what was just read (too little for min_bytes):
                    // from the fetch offset the wait would end at once, and the loop would
                    // re-read without yielding, holding the core until the deadline.
                    offset: offset.max(po.high_watermark),
                }
            })
            .collect();
        ctx.shard.wait_any(waits, deadline).await;
    }
    Ok(fetch_response::encode(&ctx.header, code::NONE, 0, &topics))
}

/// Writes read results into the response, enforcing the response byte limit: batches are kept
/// in request order while they fit, but the first batch of the response is always kept.
/// Returns the record bytes included and whether any partition reported an error.
fn fill(
    topics: &mut [TopicOut],
    wanted: &[(usize, usize, i64, usize)],
    results: Vec<Result<crate::partition::ReadOut, KelpError>>,
    max_bytes: usize,
    committed: bool,
) -> (usize, bool) {
    let mut total = 0usize;
    let mut any_error = false;
    for (&(ti, pi, _, _), r) in wanted.iter().zip(results) {
        let po = &mut topics[ti].partitions[pi];
        po.records.clear();
        match r {
            Ok(read) => {
                po.error_code = code::NONE;
                po.high_watermark = read.high_watermark;
                po.last_stable_offset = read.last_stable_offset;
                po.log_start_offset = read.log_start_offset;
                let mut read_to = -1;
                for b in read.batches {
                    if total > 0 && total + b.len() > max_bytes {
                        break;
                    }
                    total += b.len();
                    read_to = crate::record::BatchHeader::parse(&b)
                        .map_or(read_to, |h| h.last_offset() + 1);
                    po.records.push(b);
                }
                po.aborted = committed.then(|| {
                    // Only those among the batches kept within the response limit.
                    read.aborted
                        .iter()
                        .filter(|a| a.first_offset < read_to)
                        .map(|a| (a.producer_id, a.first_offset))
                        .collect()
                });
            }
            Err(e) => {
                any_error = true;
                po.error_code = e.code();
                if let KelpError::OffsetOutOfRange { start, end, .. } = e {
                    po.high_watermark = end;
                    po.last_stable_offset = end;
                    po.log_start_offset = start;
                }
            }
        }
    }
    (total, any_error)
}
