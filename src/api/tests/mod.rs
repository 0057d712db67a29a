//! In-process tests of the api/ handlers: requests are encoded as a client sends them,
//! dispatched to real shards on glommio executors joined by the channel mesh (as
//! `server::run` builds them, with `--storage memory`), and the answers decoded with the
//! kafka-protocol crate. No sockets: what is tested is everything behind the connection.
//!
//! Entry points: [`run`] starts the shards and runs a test body on shard 0 with a
//! [`Broker`]; [`Client::send`] is one request/response round trip; [`start_shard`] is the
//! only place a `Shard` is built.

mod configs;
mod consumer_groups;
mod fetch;
mod group_offsets;
mod groups;
mod misc;
mod offsets;
mod produce;
mod replicas;
mod security;
mod share_groups;
mod topics;
mod txn;

use std::cell::Cell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use clap::Parser;
use futures::channel::{mpsc, oneshot};
use futures::future::LocalBoxFuture;
use futures::{FutureExt, StreamExt};
use glommio::channels::channel_mesh::{MeshBuilder, Receivers, Senders};
use glommio::LocalExecutorBuilder;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    CreateTopicsRequest, FetchRequest, ProduceRequest, RequestHeader as WireHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request};
use kafka_protocol::records::RecordBatchDecoder;

use super::topic_name;
use crate::cluster::Cluster;
use crate::config::Config;
use crate::error::{code, ConnectionError};
use crate::group::InMemoryOffsetStore;
use crate::protocol::{RequestHeader, Response};
use crate::shard::{Shard, ShardMsg};

/// Longest a whole test may take before it counts as a hang (a lost wake-up).
const HANG: Duration = Duration::from_secs(120);

/// The client address every request claims to come from.
pub(crate) const PEER: &str = "127.0.0.1:50000";

/// A connection from [`PEER`] on the first listener of `shard`'s configuration.
pub(crate) fn session(shard: &Shard) -> Rc<crate::auth::Session> {
    let listener = shard
        .config
        .listeners()
        .expect("test listeners")
        .into_iter()
        .next()
        .expect("a listener");
    let sasl = crate::auth::sasl::Sasl::new(
        shard.cluster.credentials.clone(),
        None,
        &shard.config.sasl_enabled_mechanisms.0,
    )
    .expect("SASL");
    Rc::new(crate::auth::Session::new(
        PEER,
        Arc::new(listener),
        Some(Arc::new(sasl)),
    ))
}

/// Broker flags for a test: memory storage and no initial rebalance delay (groups form as
/// soon as their members have joined) unless `args` say otherwise.
fn test_config(args: &[&str]) -> Config {
    let mut all = vec!["kelp", "--storage", "memory"];
    if !args.contains(&"--group-initial-rebalance-delay-ms") {
        all.extend(["--group-initial-rebalance-delay-ms", "0"]);
    }
    all.extend_from_slice(args);
    Config::parse_from(all)
}

/// Builds the shard at mesh position `senders.peer_id()` as `server::run` does for
/// `--storage memory`, and starts what runs beside its connections there: the peer service
/// and the group timers. The one place the tests build a `Shard`.
pub(crate) async fn start_shard(
    config: Arc<Config>,
    cluster: Arc<Cluster>,
    senders: Senders<ShardMsg>,
    receivers: Receivers<ShardMsg>,
) -> Rc<Shard> {
    let core = senders.peer_id();
    let shard = Rc::new(Shard::new(
        config,
        cluster,
        senders,
        core,
        Rc::new(InMemoryOffsetStore::default()),
        Arc::new(crate::storage::memory::MemoryEngine::default()),
    ));
    glommio::spawn_local(shard.clone().serve_peers(receivers)).detach();
    glommio::spawn_local(shard.clone().run_group_timers()).detach();
    glommio::spawn_local(shard.clone().run_txn_timers()).detach();
    shard
}

/// Work sent to a shard other than the one running the test body.
type Job = Box<dyn FnOnce(Client) -> LocalBoxFuture<'static, ()> + Send>;

/// What the executors pick up once the mesh tells them their position.
struct Parts<F> {
    body: Option<F>,
    jobs_tx: Option<Vec<mpsc::UnboundedSender<Job>>>,
    jobs_rx: Vec<Option<mpsc::UnboundedReceiver<Job>>>,
}

/// Starts `shards` shards with the broker flags `args` (on top of `--storage memory`),
/// runs `body` on shard 0, then stops them all. A panic in the body (or in work it sent to
/// another shard) fails the test with its own message.
pub(crate) fn run<F, Fut>(shards: usize, args: &[&str], body: F)
where
    F: FnOnce(Broker) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let config = Arc::new(test_config(args));
    let cluster = Arc::new(Cluster::new(&config, shards));
    let mesh = MeshBuilder::<ShardMsg, _>::full(shards, 1024);
    let (mut jobs_tx, mut jobs_rx) = (Vec::new(), Vec::new());
    for _ in 0..shards {
        let (tx, rx) = mpsc::unbounded();
        jobs_tx.push(tx);
        jobs_rx.push(Some(rx));
    }
    // Mesh positions follow join order, not spawn order: each executor takes its part once
    // it knows its position.
    let parts = Arc::new(Mutex::new(Parts {
        body: Some(body),
        jobs_tx: Some(jobs_tx),
        jobs_rx,
    }));
    type Outcome = (usize, Option<Box<dyn std::any::Any + Send>>);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Outcome>();
    let handles: Vec<_> = (0..shards)
        .map(|i| {
            let (config, cluster, mesh, parts, done) = (
                config.clone(),
                cluster.clone(),
                mesh.clone(),
                parts.clone(),
                done_tx.clone(),
            );
            LocalExecutorBuilder::default()
                .name(&format!("api-test-{i}"))
                .spawn(move || async move {
                    let (senders, receivers) = mesh.join().await.expect("mesh");
                    let me = senders.peer_id();
                    let client =
                        Client::new(start_shard(config, cluster, senders, receivers).await);
                    if me == 0 {
                        let (body, jobs) = {
                            let mut p = parts.lock().expect("parts");
                            (p.body.take(), p.jobs_tx.take())
                        };
                        drop(parts);
                        // Held here until the body is done, whatever the body keeps of its
                        // Broker: the other shards stop when their job queues close.
                        let jobs = jobs.expect("job senders");
                        let broker = Broker {
                            client,
                            jobs: jobs.clone(),
                        };
                        let body = body.expect("body");
                        let out = AssertUnwindSafe(body(broker)).catch_unwind().await;
                        drop(jobs);
                        let _ = done.send((me, out.err()));
                    } else {
                        let rx = parts.lock().expect("parts").jobs_rx[me].take();
                        drop(parts);
                        let mut rx = rx.expect("job receiver");
                        while let Some(job) = rx.next().await {
                            glommio::spawn_local(job(client.clone())).detach();
                        }
                        let _ = done.send((me, None));
                    }
                })
                .expect("executor")
        })
        .collect();
    drop(done_tx);
    let deadline = Instant::now() + HANG;
    let mut failure = None;
    for _ in 0..shards {
        let left = deadline.saturating_duration_since(Instant::now());
        match done_rx.recv_timeout(left) {
            Ok((_, Some(panic))) => failure = failure.or(Some(panic)),
            Ok((_, None)) => {}
            Err(_) => panic!("a shard did not finish within {HANG:?}"),
        }
    }
    for h in handles {
        h.join().expect("executor thread");
    }
    if let Some(p) = failure {
        std::panic::resume_unwind(p);
    }
}

/// The test body's view of the broker: a client on shard 0 and a way to act on the others.
pub(crate) struct Broker {
    pub client: Client,
    jobs: Vec<mpsc::UnboundedSender<Job>>,
}

impl Broker {
    /// Runs `f` with a client on shard `shard` (a connection accepted by that core) and
    /// returns what it returns; a panic there is raised here.
    pub async fn on<T, F, Fut>(&self, shard: usize, f: F) -> T
    where
        F: FnOnce(Client) -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        if shard == self.client.shard.id {
            return f(self.client.clone()).await;
        }
        let (tx, rx) = oneshot::channel::<std::thread::Result<T>>();
        let job: Job = Box::new(move |c| {
            Box::pin(async move {
                let _ = tx.send(AssertUnwindSafe(f(c)).catch_unwind().await);
            })
        });
        self.jobs[shard]
            .unbounded_send(job)
            .unwrap_or_else(|_| panic!("shard {shard} stopped"));
        match rx.await {
            Ok(Ok(t)) => t,
            Ok(Err(p)) => std::panic::resume_unwind(p),
            Err(_) => panic!("shard {shard} dropped the job"),
        }
    }
}

/// A client connection on one shard: frames go to `api::dispatch` as the connection hands
/// them over.
#[derive(Clone)]
pub(crate) struct Client {
    pub shard: Rc<Shard>,
    next_correlation: Rc<Cell<i32>>,
}

impl Client {
    fn new(shard: Rc<Shard>) -> Self {
        Client {
            shard,
            next_correlation: Rc::new(Cell::new(1)),
        }
    }

    /// The frame a client sends for `req` at `version` (after the 4-byte length prefix, which
    /// the connection strips), and its correlation id.
    pub fn frame<R: Request>(&self, version: i16, req: &R) -> (i32, BytesMut) {
        let correlation = self.next_correlation.get();
        self.next_correlation.set(correlation + 1);
        let mut header = WireHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = correlation;
        header.client_id = Some(super::sb("api-test"));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, R::header_version(version))
            .expect("request header");
        req.encode(&mut buf, version).expect("request body");
        (correlation, buf)
    }

    /// Parses the header as the connection does and dispatches the frame.
    pub async fn dispatch(&self, frame: BytesMut) -> Result<Option<Response>, ConnectionError> {
        let header = RequestHeader::parse(&frame)?;
        let (started, _) = oneshot::channel();
        super::dispatch(
            self.shard.clone(),
            header,
            session(&self.shard),
            frame,
            started,
        )
        .await
    }

    /// One request: `Ok(None)` when no response is sent (acks=0), `Err` when the connection
    /// would be closed.
    pub async fn try_send<R: Request>(
        &self,
        version: i16,
        req: R,
    ) -> Result<Option<R::Response>, ConnectionError> {
        let (correlation, frame) = self.frame(version, &req);
        let resp = self.dispatch(frame).await?;
        Ok(resp.map(|r| decode::<R::Response>(&r, version, correlation)))
    }

    /// One request that must be answered.
    pub async fn send<R: Request>(&self, version: i16, req: R) -> R::Response {
        match self.try_send(version, req).await {
            Ok(Some(r)) => r,
            Ok(None) => panic!("api {} v{version}: no response", R::KEY),
            Err(e) => panic!("api {} v{version}: connection error {e}", R::KEY),
        }
    }
}

/// A response frame in one buffer, length prefix checked and removed.
pub(crate) fn response_bytes(resp: &Response) -> Bytes {
    let mut b = BytesMut::new();
    for c in &resp.chunks {
        b.extend_from_slice(c);
    }
    let mut b = b.freeze();
    let len = b.get_i32();
    assert_eq!(len as usize, b.len(), "length prefix");
    b
}

/// Decodes a response frame as a client would: header version from the crate's table,
/// correlation id checked, no byte left over.
pub(crate) fn decode<M: Decodable + HeaderVersion>(
    resp: &Response,
    version: i16,
    correlation: i32,
) -> M {
    let mut b = response_bytes(resp);
    let header = ResponseHeader::decode(&mut b, M::header_version(version)).expect("header");
    assert_eq!(header.correlation_id, correlation, "correlation id");
    let body = M::decode(&mut b, version).expect("response body");
    assert!(b.is_empty(), "v{version}: {} bytes after the body", b.len());
    body
}

// ---- request builders and checks shared by the test files ----

/// Creates `name` with `partitions` partitions and the given configs; returns its id.
pub(crate) async fn create_topic_with(
    c: &Client,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> uuid::Uuid {
    let mut t = CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partitions)
        .with_replication_factor(1);
    t.configs = configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(super::sb(*k))
                .with_value(Some(super::sb(*v)))
        })
        .collect();
    let resp = c
        .send(7, CreateTopicsRequest::default().with_topics(vec![t]))
        .await;
    let r = &resp.topics[0];
    assert_eq!(
        r.error_code,
        code::NONE,
        "create {name}: {:?}",
        r.error_message
    );
    r.topic_id
}

/// Creates `name` with `partitions` partitions; returns its id.
pub(crate) async fn create_topic(c: &Client, name: &str, partitions: i32) -> uuid::Uuid {
    create_topic_with(c, name, partitions, &[]).await
}

/// A Produce request of `records` for each `(topic, partition)` listed.
pub(crate) fn produce_request(acks: i16, parts: &[(&str, i32, Option<Bytes>)]) -> ProduceRequest {
    let mut topics: Vec<TopicProduceData> = Vec::new();
    for (t, p, records) in parts {
        let pd = PartitionProduceData::default()
            .with_index(*p)
            .with_records(records.clone());
        match topics.iter_mut().find(|td| td.name.0.as_str() == *t) {
            Some(td) => td.partition_data.push(pd),
            None => topics.push(
                TopicProduceData::default()
                    .with_name(topic_name(*t))
                    .with_partition_data(vec![pd]),
            ),
        }
    }
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(topics)
}

/// Produces `records` to one partition with acks=-1 (v9) and returns its partition answer.
pub(crate) async fn produce(
    c: &Client,
    topic: &str,
    partition: i32,
    records: BytesMut,
) -> PartitionProduceResponse {
    let req = produce_request(-1, &[(topic, partition, Some(records.freeze()))]);
    let mut resp = c.send(9, req).await;
    assert_eq!(resp.responses.len(), 1);
    let mut t = resp.responses.remove(0);
    assert_eq!(t.name.0.as_str(), topic);
    assert_eq!(t.partition_responses.len(), 1);
    t.partition_responses.remove(0)
}

/// Produces and expects success; returns the base offset.
pub(crate) async fn produce_ok(c: &Client, topic: &str, partition: i32, records: BytesMut) -> i64 {
    let r = produce(c, topic, partition, records).await;
    assert_eq!(
        r.error_code,
        code::NONE,
        "produce {topic}-{partition}: {:?}",
        r.error_message
    );
    r.base_offset
}

/// One batch of one record per value, record i at timestamp `ts + i` (offsets from 0), as
/// a Rust client's encoder writes it.
pub(crate) fn batch(values: &[&str], ts: i64) -> BytesMut {
    let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
    BytesMut::from(&crate::record::walk::tests::encoded_batch(0, &values, ts)[..])
}

/// (offset, timestamp, value) of every record in a fetched records field.
pub(crate) fn records_of(data: &Option<Bytes>) -> Vec<(i64, i64, String)> {
    let mut b = data.clone().unwrap_or_default();
    RecordBatchDecoder::decode_all(&mut b)
        .expect("fetched batches decode")
        .into_iter()
        .flat_map(|set| set.records)
        .map(|r| {
            let v = r.value.map(|v| String::from_utf8_lossy(&v).into_owned());
            (r.offset, r.timestamp, v.unwrap_or_default())
        })
        .collect()
}

/// A Fetch request (v12: topics by name) of each `(topic, partition, offset)`.
pub(crate) fn fetch_request(max_wait_ms: i32, parts: &[(&str, i32, i64)]) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (t, p, offset) in parts {
        let fp = FetchPartition::default()
            .with_partition(*p)
            .with_fetch_offset(*offset)
            .with_partition_max_bytes(1 << 20);
        match topics.iter_mut().find(|ft| ft.topic.0.as_str() == *t) {
            Some(ft) => ft.partitions.push(fp),
            None => topics.push(
                FetchTopic::default()
                    .with_topic(topic_name(*t))
                    .with_partitions(vec![fp]),
            ),
        }
    }
    FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_topics(topics)
}

/// Fetches one partition from `offset` without waiting (v12) and returns its answer.
pub(crate) async fn fetch(c: &Client, topic: &str, partition: i32, offset: i64) -> PartitionData {
    let mut resp = c
        .send(12, fetch_request(0, &[(topic, partition, offset)]))
        .await;
    assert_eq!(resp.error_code, code::NONE);
    assert_eq!(resp.responses.len(), 1);
    let mut t = resp.responses.remove(0);
    assert_eq!(t.topic.0.as_str(), topic);
    assert_eq!(t.partitions.len(), 1);
    t.partitions.remove(0)
}

/// The partitions of a `count`-partition topic owned by shard `shard`.
pub(crate) fn owned_by(c: &Client, topic: &str, count: i32, shard: usize) -> Vec<i32> {
    (0..count)
        .filter(|&p| c.shard.owner(topic, p) == shard)
        .collect()
}

/// A byte buffer of `n` records of `value_len` bytes each (records i at `ts + i`).
pub(crate) fn sized_batch(n: i32, value_len: usize, ts: i64) -> BytesMut {
    crate::record::build::simple_batch(n, value_len, ts)
}

/// Flips one byte of a batch's records so its CRC no longer matches.
pub(crate) fn corrupt(mut b: BytesMut) -> BytesMut {
    let last = b.len() - 1;
    b[last] ^= 0xff;
    b
}
