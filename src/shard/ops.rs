//! Partition operations a shard runs for itself or for a peer, and the messages that carry
//! them across cores.
//!
//! Each operation is an [`Op`]: a batch of per-partition items that [`Shard::scatter`] groups by
//! owning shard, runs locally or ships over the channel mesh, and answers in request order.

use std::time::Instant;

use futures::channel::oneshot;
use futures::future::LocalBoxFuture;

use super::Shard;
use crate::error::KelpError;
use crate::group::{GroupReply, GroupRequest};
use crate::partition::ReadOut;
use crate::record::ValidatedBatches;

/// Append validated batches to a partition.
pub struct ProduceItem {
    /// Topic (shared by a request's partitions of one topic).
    pub topic: std::sync::Arc<str>,
    /// Partition.
    pub partition: i32,
    /// The batches, validated where the request arrived.
    pub batches: ValidatedBatches,
    /// The request's acks: -1 waits for durability (per the fsync policy).
    pub acks: i16,
    /// The request's timeout: the longest a forward to SeaweedMQ may take.
    pub timeout: std::time::Duration,
    /// The topic's `message.timestamp.type` is LogAppendTime: the owner stamps the batches
    /// with its clock as it appends them.
    pub log_append_time: bool,
}

/// What one append answers (Produce's partition response).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Offset of the first record.
    pub base: i64,
    /// The partition's log start offset.
    pub log_start: i64,
    /// The time the batches were stamped with (LogAppendTime topics), else -1.
    pub append_time: i64,
}

/// Result of one append.
pub type ProduceOut = Result<Appended, KelpError>;

/// Read batches from a partition.
pub struct ReadItem {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Fetch offset.
    pub offset: i64,
    /// The partition's byte limit (first-batch rule applies).
    pub max_bytes: usize,
    /// The request's response limit, the same for every item of a request: the items a
    /// shard runs for one request read at most this much in all (plus the first batch),
    /// so a Fetch of many partitions below the cache never holds more than it can answer.
    pub response_max: usize,
    /// read_committed (isolation level 1): stop at the last stable offset.
    pub committed: bool,
}

/// What the reads below the cache of one request on one shard may still allocate: each
/// takes its share (in request order) before reading and gives back what it did not use.
/// Reads from the cache are slices of cached batches and take nothing.
#[derive(Debug)]
pub struct ColdBudget(std::cell::Cell<usize>);

impl ColdBudget {
    /// A budget of `bytes`.
    pub fn new(bytes: usize) -> Self {
        ColdBudget(std::cell::Cell::new(bytes))
    }

    /// Takes up to `want` bytes; 0 means the response is full.
    pub fn take(&self, want: usize) -> usize {
        let got = want.min(self.0.get());
        self.0.set(self.0.get() - got);
        got
    }

    /// Gives back the part of a share that was not read.
    pub fn give_back(&self, bytes: usize) {
        self.0.set(self.0.get() + bytes);
    }
}

/// Result of one read.
pub type ReadResult = Result<ReadOut, KelpError>;

/// Look an offset up by timestamp.
pub struct OffsetsItem {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Timestamp to look up, or a special one ([`crate::partition::timestamp`]).
    pub timestamp: i64,
    /// read_committed (isolation level 1): the latest offset is the last stable offset.
    pub committed: bool,
}

/// (timestamp, offset) found.
pub type OffsetsOut = Result<(i64, i64), KelpError>;

/// DescribeProducers for one partition.
#[derive(Debug)]
pub struct ProducersItem {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
}

/// (producer id, epoch, last sequence, open transaction's first offset or -1) per producer.
pub type ProducersOut = Result<Vec<(i64, i16, i32, i64)>, KelpError>;

/// Move a partition's log start offset forward (DeleteRecords); -1 means the high watermark.
pub struct DeleteRecordsItem {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The new log start offset (-1: the high watermark).
    pub offset: i64,
}

/// The new log start offset.
pub type DeleteRecordsOut = Result<i64, KelpError>;

/// Wait until any of these partitions has data past the offset, or the deadline passes.
pub struct WaitItem {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The fetch offset: data past it ends the wait.
    pub offset: i64,
}

/// A message between shards.
pub enum ShardMsg {
    /// Appends, answered per item.
    Produce(Vec<ProduceItem>, oneshot::Sender<Vec<ProduceOut>>),
    /// DeleteRecords, answered per item.
    DeleteRecords(
        Vec<DeleteRecordsItem>,
        oneshot::Sender<Vec<DeleteRecordsOut>>,
    ),
    /// Reads, answered per item.
    Read(Vec<ReadItem>, oneshot::Sender<Vec<ReadResult>>),
    /// ListOffsets lookups, answered per item.
    ListOffsets(Vec<OffsetsItem>, oneshot::Sender<Vec<OffsetsOut>>),
    /// A long-poll: answered when data arrives or at the deadline.
    Wait(Vec<WaitItem>, Instant, oneshot::Sender<()>),
    /// A topic was deleted: drop its partition state and wake its waiters.
    DropTopic(String),
    /// A request for a group this shard coordinates (or, for `List`, every shard).
    Group(GroupRequest, oneshot::Sender<GroupReply>),
    /// DescribeProducers lookups, answered per item.
    Producers(Vec<ProducersItem>, oneshot::Sender<Vec<ProducersOut>>),
    /// A request for a transactional id this shard coordinates.
    Txn(
        super::txn::TxnRequest,
        oneshot::Sender<super::txn::TxnReply>,
    ),
}

/// A per-partition operation that can run on its owning shard.
pub trait Op: Sized + Send + 'static {
    /// Result for one item.
    type Out: Send + 'static;
    /// The partition the item addresses.
    fn key(&self) -> (&str, i32);
    /// Wraps a group of items for a peer shard.
    fn into_msg(items: Vec<Self>, reply: oneshot::Sender<Vec<Self::Out>>) -> ShardMsg;
    /// Runs on the owning shard.
    fn run(shard: &Shard, items: Vec<Self>) -> LocalBoxFuture<'_, Vec<Self::Out>>;
    /// The result when the owner could not be reached.
    fn failed(e: KelpError) -> Self::Out;
}

impl Op for ProduceItem {
    type Out = ProduceOut;
    fn key(&self) -> (&str, i32) {
        (&self.topic, self.partition)
    }
    fn into_msg(items: Vec<Self>, reply: oneshot::Sender<Vec<Self::Out>>) -> ShardMsg {
        ShardMsg::Produce(items, reply)
    }
    fn run(shard: &Shard, items: Vec<Self>) -> LocalBoxFuture<'_, Vec<Self::Out>> {
        // Partitions are written concurrently; their syncs overlap.
        Box::pin(futures::future::join_all(
            items
                .into_iter()
                .map(|it| async move { shard.append(it).await }),
        ))
    }
    fn failed(e: KelpError) -> Self::Out {
        Err(e)
    }
}

impl Op for ReadItem {
    type Out = ReadResult;
    fn key(&self) -> (&str, i32) {
        (&self.topic, self.partition)
    }
    fn into_msg(items: Vec<Self>, reply: oneshot::Sender<Vec<Self::Out>>) -> ShardMsg {
        ShardMsg::Read(items, reply)
    }
    fn run(shard: &Shard, items: Vec<Self>) -> LocalBoxFuture<'_, Vec<Self::Out>> {
        let left = std::rc::Rc::new(ColdBudget::new(
            items.first().map_or(0, |it| it.response_max),
        ));
        Box::pin(futures::future::join_all(
            items
                .into_iter()
                .map(move |it| shard.read(it, left.clone())),
        ))
    }
    fn failed(e: KelpError) -> Self::Out {
        Err(e)
    }
}

impl Op for OffsetsItem {
    type Out = OffsetsOut;
    fn key(&self) -> (&str, i32) {
        (&self.topic, self.partition)
    }
    fn into_msg(items: Vec<Self>, reply: oneshot::Sender<Vec<Self::Out>>) -> ShardMsg {
        ShardMsg::ListOffsets(items, reply)
    }
    fn run(shard: &Shard, items: Vec<Self>) -> LocalBoxFuture<'_, Vec<Self::Out>> {
        Box::pin(futures::future::join_all(
            items.into_iter().map(|it| shard.list_offset(it)),
        ))
    }
    fn failed(e: KelpError) -> Self::Out {
        Err(e)
    }
}

impl Op for ProducersItem {
    type Out = ProducersOut;
    fn key(&self) -> (&str, i32) {
        (&self.topic, self.partition)
    }
    fn into_msg(items: Vec<Self>, reply: oneshot::Sender<Vec<Self::Out>>) -> ShardMsg {
        ShardMsg::Producers(items, reply)
    }
    fn run(shard: &Shard, items: Vec<Self>) -> LocalBoxFuture<'_, Vec<Self::Out>> {
        Box::pin(futures::future::join_all(items.into_iter().map(
            |it| async move {
                shard
                    .lead(
                        &it.topic,
                        it.partition,
                        std::time::Instant::now() + std::time::Duration::from_secs(5),
                    )
                    .await?;
                shard.with_partition(&it.topic, it.partition, |p| p.active_producers())
            },
        )))
    }
    fn failed(e: KelpError) -> Self::Out {
        Err(e)
    }
}

impl Op for DeleteRecordsItem {
    type Out = DeleteRecordsOut;
    fn key(&self) -> (&str, i32) {
        (&self.topic, self.partition)
    }
    fn into_msg(items: Vec<Self>, reply: oneshot::Sender<Vec<Self::Out>>) -> ShardMsg {
        ShardMsg::DeleteRecords(items, reply)
    }
    fn run(shard: &Shard, items: Vec<Self>) -> LocalBoxFuture<'_, Vec<Self::Out>> {
        Box::pin(futures::future::join_all(items.into_iter().map(
            |it| async move {
                shard
                    .delete_records(&it.topic, it.partition, it.offset)
                    .await
            },
        )))
    }
    fn failed(e: KelpError) -> Self::Out {
        Err(e)
    }
}
