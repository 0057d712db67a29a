//! OffsetForLeaderEpoch (key 23, v2-v4): where a leader epoch ended, which consumers ask
//! after a leader change to check whether their position is still on the log (KIP-320).
//!
//! The epochs of a partition are its leaders' tenures (`cluster::ownership`): one epoch 0
//! from offset 0 on a lone node; over SeaweedMQ one per lease taken, each starting at the
//! high water mark of its take-over. SeaweedMQ keeps one log whoever leads it, so no tenure
//! ever truncates another: the answer only tells the client the log goes on.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::{encoded, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::partition::timestamp;
use crate::protocol::Response;
use crate::shard::ops::OffsetsItem;

/// What to answer for one partition before its log end is known.
enum Plan {
    /// This answer, as it is.
    Done(Result<(i32, i64), KelpError>),
    /// The requested epoch is the current one: it ends at the log end offset.
    LogEnd(i32),
}

/// (epoch, end offset) for `requested` among `history` (epoch, first offset), oldest
/// first, Kafka's way: the current epoch ends at the log end; an older one where the next
/// newer one starts, named by the newest epoch at or below it; unknown ones answer -1, -1.
fn end_of(history: &[(i32, i64)], requested: i32) -> Plan {
    let undefined = Plan::Done(Ok((-1, -1)));
    let Some(&(current, _)) = history.last() else {
        return undefined;
    };
    if requested < 0 {
        return undefined;
    }
    if requested == current {
        return Plan::LogEnd(current);
    }
    let Some(&(_, next_start)) = history.iter().find(|&&(e, _)| e > requested) else {
        return undefined;
    };
    let floor = history
        .iter()
        .rev()
        .find(|&&(e, _)| e <= requested)
        .map_or(requested, |&(e, _)| e);
    Plan::Done(Ok((floor, next_start)))
}

/// Plans one partition: checks the topic, leadership and the client's current epoch.
fn plan(ctx: &RequestContext, topic: &str, partition: i32, current: i32, requested: i32) -> Plan {
    if !ctx.allowed(Operation::Describe, ResourceType::Topic, topic) {
        return Plan::Done(Err(KelpError::TopicAuthorizationFailed));
    }
    let cluster = &ctx.shard.cluster;
    let known = cluster
        .topic(topic)
        .is_some_and(|m| partition >= 0 && partition < m.partitions);
    if !known {
        return Plan::Done(Err(KelpError::UnknownTopicOrPartition));
    }
    let history = match cluster.ownership.history(topic, partition) {
        Ok(h) => h,
        Err(e) => return Plan::Done(Err(e)),
    };
    let epoch = history.last().map_or(0, |&(e, _)| e);
    // -1: the client does not know the current epoch and skips the check.
    if current >= 0 && current < epoch {
        return Plan::Done(Err(KelpError::FencedLeaderEpoch {
            got: current,
            current: epoch,
        }));
    }
    if current > epoch {
        return Plan::Done(Err(KelpError::UnknownLeaderEpoch {
            got: current,
            current: epoch,
        }));
    }
    end_of(&history, requested)
}

/// Handles an OffsetForLeaderEpoch request.
pub async fn handle(
    ctx: &RequestContext,
    req: OffsetForLeaderEpochRequest,
) -> Result<Response, ConnectionError> {
    let mut plans = Vec::new();
    let mut items = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            let plan = plan(
                ctx,
                t.topic.0.as_str(),
                p.partition,
                p.current_leader_epoch,
                p.leader_epoch,
            );
            if let Plan::LogEnd(_) = plan {
                items.push(OffsetsItem {
                    topic: t.topic.0.to_string(),
                    partition: p.partition,
                    timestamp: timestamp::LATEST,
                    committed: false,
                });
            }
            plans.push(plan);
        }
    }
    let mut ends = ctx.shard.scatter(items).await.into_iter();
    let mut plans = plans.into_iter();
    let mut resp = OffsetForLeaderEpochResponse::default();
    for t in req.topics {
        let mut tr = OffsetForLeaderTopicResult::default().with_topic(t.topic);
        for p in t.partitions {
            let answer = match plans.next() {
                Some(Plan::Done(r)) => r,
                Some(Plan::LogEnd(epoch)) => match ends.next() {
                    Some(r) => r.map(|(_ts, end)| (epoch, end)),
                    None => Err(KelpError::ShardUnavailable(usize::MAX)),
                },
                None => Err(KelpError::ShardUnavailable(usize::MAX)),
            };
            let mut e = EpochEndOffset::default();
            e.partition = p.partition;
            match answer {
                Ok((epoch, end)) => {
                    e.error_code = code::NONE;
                    e.leader_epoch = epoch;
                    e.end_offset = end;
                }
                Err(err) => {
                    e.error_code = err.code();
                    e.leader_epoch = -1;
                    e.end_offset = -1;
                }
            }
            tr.partitions.push(e);
        }
        resp.topics.push(tr);
    }
    encoded(Response::encode(&ctx.header, &resp))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(p: Plan) -> Option<(i32, i64)> {
        match p {
            Plan::Done(Ok(r)) => Some(r),
            _ => None,
        }
    }

    #[test]
    fn epochs_end_where_the_next_begins() {
        let h = [(0, 0), (1, 100), (4, 250)];
        assert!(matches!(end_of(&h, 4), Plan::LogEnd(4)));
        assert_eq!(done(end_of(&h, 0)), Some((0, 100)));
        assert_eq!(done(end_of(&h, 1)), Some((1, 250)));
        // Epochs 2 and 3 never led: the newest at or below them is 1, which ended at 250.
        assert_eq!(done(end_of(&h, 3)), Some((1, 250)));
        assert_eq!(done(end_of(&h, 5)), Some((-1, -1)));
        assert_eq!(done(end_of(&h, -1)), Some((-1, -1)));
        // Older than every tenure kept: the first kept one's start.
        assert_eq!(done(end_of(&[(3, 40), (5, 90)], 1)), Some((1, 40)));
    }
}
