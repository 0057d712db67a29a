//! One partition's publisher: the single long-lived `PublishMessage` stream Kelp keeps to
//! the partition's leader, with pipelined data messages and FIFO acks (SeaweedMQ answers each
//! message in order with its assigned offset).
//!
//! Kafka semantics on failure: a record is acknowledged to the shard only after SeaweedMQ
//! acknowledged it, and a record sent once is never sent again unless SeaweedMQ provably
//! does not have it. When a stream breaks with messages in flight, the publisher reconnects
//! (route looked up again, backoff) and asks the leader's high water mark: the in-flight
//! messages below it were stored (they are acknowledged with those offsets), the rest are
//! sent again. This relies on Kelp being the partition's only publisher, the design's rule.
//! Every stream is opened after asking the leader to load the partition (weed 4.48's brokers
//! other than the balancer do not load one on demand, and a new leader after a leader move is
//! often such a broker).
//! A publish not answered by its deadline gets a retriable error (REQUEST_TIMED_OUT); its
//! messages not yet sent are dropped, those in flight are still resolved as above.
//! Runs on the forwarder thread; calls [`super::client::Forwarder`] for routes and ranges.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kelp_storage_client::pb::messaging_pb::publish_message_request::{InitMessage, Message};
use kelp_storage_client::pb::messaging_pb::{
    DataMessage, PublishMessageRequest, PublishMessageResponse,
};
use kelp_storage_client::{broker, errors};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit};
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::client::{request, Forwarder};
use super::producer_journal::{Intent, Journal};
use super::records::{self, Clock, Pending};
use super::BatchOffsets;
use crate::error::KelpError;
use crate::record::batch::BatchHeader;

/// How long opening a stream (headers and the broker's empty "hello") may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// Deadline checks while a stream is up.
const TICK: Duration = Duration::from_millis(100);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// What a broker answers while it unloads a partition, and how long to give it.
const STOPPING: &str = "log buffer is stopping";
const STOPPING_BACKOFF: Duration = Duration::from_secs(1);
/// How long acknowledged records are kept for republishing. SeaweedMQ acknowledges from broker
/// memory and flushes to the filer every few seconds (5 s by default); a restarted broker has
/// lost what it had not flushed and hands those offsets out again.
const REPLAY_WINDOW: Duration = Duration::from_secs(15);
/// Most bytes of acknowledged records kept per partition for republishing.
const REPLAY_MAX_BYTES: usize = 64 << 20;
/// Job id of republished records (no shard waits for them).
const REPLAY: u64 = u64::MAX;

/// A publish request from a shard.
pub struct Job {
    batches: Vec<Bytes>,
    deadline: Instant,
    permit: OwnedSemaphorePermit,
    reply: oneshot::Sender<Vec<BatchOffsets>>,
}

impl Job {
    /// A publish of `batches`, answered on `reply`, holding `permit` of the in-flight budget.
    pub fn new(
        batches: Vec<Bytes>,
        deadline: Instant,
        permit: OwnedSemaphorePermit,
        reply: oneshot::Sender<Vec<BatchOffsets>>,
    ) -> Self {
        Job {
            batches,
            deadline,
            permit,
            reply,
        }
    }

    /// Answers every batch of the job with `err` without publishing it.
    pub fn refuse(self, err: KelpError) {
        let _ = self
            .reply
            .send(self.batches.iter().map(|_| Err(err.clone())).collect());
    }
}

/// Progress of one Kafka batch.
struct BatchState {
    /// Its entry in the producer journal.
    intent: Option<u64>,
    first: Option<i64>,
    last: i64,
    count: usize,
    resolved: usize,
    error: Option<KelpError>,
}

/// A job while its messages are queued or in flight.
struct JobState {
    /// None once answered (deadline passed): its messages are only being resolved.
    reply: Option<oneshot::Sender<Vec<BatchOffsets>>>,
    deadline: Instant,
    batches: Vec<BatchState>,
    unresolved: usize,
    _permit: OwnedSemaphorePermit,
}

impl JobState {
    fn results(&self) -> Vec<BatchOffsets> {
        self.batches
            .iter()
            .map(|b| match (&b.error, b.first) {
                (Some(e), _) => Err(e.clone()),
                (None, Some(first)) if b.resolved == b.count => Ok((first, b.last)),
                _ => Err(KelpError::RequestTimedOut),
            })
            .collect()
    }
}

/// A record before and after it got its SeaweedMQ timestamp (when first sent).
enum Payload {
    Pending(Pending),
    Stamped(DataMessage),
}

/// One record on its way to SeaweedMQ.
struct Msg {
    job: u64,
    batch: usize,
    data: Payload,
    /// For a republished record: the offset SeaweedMQ gave it the first time.
    replayed_at: Option<i64>,
}

/// Everything a publisher tracks across reconnects.
struct State {
    jobs: HashMap<u64, JobState>,
    next_job: u64,
    /// Decoded, not yet sent.
    queue: VecDeque<Msg>,
    /// Sent on the current stream, not yet acknowledged.
    inflight: VecDeque<Msg>,
    /// The offset SeaweedMQ will give the next stored message, as far as Kelp knows.
    expected: Option<i64>,
    /// Acknowledged records of the last [`REPLAY_WINDOW`]: (offset, record, when).
    acked: VecDeque<(i64, DataMessage, Instant)>,
    acked_bytes: usize,
    /// The partition's SeaweedMQ clock, once known (see [`learn_clock`]).
    clock: Option<Clock>,
    /// What idempotent batches were sent (or are about to be), for the partition's next
    /// leader; such a batch goes out once the journal naming it is on the filer.
    journal: Journal,
    /// A failed journal write is tried again from then on.
    journal_after: Option<Instant>,
}

impl Default for State {
    fn default() -> Self {
        State::new(Journal::new(&[], -1))
    }
}

fn msg_bytes(m: &DataMessage) -> usize {
    m.key.len() + m.value.len() + 16
}

impl State {
    fn new(journal: Journal) -> Self {
        State {
            jobs: HashMap::new(),
            next_job: 0,
            queue: VecDeque::new(),
            inflight: VecDeque::new(),
            expected: None,
            acked: VecDeque::new(),
            acked_bytes: 0,
            clock: None,
            journal,
            journal_after: None,
        }
    }

    fn is_idle(&self) -> bool {
        self.jobs.is_empty() && self.queue.is_empty() && self.inflight.is_empty()
    }

    fn add(&mut self, job: Job, topic: &str, k: i32) {
        let id = self.next_job;
        self.next_job += 1;
        let mut st = JobState {
            reply: Some(job.reply),
            deadline: job.deadline,
            batches: Vec::with_capacity(job.batches.len()),
            unresolved: 0,
            _permit: job.permit,
        };
        for (bi, b) in job.batches.iter().enumerate() {
            match records::decode_batch(b) {
                Ok(d) => {
                    let intent = BatchHeader::parse(b).ok().map(|h| {
                        self.journal.intend(Intent::new(
                            h.producer_id,
                            h.producer_epoch,
                            h.base_sequence,
                            &d,
                        ))
                    });
                    st.batches.push(BatchState {
                        intent,
                        first: None,
                        last: -1,
                        count: d.len(),
                        resolved: 0,
                        error: None,
                    });
                    st.unresolved += d.len();
                    self.queue.extend(d.into_iter().map(|p| Msg {
                        job: id,
                        batch: bi,
                        data: Payload::Pending(p),
                        replayed_at: None,
                    }));
                }
                Err(e) => {
                    tracing::warn!(topic, partition = k, error = %e, "could not decode a batch for SeaweedMQ");
                    st.batches.push(BatchState {
                        intent: None,
                        first: None,
                        last: -1,
                        count: 0,
                        resolved: 0,
                        error: Some(KelpError::CorruptMessage("undecodable records")),
                    });
                }
            }
        }
        self.jobs.insert(id, st);
        self.finish_if_done(id);
    }

    /// Answers and forgets a job whose messages are all resolved.
    fn finish_if_done(&mut self, id: u64) {
        if self.jobs.get(&id).is_some_and(|j| j.unresolved == 0) {
            if let Some(mut j) = self.jobs.remove(&id) {
                if let Some(reply) = j.reply.take() {
                    let _ = reply.send(j.results());
                }
            }
        }
    }

    fn resolve(&mut self, m: &Msg, outcome: Result<i64, KelpError>) {
        let Some(j) = self.jobs.get_mut(&m.job) else {
            return;
        };
        let b = &mut j.batches[m.batch];
        match outcome {
            Ok(offset) => {
                b.first.get_or_insert(offset);
                b.last = offset;
            }
            Err(e) => {
                b.error.get_or_insert(e);
            }
        }
        b.resolved += 1;
        j.unresolved -= 1;
        if b.resolved == b.count {
            if let Some(id) = b.intent {
                match (&b.error, b.first) {
                    (None, Some(first)) => self.journal.stored(id, first, b.last),
                    _ => self.journal.dropped(id),
                }
            }
        }
        self.finish_if_done(m.job);
    }

    /// SeaweedMQ acknowledged the oldest in-flight message.
    fn ack(&mut self, offset: i64) -> bool {
        let Some(m) = self.inflight.pop_front() else {
            return false;
        };
        self.accept(m, offset);
        true
    }

    /// A message SeaweedMQ stored at `offset`.
    fn accept(&mut self, m: Msg, offset: i64) {
        if let Some(exp) = self.expected {
            if offset < exp {
                // Offsets below the high water mark the leader reported: SeaweedMQ counts
                // again from an older state (a reloaded partition, a stale checkpoint).
                tracing::error!(
                    expected = exp,
                    assigned = offset,
                    "SeaweedMQ assigned an offset below its own high water mark"
                );
            } else if offset != exp {
                tracing::debug!(
                    expected = exp,
                    assigned = offset,
                    "SeaweedMQ offsets jumped: another publisher?"
                );
            }
        }
        self.expected = Some(offset + 1);
        if let Some(first) = m.replayed_at {
            if first != offset {
                tracing::error!(
                    first_offset = first,
                    now_at = offset,
                    "a record SeaweedMQ lost was republished at another offset"
                );
            }
        }
        self.resolve(&m, Ok(offset));
        if let Payload::Stamped(d) = m.data {
            self.remember(offset, d);
        }
    }

    /// Moves the next queued record in flight, stamping it if it was not sent before; returns
    /// the message to send.
    fn send_next(&mut self, now_ns: i64) -> Option<DataMessage> {
        let front = self.queue.front()?;
        if let Some(id) = self
            .jobs
            .get(&front.job)
            .and_then(|j| j.batches.get(front.batch))
            .and_then(|b| b.intent)
        {
            if !self.journal.sendable(id) {
                return None;
            }
        }
        let mut m = self.queue.pop_front()?;
        let data = match m.data {
            Payload::Stamped(d) => d,
            Payload::Pending(p) => self
                .clock
                // Not learned yet.
                .get_or_insert_with(|| Clock::unknown(now_ns))
                .stamp(&p, now_ns),
        };
        m.data = Payload::Stamped(data.clone());
        self.inflight.push_back(m);
        Some(data)
    }

    /// Keeps an acknowledged record for [`REPLAY_WINDOW`].
    fn remember(&mut self, offset: i64, data: DataMessage) {
        let now = Instant::now();
        self.acked_bytes += msg_bytes(&data);
        self.acked.push_back((offset, data, now));
        while self.acked.front().is_some_and(|(_, _, at)| {
            now.duration_since(*at) > REPLAY_WINDOW || self.acked_bytes > REPLAY_MAX_BYTES
        }) {
            if let Some((_, d, _)) = self.acked.pop_front() {
                self.acked_bytes -= msg_bytes(&d);
            }
        }
    }

    /// The leader's high water mark went back from `exp` to `from`: SeaweedMQ lost records it
    /// had acknowledged (a broker restart before its flush) and hands their offsets out again.
    /// Those still kept are published again, first, so they get the same offsets back.
    /// (A restarted broker whose offset checkpoint was ahead of its flush reports offsets it
    /// no longer holds; those holes cannot be told from data reliably and are not filled.)
    fn replay_lost(&mut self, from: i64, exp: i64, topic: &str, k: i32) {
        let lost: Vec<(i64, DataMessage)> = self
            .acked
            .iter()
            .filter(|(o, _, _)| *o >= from && *o < exp)
            .map(|(o, d, _)| (*o, d.clone()))
            .collect();
        while self.acked.back().is_some_and(|(o, _, _)| *o >= from) {
            if let Some((_, d, _)) = self.acked.pop_back() {
                self.acked_bytes -= msg_bytes(&d);
            }
        }
        let missing = exp - from;
        if (lost.len() as i64) < missing {
            tracing::error!(
                topic,
                partition = k,
                lost = missing,
                kept = lost.len(),
                "SeaweedMQ lost acknowledged records older than Kelp keeps: they are gone"
            );
        } else {
            tracing::warn!(
                topic,
                partition = k,
                records = missing,
                from,
                "SeaweedMQ lost acknowledged records (broker restart before its flush): republishing them"
            );
        }
        for (offset, data) in lost.into_iter().rev() {
            self.queue.push_front(Msg {
                job: REPLAY,
                batch: 0,
                data: Payload::Stamped(data),
                replayed_at: Some(offset),
            });
        }
    }

    /// After a reconnect: in-flight messages below the leader's high water mark were stored;
    /// the others go back to the front of the queue (or are dropped if their job is answered).
    fn reconcile(&mut self, hwm: i64, topic: &str, k: i32) {
        // A journal started without its tenure's offset: nothing was sent yet, so whatever
        // it holds pending starts at the mark.
        if self.expected.is_none() {
            self.journal.start_at(hwm);
        }
        let exp = self.expected.unwrap_or(hwm);
        let stored = (hwm - exp).clamp(0, self.inflight.len() as i64) as usize;
        if !self.inflight.is_empty() {
            tracing::info!(
                topic,
                partition = k,
                in_flight = self.inflight.len(),
                stored,
                "reconciled in-flight records after a broken publish stream"
            );
        }
        for i in 0..stored {
            if let Some(m) = self.inflight.pop_front() {
                self.accept(m, exp + i as i64);
            }
        }
        self.requeue_inflight();
        if hwm < exp {
            self.replay_lost(hwm, exp, topic, k);
        }
        self.expected = Some(hwm);
    }

    /// Puts the in-flight messages, known not stored, back at the front of the queue in
    /// order (those whose job is already answered are dropped instead).
    fn requeue_inflight(&mut self) {
        while let Some(m) = self.inflight.pop_back() {
            if m.job == REPLAY || self.jobs.get(&m.job).is_some_and(|j| j.reply.is_some()) {
                self.queue.push_front(m);
            } else {
                self.resolve(&m, Err(KelpError::RequestTimedOut));
            }
        }
    }

    /// Answers jobs past their deadline with a retriable error; drops their unsent messages.
    fn expire(&mut self, now: Instant, topic: &str, k: i32) {
        let mut expired = Vec::new();
        for (id, j) in self.jobs.iter_mut() {
            if j.reply.is_some() && j.deadline <= now {
                if let Some(reply) = j.reply.take() {
                    let _ = reply.send(j.results());
                }
                expired.push(*id);
            }
        }
        if expired.is_empty() {
            return;
        }
        tracing::warn!(
            topic,
            partition = k,
            jobs = expired.len(),
            "publishes to SeaweedMQ timed out"
        );
        let queue = std::mem::take(&mut self.queue);
        for m in queue {
            if expired.contains(&m.job) {
                self.resolve(&m, Err(KelpError::RequestTimedOut));
            } else {
                self.queue.push_back(m);
            }
        }
    }
}

/// Journal writes that ended: (intents covered, whether it is on the filer).
type Written = mpsc::UnboundedSender<(u64, bool)>;

/// How long a failed journal write waits before it is tried again.
const JOURNAL_RETRY: Duration = Duration::from_millis(200);

/// Starts the journal write a batch waits for, if one is due and none is under way.
fn write_journal(fwd: &Rc<Forwarder>, st: &mut State, topic: &str, k: i32, done: &Written) {
    if st.journal_after.is_some_and(|t| Instant::now() < t) {
        return;
    }
    let Some((upto, file)) = st.journal.write_due() else {
        return;
    };
    let (fwd, topic, done) = (fwd.clone(), topic.to_string(), done.clone());
    tokio::task::spawn_local(async move {
        let r = fwd.write_journal(&topic, k, &file).await;
        if let Err(e) = &r {
            tracing::warn!(topic = %topic, partition = k, error = %e, "producer journal not written; idempotent batches wait");
        }
        let _ = done.send((upto, r.is_ok()));
    });
}

impl State {
    /// A journal write ended.
    fn journal_written(&mut self, upto: u64, ok: bool) {
        self.journal.written(upto, ok);
        self.journal_after = (!ok).then(|| Instant::now() + JOURNAL_RETRY);
    }
}

/// Why a stream ended.
enum Ended {
    /// No more jobs will come (the partition's sender is gone) and nothing is pending.
    Done,
    /// The stream broke (transport): acknowledgements may have been lost on the way, so the
    /// high water mark tells which in-flight messages were stored.
    Broken(String),
    /// The broker's handler ended the stream with an error: every acknowledgement it sent
    /// arrived before that status, so the in-flight messages were not stored.
    Refused(String),
}

/// Whether a publish stream's status is the broker's handler giving up on a message it could
/// not store (weed returns "... publish error: ..." as gRPC Unknown). The offset it took for
/// that message is burned: the high water mark counts it, but nothing is there, so the
/// message must not be taken as stored because it is below the mark (it is sent again).
fn refused_by_broker(status: &tonic::Status) -> bool {
    status.code() == tonic::Code::Unknown && status.message().contains("publish error")
}

struct Stream {
    tx: mpsc::UnboundedSender<PublishMessageRequest>,
    acks: tonic::Streaming<PublishMessageResponse>,
}

fn broker_error(r: &PublishMessageResponse) -> Option<String> {
    (r.error_code != 0 || !r.error.is_empty()).then(|| {
        format!(
            "broker error {} (kafka {}): {}",
            r.error_code,
            errors::kafka_code(r.error_code),
            r.error
        )
    })
}

/// Whether a stream may be opened after asking the leader to load the partition: yes when it
/// did, or when it does not know the call (a SeaweedMQ without it loads partitions itself, or
/// not at all: try anyway); not when it could not be asked (the leader is unreachable).
fn load_outcome(r: Result<(), tonic::Status>, leader: &str) -> Result<(), String> {
    match r {
        Ok(()) => Ok(()),
        Err(s) if s.code() == tonic::Code::Unimplemented => {
            tracing::debug!(leader, "AssignTopicPartitions unimplemented");
            Ok(())
        }
        Err(s) => Err(format!("AssignTopicPartitions on {leader}: {s}")),
    }
}

/// Opens a stream to the partition's leader, after making it load the partition; returns it
/// with the leader's high water mark, read before the stream opened (nothing of Kelp's is in
/// flight then).
async fn open(
    fwd: &Forwarder,
    topic: &str,
    k: i32,
) -> Result<(Stream, i64, super::client::Placement), String> {
    let pl = fwd.placement(topic, k).await.map_err(|e| e.to_string())?;
    let (_, hwm) = fwd.range(topic, k).await.map_err(|e| e.to_string())?;
    let (tx, rx) = mpsc::unbounded_channel();
    let init = PublishMessageRequest {
        message: Some(Message::Init(InitMessage {
            topic: Some(pl.topic.clone()),
            partition: Some(pl.partition),
            ack_interval: 1,
            follower_broker: String::new(),
            publisher_name: "kelp".into(),
        })),
    };
    tx.send(init)
        .map_err(|_| "request stream closed".to_string())?;
    let mut client = fwd.broker(&pl.leader).map_err(|e| e.to_string())?;
    // A leader that is not SeaweedMQ's balancer has the partition loaded only if the balancer
    // told it so when the topic was made; after that broker restarted, after the partition
    // was unloaded, or after the balancer moved the partition to it from a dead broker, weed
    // 4.48 panics on PublishMessage instead (storage-client's `broker::load_partition`).
    // So load it first, right before opening, to keep an unload in between unlikely.
    let loaded = client
        .assign_topic_partitions(request(broker::load_request(&pl.topic, &pl.partition)))
        .await
        .map(drop);
    load_outcome(loaded, &pl.leader)?;
    let call = client.publish_message(UnboundedReceiverStream::new(rx));
    let mut acks = tokio::time::timeout(OPEN_TIMEOUT, call)
        .await
        .map_err(|_| "PublishMessage did not open in time".to_string())?
        .map_err(|s| format!("PublishMessage: {s}"))?
        .into_inner();
    let hello = tokio::time::timeout(OPEN_TIMEOUT, acks.message())
        .await
        .map_err(|_| "no hello from the broker".to_string())?
        .map_err(|s| format!("PublishMessage: {s}"))?
        .ok_or_else(|| "the broker ended the stream at init".to_string())?;
    if let Some(e) = broker_error(&hello) {
        if hello.error_code == errors::NOT_LEADER {
            fwd.invalidate(topic);
        }
        return Err(e);
    }
    fwd.stats.streams_opened.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(topic, partition = k, leader = %pl.leader, high_water_mark = hwm, "publish stream open");
    Ok((Stream { tx, acks }, hwm, pl))
}

async fn pump(
    fwd: &Rc<Forwarder>,
    s: &mut Stream,
    st: &mut State,
    jobs: &mut mpsc::UnboundedReceiver<Job>,
    closed: &mut bool,
    journal: (&Written, &mut mpsc::UnboundedReceiver<(u64, bool)>),
    (topic, k): (&str, i32),
) -> Ended {
    let (write_done, written) = journal;
    let mut tick = tokio::time::interval(TICK);
    loop {
        write_journal(fwd, st, topic, k, write_done);
        let now_ns = broker::now_ns();
        while let Some(data) = st.send_next(now_ns) {
            let req = PublishMessageRequest {
                message: Some(Message::Data(data)),
            };
            if s.tx.send(req).is_err() {
                if let Some(m) = st.inflight.pop_back() {
                    st.queue.push_front(m);
                }
                return Ended::Broken("request stream closed".into());
            }
        }
        if *closed && st.is_idle() {
            return Ended::Done;
        }
        tokio::select! {
            job = jobs.recv(), if !*closed => match job {
                Some(j) => st.add(j, topic, k),
                None => *closed = true,
            },
            ack = s.acks.message() => match ack {
                Ok(Some(r)) => {
                    if let Some(e) = broker_error(&r) {
                        if r.error_code == errors::NOT_LEADER {
                            fwd.invalidate(topic);
                        }
                        return Ended::Broken(e);
                    }
                    if st.ack(r.assigned_offset) {
                        fwd.last_ack.set(Some(Instant::now()));
                        fwd.stats.published_records.fetch_add(1, Ordering::Relaxed);
                    } else {
                        tracing::warn!(topic, partition = k, offset = r.assigned_offset, "ack without an in-flight message");
                    }
                }
                Ok(None) => return Ended::Broken("the broker closed the stream".into()),
                Err(status) if refused_by_broker(&status) => {
                    return Ended::Refused(format!("refused: {status}"))
                }
                Err(status) => return Ended::Broken(format!("stream error: {status}")),
            },
            Some((upto, ok)) = written.recv() => st.journal_written(upto, ok),
            _ = tick.tick() => st.expire(Instant::now(), topic, k),
        }
    }
}

/// The partition's SeaweedMQ clock: the stamp of its last stored message (high water mark
/// `hwm`), read back; [`Clock::unknown`] when it cannot be read.
async fn learn_clock(fwd: &Forwarder, topic: &str, k: i32, hwm: i64) -> Clock {
    if hwm <= 0 {
        return Clock::after(0);
    }
    match fwd.last_stamp(topic, k, hwm).await {
        Ok(ns) => Clock::after(ns),
        Err(e) => {
            tracing::info!(topic, partition = k, error = %e, "last SeaweedMQ timestamp unreadable; starting the clock ahead");
            Clock::unknown(broker::now_ns())
        }
    }
}

/// Drives one partition's publishing until its job sender is dropped and nothing is pending.
pub async fn run(
    fwd: Rc<Forwarder>,
    topic: String,
    k: i32,
    mut jobs: mpsc::UnboundedReceiver<Job>,
) {
    fwd.active_publishers.set(fwd.active_publishers.get() + 1);
    run_partition(&fwd, &topic, k, &mut jobs).await;
    fwd.active_publishers
        .set(fwd.active_publishers.get().saturating_sub(1));
}

async fn run_partition(
    fwd: &Rc<Forwarder>,
    topic: &str,
    k: i32,
    jobs: &mut mpsc::UnboundedReceiver<Job>,
) {
    let mut st = State::new(fwd.journal_for(topic, k));
    let (write_done, mut written) = mpsc::unbounded_channel();
    let mut closed = false;
    let mut backoff = BACKOFF_MIN;
    loop {
        while let Ok(j) = jobs.try_recv() {
            st.add(j, topic, k);
        }
        while let Ok((upto, ok)) = written.try_recv() {
            st.journal_written(upto, ok);
        }
        write_journal(fwd, &mut st, topic, k, &write_done);
        if st.is_idle() {
            if closed {
                return;
            }
            match jobs.recv().await {
                Some(j) => st.add(j, topic, k),
                None => return,
            }
            continue;
        }
        // Opening may wait on a broker that does not answer: keep answering overdue jobs.
        let opening = open(fwd, topic, k);
        tokio::pin!(opening);
        let opened = loop {
            tokio::select! {
                r = &mut opening => break r,
                _ = tokio::time::sleep(TICK) => st.expire(Instant::now(), topic, k),
                job = jobs.recv(), if !closed => match job {
                    Some(j) => st.add(j, topic, k),
                    None => closed = true,
                },
            }
        };
        let ended = match opened {
            Ok((mut s, hwm, _)) => {
                if st.clock.is_none() {
                    st.clock = Some(learn_clock(fwd, topic, k, hwm).await);
                }
                st.reconcile(hwm, topic, k);
                backoff = BACKOFF_MIN;
                pump(
                    fwd,
                    &mut s,
                    &mut st,
                    jobs,
                    &mut closed,
                    (&write_done, &mut written),
                    (topic, k),
                )
                .await
            }
            Err(e) => Ended::Broken(e),
        };
        let why = match ended {
            Ended::Done => return,
            Ended::Broken(why) => why,
            Ended::Refused(why) => {
                st.requeue_inflight();
                why
            }
        };
        fwd.stats.publish_errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            topic = %topic,
            partition = k,
            in_flight = st.inflight.len(),
            queued = st.queue.len(),
            retry_in_ms = backoff.as_millis() as u64,
            "SeaweedMQ publish stream: {why}"
        );
        fwd.invalidate(topic);
        // Wait out the backoff, still taking jobs and expiring the overdue ones.
        let until = tokio::time::Instant::now() + backoff;
        loop {
            st.expire(Instant::now(), topic, k);
            tokio::select! {
                _ = tokio::time::sleep_until(until) => break,
                job = jobs.recv(), if !closed => match job {
                    Some(j) => st.add(j, topic, k),
                    None => closed = true,
                },
                _ = tokio::time::sleep(TICK) => {}
            }
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
        if why.contains(STOPPING) {
            // The broker is unloading the partition (its last publisher left): a
            // stream opened before that finishes lands in the dying partition.
            backoff = backoff.max(STOPPING_BACKOFF);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::sync::Semaphore;

    fn job(n: i32, deadline: Instant) -> (Job, oneshot::Receiver<Vec<BatchOffsets>>) {
        let permit = Arc::new(Semaphore::new(1)).try_acquire_owned().unwrap();
        let (tx, rx) = oneshot::channel();
        let batch = crate::record::build::simple_batch(n, 4, 1000).freeze();
        (Job::new(vec![batch], deadline, permit, tx), rx)
    }

    fn send_all(st: &mut State) {
        while st.send_next(broker::now_ns()).is_some() {}
    }

    #[test]
    fn a_leader_that_cannot_load_the_partition_is_not_published_to() {
        assert_eq!(load_outcome(Ok(()), "b:1"), Ok(()));
        let unknown = tonic::Status::unimplemented("no such method");
        assert_eq!(load_outcome(Err(unknown), "b:1"), Ok(()));
        let gone = load_outcome(Err(tonic::Status::unavailable("refused")), "b:1");
        assert!(gone.is_err_and(|e| e.contains("b:1") && e.contains("refused")));
    }

    #[test]
    fn acks_answer_in_order() {
        let mut st = State::default();
        let later = Instant::now() + Duration::from_secs(60);
        let (j, mut rx) = job(3, later);
        st.add(j, "t", 0);
        st.reconcile(10, "t", 0);
        send_all(&mut st);
        for o in 10..13 {
            assert!(st.ack(o));
        }
        assert_eq!(rx.try_recv().unwrap(), vec![Ok((10, 12))]);
        assert!(st.is_idle());
    }

    #[test]
    fn broken_stream_resends_only_what_was_not_stored() {
        let mut st = State::default();
        let later = Instant::now() + Duration::from_secs(60);
        let (j, mut rx) = job(4, later);
        st.add(j, "t", 0);
        st.reconcile(0, "t", 0);
        send_all(&mut st);
        assert!(st.ack(0));
        // Stream breaks with 3 in flight; the leader stored one more of them.
        st.reconcile(2, "t", 0);
        assert_eq!(st.inflight.len(), 0);
        assert_eq!(
            st.queue.len(),
            2,
            "only the two unstored records are sent again"
        );
        send_all(&mut st);
        assert!(st.ack(2));
        assert!(st.ack(3));
        assert_eq!(rx.try_recv().unwrap(), vec![Ok((0, 3))]);
    }

    #[test]
    fn a_refused_stream_resends_everything_in_flight_despite_a_higher_mark() {
        let stopping = tonic::Status::unknown(
            "topic t partition p publish error: failed to add message to buffer: \
             failed to add log entry to buffer: log buffer is stopping",
        );
        assert!(refused_by_broker(&stopping));
        assert!(!refused_by_broker(&tonic::Status::unknown(
            "transport error"
        )));
        assert!(!refused_by_broker(&tonic::Status::unavailable(
            "publish error"
        )));
        let mut st = State::default();
        let later = Instant::now() + Duration::from_secs(60);
        let (j, mut rx) = job(3, later);
        st.add(j, "t", 0);
        st.reconcile(0, "t", 0);
        send_all(&mut st);
        assert!(st.ack(0));
        // The broker took offset 1 for the next message, failed to store it and ended the
        // stream: the mark is 2 on reconnect, yet neither in-flight message is there.
        st.requeue_inflight();
        st.reconcile(2, "t", 0);
        assert_eq!(st.queue.len(), 2, "both are sent again");
        send_all(&mut st);
        assert!(st.ack(2));
        assert!(st.ack(3));
        assert_eq!(rx.try_recv().unwrap(), vec![Ok((0, 3))]);
    }

    #[test]
    fn records_seaweedmq_lost_are_published_again_first() {
        let mut st = State::default();
        let later = Instant::now() + Duration::from_secs(60);
        let (j, _rx) = job(4, later);
        st.add(j, "t", 0);
        st.reconcile(0, "t", 0);
        send_all(&mut st);
        for o in 0..4 {
            assert!(st.ack(o));
        }
        let (j2, mut rx2) = job(1, later);
        st.add(j2, "t", 0);
        // The broker restarted having flushed only offset 0: 1..3 are published again, first.
        st.reconcile(1, "t", 0);
        let replays: Vec<_> = st.queue.iter().map(|m| m.replayed_at).collect();
        assert_eq!(replays, vec![Some(1), Some(2), Some(3), None]);
        send_all(&mut st);
        for o in 1..5 {
            assert!(st.ack(o));
        }
        assert_eq!(rx2.try_recv().unwrap(), vec![Ok((4, 4))]);
        assert!(st.is_idle());
    }

    #[test]
    fn deadline_answers_retriable_and_drops_unsent() {
        let mut st = State::default();
        let now = Instant::now();
        let (j, mut rx) = job(2, now);
        st.add(j, "t", 0);
        st.expire(now + Duration::from_millis(1), "t", 0);
        assert_eq!(
            rx.try_recv().unwrap(),
            vec![Err(KelpError::RequestTimedOut)]
        );
        assert!(st.queue.is_empty());
        assert!(st.is_idle());
    }

    #[test]
    fn timed_out_in_flight_is_resolved_not_resent() {
        let mut st = State::default();
        let now = Instant::now();
        let (j, mut rx) = job(2, now + Duration::from_millis(5));
        st.add(j, "t", 0);
        st.reconcile(7, "t", 0);
        send_all(&mut st);
        st.expire(now + Duration::from_secs(1), "t", 0);
        assert!(rx.try_recv().is_ok());
        // Reconnect: nothing was stored; the answered job's records are not sent again.
        st.reconcile(7, "t", 0);
        assert!(st.queue.is_empty());
        assert!(st.is_idle());
    }
}
