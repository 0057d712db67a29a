//! The forwarder's SeaweedMQ side: discovery (master `ListClusterNodes` or fixed lists),
//! gRPC channels per broker, partition routes (`LookupTopicBrokers`, cached, dropped on
//! NOT_LEADER), topic management, cold reads, partition ranges and the group offsets on the
//! filer. Runs on the forwarder thread only (single-threaded tokio runtime and `LocalSet`).
//! Publishing is [`super::publisher`]'s; it calls back here for routes and ranges.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::LocalBoxFuture;
use kelp_storage_client::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use kelp_storage_client::pb::messaging_pb::seaweed_messaging_client::SeaweedMessagingClient;
use kelp_storage_client::pb::messaging_pb::{
    BrokerPartitionAssignment, ConfigureTopicRequest, DataMessage, FetchMessageRequest,
    GetPartitionRangeInfoRequest, GetTopicConfigurationRequest, ListTopicsRequest,
    LookupTopicBrokersRequest,
};
use kelp_storage_client::pb::schema_pb;
use kelp_storage_client::{addr, discovery, filer, group_offsets, ring};
use tokio::sync::mpsc;
use tonic::transport::{Channel, Endpoint};

use super::publisher::{self, Job};
use super::{records, Command, FetchOut, ForwarderStats, LoadedOffsets, TopicInfo};
use crate::cluster::Cluster;
use crate::config::Config;
use crate::error::KelpError;
use crate::group::offsets::{CommittedOffset, TopicPartition};

/// The namespace of every Kafka topic in SeaweedMQ.
pub const NAMESPACE: &str = "kafka";

/// How long a partition route is trusted (the brokers cache theirs as long).
const ROUTE_TTL: Duration = Duration::from_secs(30);

/// Deadline of one control-plane or read call.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Where SeaweedMQ is, from the flags.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Master gRPC endpoint, for discovery.
    pub master: Option<String>,
    /// Fixed broker gRPC addresses ("host:port"), instead of discovery.
    pub brokers: Vec<String>,
    /// Fixed filer gRPC endpoint, instead of discovery.
    pub filer: Option<String>,
    /// That filer's HTTP address.
    pub filer_http: Option<String>,
    pub topic_refresh: Duration,
    pub connect_timeout: Duration,
    pub default_partitions: i32,
}

impl Settings {
    /// Reads the `--seaweedmq-*` flags.
    pub fn from_config(c: &Config) -> anyhow::Result<Self> {
        let master = c
            .seaweedmq_master
            .as_deref()
            .map(addr::grpc_endpoint_of_http)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--seaweedmq-master: {e}"))?;
        let brokers: Vec<String> = c
            .seaweedmq_brokers
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let filer = c
            .seaweedmq_filer
            .as_deref()
            .map(addr::grpc_endpoint_of_http)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--seaweedmq-filer: {e}"))?;
        if master.is_none() && (brokers.is_empty() || filer.is_none()) {
            anyhow::bail!(
                "--storage seaweedmq needs --seaweedmq-master, or both --seaweedmq-brokers and --seaweedmq-filer"
            );
        }
        Ok(Settings {
            master,
            brokers,
            filer,
            filer_http: c.seaweedmq_filer.as_deref().map(http_of),
            topic_refresh: Duration::from_millis(c.seaweedmq_topic_refresh_ms.max(100)),
            connect_timeout: Duration::from_millis(c.seaweedmq_connect_timeout_ms),
            default_partitions: c.default_partitions,
        })
    }
}

struct Route {
    assignments: Vec<BrokerPartitionAssignment>,
    at: Instant,
}

/// Where a Kafka partition lives in SeaweedMQ.
#[derive(Debug, Clone)]
pub struct Placement {
    pub topic: schema_pb::Topic,
    pub partition: schema_pb::Partition,
    pub leader: String,
}

/// The forwarder's connections and caches.
pub struct Forwarder {
    s: Settings,
    cluster: Arc<Cluster>,
    pub stats: Arc<ForwarderStats>,
    brokers: RefCell<Vec<String>>,
    control: Cell<usize>,
    filer: RefCell<Option<String>>,
    /// The filer's HTTP address ("host:port"), for reading log files.
    filer_http: RefCell<Option<String>>,
    log_files: super::filer_log::LogFiles,
    channels: RefCell<HashMap<String, Channel>>,
    routes: RefCell<HashMap<String, Route>>,
    publishers: RefCell<HashMap<(String, i32), mpsc::UnboundedSender<Job>>>,
    /// Topics this Kelp deleted, and when: brokers may list them from memory for a while,
    /// so the topic refresh must not bring them back.
    deleted: RefCell<HashMap<String, Instant>>,
}

/// How long a deleted topic stays out of the topic refresh.
const DELETED_MEMORY: Duration = Duration::from_secs(300);

/// The HTTP "host:port" of a SeaweedFS address written "host:port" or "host:port.grpcport".
fn http_of(addr: &str) -> String {
    match addr.rsplit_once(':') {
        Some((host, port)) => format!("{host}:{}", port.split('.').next().unwrap_or(port)),
        None => addr.to_string(),
    }
}

fn storage(what: &str, e: impl std::fmt::Display) -> KelpError {
    KelpError::Storage(format!("SeaweedMQ {what}: {e}"))
}

/// A status that says the peer could not be reached (as opposed to an answer).
fn is_transport(s: &tonic::Status) -> bool {
    matches!(
        s.code(),
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
    )
}

fn request<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(CALL_TIMEOUT);
    r
}

/// The Kafka topic `name` in SeaweedMQ.
pub fn smq_topic(name: &str) -> schema_pb::Topic {
    schema_pb::Topic {
        namespace: NAMESPACE.to_string(),
        name: name.to_string(),
    }
}

fn topic_info(name: &str, assignments: &[BrokerPartitionAssignment]) -> TopicInfo {
    let generation = assignments
        .iter()
        .filter_map(|a| a.partition.as_ref())
        .map(|p| p.unix_time_ns)
        .min()
        .unwrap_or(0);
    TopicInfo {
        name: name.to_string(),
        partitions: assignments.len() as i32,
        id: uuid::Uuid::new_v5(
            &uuid::Uuid::NAMESPACE_URL,
            format!("seaweedmq:{NAMESPACE}/{name}@{generation}").as_bytes(),
        ),
    }
}

impl Forwarder {
    fn new(s: Settings, cluster: Arc<Cluster>, stats: Arc<ForwarderStats>) -> Self {
        Forwarder {
            brokers: RefCell::new(s.brokers.clone()),
            filer: RefCell::new(s.filer.clone()),
            filer_http: RefCell::new(s.filer_http.clone()),
            log_files: Default::default(),
            s,
            cluster,
            stats,
            control: Cell::new(0),
            channels: RefCell::new(HashMap::new()),
            routes: RefCell::new(HashMap::new()),
            publishers: RefCell::new(HashMap::new()),
            deleted: RefCell::new(HashMap::new()),
        }
    }

    /// A lazily connecting channel to a broker ("host:port", its gRPC port); tonic
    /// reconnects it by itself after failures.
    fn channel(&self, endpoint: &str) -> Result<Channel, KelpError> {
        if let Some(c) = self.channels.borrow().get(endpoint) {
            return Ok(c.clone());
        }
        let ch = Endpoint::from_shared(endpoint.to_string())
            .map_err(|e| storage("address", e))?
            .connect_timeout(Duration::from_secs(3))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true)
            .connect_lazy();
        self.channels
            .borrow_mut()
            .insert(endpoint.to_string(), ch.clone());
        Ok(ch)
    }

    /// A client of the broker at `broker` ("host:port").
    pub fn broker(&self, broker: &str) -> Result<SeaweedMessagingClient<Channel>, KelpError> {
        Ok(SeaweedMessagingClient::new(
            self.channel(&addr::grpc_endpoint(broker))?,
        ))
    }

    fn filer_client(&self) -> Result<SeaweedFilerClient<Channel>, KelpError> {
        let f = self
            .filer
            .borrow()
            .clone()
            .ok_or_else(|| storage("filer", "no filer known"))?;
        Ok(SeaweedFilerClient::new(self.channel(&f)?))
    }

    /// Refreshes broker and filer addresses from the master (when one is configured).
    async fn discover(&self) -> Result<(), KelpError> {
        let Some(master) = &self.s.master else {
            return Ok(());
        };
        let brokers = discovery::cluster_nodes(master, "broker")
            .await
            .map_err(|e| storage("master", e))?;
        if brokers.is_empty() {
            return Err(storage("master", "no mq broker registered"));
        }
        if self.s.filer.is_none() {
            let filers = discovery::cluster_nodes(master, "filer")
                .await
                .map_err(|e| storage("master", e))?;
            let f = filers
                .first()
                .ok_or_else(|| storage("master", "no filer registered"))?;
            *self.filer.borrow_mut() =
                Some(addr::grpc_endpoint_of_http(f).map_err(|e| storage("filer address", e))?);
            *self.filer_http.borrow_mut() = Some(http_of(f));
        }
        *self.brokers.borrow_mut() = brokers;
        Ok(())
    }

    /// Runs a control-plane call on some broker (any broker proxies to the balancer),
    /// moving on to the next broker, re-discovered, when one cannot be reached.
    async fn control<T>(
        &self,
        what: &str,
        f: impl Fn(SeaweedMessagingClient<Channel>) -> LocalBoxFuture<'static, Result<T, tonic::Status>>,
    ) -> Result<T, tonic::Status> {
        let tries = self.brokers.borrow().len().max(1) + 1;
        let mut last = tonic::Status::unavailable("no mq broker known");
        for attempt in 0..tries {
            let broker = {
                let b = self.brokers.borrow();
                (!b.is_empty()).then(|| b[self.control.get() % b.len()].clone())
            };
            if let Some(broker) = broker {
                let client = self
                    .broker(&broker)
                    .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
                match f(client).await {
                    Err(s) if is_transport(&s) => {
                        tracing::debug!(broker, what, error = %s, "control call failed; trying another broker");
                        last = s;
                    }
                    other => return other,
                }
            }
            self.control.set(self.control.get().wrapping_add(1));
            if attempt + 1 < tries {
                if let Err(e) = self.discover().await {
                    tracing::debug!(error = %e, "re-discovery failed");
                }
                tokio::time::sleep(Duration::from_millis(100 * (attempt as u64 + 1))).await;
            }
        }
        Err(last)
    }

    /// The partition's SeaweedMQ identity and leader, from the cached route.
    pub async fn placement(&self, topic: &str, k: i32) -> Result<Placement, KelpError> {
        let fresh = self
            .routes
            .borrow()
            .get(topic)
            .filter(|r| r.at.elapsed() < ROUTE_TTL)
            .map(|r| r.assignments.clone());
        let assignments = match fresh {
            Some(a) => a,
            None => {
                let t = smq_topic(topic);
                let resp = self
                    .control("LookupTopicBrokers", move |mut c| {
                        let t = t.clone();
                        Box::pin(async move {
                            c.lookup_topic_brokers(request(LookupTopicBrokersRequest {
                                topic: Some(t),
                            }))
                            .await
                            .map(tonic::Response::into_inner)
                        })
                    })
                    .await
                    .map_err(|s| {
                        if is_transport(&s) {
                            storage("LookupTopicBrokers", s)
                        } else {
                            tracing::debug!(topic, error = %s, "LookupTopicBrokers refused");
                            KelpError::UnknownTopicOrPartition
                        }
                    })?;
                self.routes.borrow_mut().insert(
                    topic.to_string(),
                    Route {
                        assignments: resp.broker_partition_assignments.clone(),
                        at: Instant::now(),
                    },
                );
                resp.broker_partition_assignments
            }
        };
        let a = ring::find_assignment(&assignments, k).ok_or(KelpError::UnknownTopicOrPartition)?;
        let partition = a
            .partition
            .clone()
            .ok_or(KelpError::UnknownTopicOrPartition)?;
        if a.leader_broker.is_empty() {
            return Err(storage("route", "partition has no leader"));
        }
        Ok(Placement {
            topic: smq_topic(topic),
            partition,
            leader: a.leader_broker.clone(),
        })
    }

    /// Forgets a topic's route (NOT_LEADER, closed stream, unknown partition).
    pub fn invalidate(&self, topic: &str) {
        self.routes.borrow_mut().remove(topic);
    }

    /// (earliest, high water mark) of a partition, asked of its leader.
    pub async fn range(&self, topic: &str, k: i32) -> Result<(i64, i64), KelpError> {
        let mut last = None;
        for _ in 0..2 {
            let pl = self.placement(topic, k).await?;
            let r = self
                .broker(&pl.leader)?
                .get_partition_range_info(request(GetPartitionRangeInfoRequest {
                    topic: Some(pl.topic.clone()),
                    partition: Some(pl.partition.clone()),
                }))
                .await;
            match r {
                Ok(resp) => {
                    let resp = resp.into_inner();
                    if resp.error.is_empty() {
                        let o = resp.offset_range.unwrap_or_default();
                        return Ok((o.earliest_offset.max(0), o.high_water_mark.max(0)));
                    }
                    last = Some(storage("GetPartitionRangeInfo", resp.error));
                }
                Err(s) => last = Some(storage("GetPartitionRangeInfo", s)),
            }
            self.invalidate(topic);
        }
        Err(last.unwrap_or_else(|| storage("GetPartitionRangeInfo", "failed")))
    }

    /// FetchMessage from `offset` on the leader, re-encoded as one batch.
    async fn fetch(
        &self,
        topic: &str,
        k: i32,
        offset: i64,
        max_bytes: usize,
        end: i64,
    ) -> Result<FetchOut, KelpError> {
        if offset >= end {
            return Ok(FetchOut::default());
        }
        self.stats.fetch_requests.fetch_add(1, Ordering::Relaxed);
        let max_bytes = max_bytes.clamp(1024, 64 << 20) as i32;
        let mut last = None;
        for _ in 0..2 {
            let pl = self.placement(topic, k).await?;
            let resp = self
                .broker(&pl.leader)?
                .fetch_message(request(FetchMessageRequest {
                    topic: Some(pl.topic.clone()),
                    partition: Some(pl.partition.clone()),
                    start_offset: offset,
                    max_bytes,
                    max_messages: (end - offset).clamp(1, 10_000) as i32,
                    max_wait_ms: 0,
                    min_bytes: 0,
                    consumer_group: String::new(),
                    consumer_id: "kelp".into(),
                }))
                .await;
            match resp {
                Ok(r) => {
                    let r = r.into_inner();
                    if r.error_code == 0 && r.error.is_empty() {
                        let mut out = FetchOut {
                            batches: Vec::new(),
                            high_watermark: r.high_water_mark,
                        };
                        let keep = r.messages.len().min((end - offset) as usize);
                        if keep == 0 {
                            // The broker's buffer does not know offsets its range reports:
                            // read the flushed files (see filer_log).
                            return self.fetch_files(&pl, offset, end, max_bytes as usize).await;
                        }
                        if keep > 0 {
                            out.batches.push(
                                records::encode_batch(offset, &r.messages[..keep])
                                    .map_err(|e| storage("re-encoding", e))?,
                            );
                        }
                        return Ok(out);
                    }
                    // 1: not the leader / partition unknown here; 2: read error (retriable).
                    last = Some(storage(
                        "FetchMessage",
                        format!("error {}: {}", r.error_code, r.error),
                    ));
                    if r.error_code != 1 {
                        break;
                    }
                }
                Err(s) => last = Some(storage("FetchMessage", s)),
            }
            self.invalidate(topic);
        }
        let e = last.unwrap_or_else(|| storage("FetchMessage", "failed"));
        tracing::warn!(topic, partition = k, offset, error = %e, "cold read from SeaweedMQ failed");
        Err(e)
    }

    /// Reads `[offset, end)` from the partition's flushed log files on the filer.
    async fn fetch_files(
        &self,
        pl: &Placement,
        offset: i64,
        end: i64,
        max_bytes: usize,
    ) -> Result<FetchOut, KelpError> {
        let http = self
            .filer_http
            .borrow()
            .clone()
            .ok_or_else(|| storage("filer", "no filer HTTP address known"))?;
        let mut f = self.filer_client()?;
        let dir = super::filer_log::partition_dir(&pl.topic, &pl.partition);
        let entries = self
            .log_files
            .read(&mut f, &http, &dir, offset, end, max_bytes)
            .await
            .map_err(|e| storage("reading log files", e))?;
        let mut out = FetchOut {
            batches: Vec::new(),
            high_watermark: end,
        };
        // One batch per run of consecutive offsets.
        let mut run: Vec<DataMessage> = Vec::new();
        let mut run_start = -1;
        for e in entries {
            if !run.is_empty() && e.offset != run_start + run.len() as i64 {
                out.batches.push(
                    records::encode_batch(run_start, &run).map_err(|e| storage("re-encoding", e))?,
                );
                run.clear();
            }
            if run.is_empty() {
                run_start = e.offset;
            }
            run.push(DataMessage {
                key: e.key,
                value: e.data,
                ts_ns: e.ts_ns,
                ctrl: None,
            });
        }
        if !run.is_empty() {
            out.batches.push(
                records::encode_batch(run_start, &run).map_err(|e| storage("re-encoding", e))?,
            );
        }
        tracing::debug!(topic = %pl.topic.name, offset, batches = out.batches.len(), "read from SeaweedMQ log files");
        Ok(out)
    }

    /// The topic's configuration, or None if SeaweedMQ does not know it.
    async fn lookup_topic(&self, name: &str) -> Result<Option<TopicInfo>, KelpError> {
        if self.deleted.borrow().contains_key(name) {
            return Ok(None);
        }
        let t = smq_topic(name);
        let r = self
            .control("GetTopicConfiguration", move |mut c| {
                let t = t.clone();
                Box::pin(async move {
                    c.get_topic_configuration(request(GetTopicConfigurationRequest {
                        topic: Some(t),
                    }))
                    .await
                    .map(tonic::Response::into_inner)
                })
            })
            .await;
        match r {
            Ok(cfg) if !cfg.broker_partition_assignments.is_empty() => {
                Ok(Some(topic_info(name, &cfg.broker_partition_assignments)))
            }
            Ok(_) => Ok(None),
            Err(s) if is_transport(&s) => Err(storage("GetTopicConfiguration", s)),
            // A missing topic comes back as an error status with a message.
            Err(_) => Ok(None),
        }
    }

    async fn create_topic(&self, name: &str, partitions: i32) -> Result<TopicInfo, KelpError> {
        // ConfigureTopic with another count would start a new generation (offsets from 0):
        // never do that to an existing topic.
        if let Some(existing) = self.lookup_topic(name).await? {
            self.cluster.adopt_topic(&existing.name, existing.id, existing.partitions);
            return Err(KelpError::TopicAlreadyExists);
        }
        self.deleted.borrow_mut().remove(name);
        let t = smq_topic(name);
        let resp = self
            .control("ConfigureTopic", move |mut c| {
                let t = t.clone();
                Box::pin(async move {
                    c.configure_topic(request(ConfigureTopicRequest {
                        topic: Some(t),
                        partition_count: partitions,
                        ..Default::default()
                    }))
                    .await
                    .map(tonic::Response::into_inner)
                })
            })
            .await
            .map_err(|s| storage("ConfigureTopic", s))?;
        if resp.broker_partition_assignments.len() != partitions as usize {
            return Err(storage(
                "ConfigureTopic",
                format!(
                    "asked for {partitions} partitions, got {}",
                    resp.broker_partition_assignments.len()
                ),
            ));
        }
        let info = topic_info(name, &resp.broker_partition_assignments);
        self.routes.borrow_mut().insert(
            name.to_string(),
            Route {
                assignments: resp.broker_partition_assignments,
                at: Instant::now(),
            },
        );
        tracing::info!(topic = name, partitions, "created SeaweedMQ topic {NAMESPACE}/{name}");
        Ok(info)
    }

    /// Kafka topics SeaweedMQ holds, with their partition counts.
    async fn list_topics(&self) -> Result<Vec<TopicInfo>, KelpError> {
        let resp = self
            .control("ListTopics", |mut c| {
                Box::pin(async move {
                    c.list_topics(request(ListTopicsRequest {}))
                        .await
                        .map(tonic::Response::into_inner)
                })
            })
            .await
            .map_err(|s| storage("ListTopics", s))?;
        let mut out = Vec::new();
        for t in resp.topics.into_iter().filter(|t| t.namespace == NAMESPACE) {
            if crate::cluster::validate_topic_name(&t.name).is_err() {
                continue;
            }
            if let Some(info) = self.lookup_topic(&t.name).await? {
                out.push(info);
            }
        }
        Ok(out)
    }

    /// Publishes SeaweedMQ's Kafka topics in the cluster metadata.
    async fn sync_topics(&self) -> Result<usize, KelpError> {
        let mut topics = self.list_topics().await?;
        self.deleted
            .borrow_mut()
            .retain(|_, at| at.elapsed() < DELETED_MEMORY);
        topics.retain(|t| !self.deleted.borrow().contains_key(&t.name));
        for t in &topics {
            self.cluster.adopt_topic(&t.name, t.id, t.partitions);
        }
        Ok(topics.len())
    }

    async fn delete_topic(&self, name: &str) -> Result<(), KelpError> {
        let mut f = self.filer_client()?;
        filer::delete(&mut f, &format!("/topics/{NAMESPACE}"), name, true)
            .await
            .map_err(|e| storage("deleting the topic directory", e))?;
        self.invalidate(name);
        self.publishers.borrow_mut().retain(|(t, _), _| t != name);
        self.deleted
            .borrow_mut()
            .insert(name.to_string(), Instant::now());
        Ok(())
    }

    async fn commit_offsets(
        &self,
        group: &str,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
    ) -> Result<(), KelpError> {
        let mut f = self.filer_client()?;
        for ((topic, p), o) in offsets {
            let dir = group_offsets::dir(group, &topic, p);
            let body = group_offsets::encode(o.offset, o.commit_timestamp_ms, &o.metadata);
            filer::write_file(&mut f, &dir, group_offsets::FILE_NAME, body)
                .await
                .map_err(|e| storage("writing a group offset", e))?;
        }
        Ok(())
    }

    async fn delete_offsets(&self, group: &str, tps: Vec<TopicPartition>) -> Result<(), KelpError> {
        let mut f = self.filer_client()?;
        for (topic, p) in tps {
            let dir = group_offsets::dir(group, &topic, p);
            filer::delete(&mut f, &dir, group_offsets::FILE_NAME, false)
                .await
                .map_err(|e| storage("deleting a group offset", e))?;
        }
        Ok(())
    }

    async fn delete_group(&self, group: &str) -> Result<(), KelpError> {
        let mut f = self.filer_client()?;
        filer::delete(&mut f, group_offsets::ROOT, group, true)
            .await
            .map_err(|e| storage("deleting a group", e))
    }

    /// Reads every `<root>/<group>/<topic>/<partition>/offset` file.
    async fn load_offsets(&self) -> Result<LoadedOffsets, KelpError> {
        let mut f = self.filer_client()?;
        let err = |e| storage("reading group offsets", e);
        let mut out = Vec::new();
        for g in filer::list(&mut f, group_offsets::ROOT).await.map_err(err)? {
            let gdir = format!("{}/{}", group_offsets::ROOT, g.name);
            for t in filer::list(&mut f, &gdir).await.map_err(err)? {
                let tdir = format!("{gdir}/{}", t.name);
                for p in filer::list(&mut f, &tdir).await.map_err(err)? {
                    let Ok(partition) = p.name.parse::<i32>() else {
                        continue;
                    };
                    let pdir = format!("{tdir}/{}", p.name);
                    let Some(body) = filer::read_file(&mut f, &pdir, group_offsets::FILE_NAME)
                        .await
                        .map_err(err)?
                    else {
                        continue;
                    };
                    match group_offsets::decode(&body) {
                        Ok(s) => out.push((
                            g.name.clone(),
                            (t.name.clone(), partition),
                            CommittedOffset {
                                offset: s.offset,
                                leader_epoch: -1,
                                metadata: s.metadata,
                                commit_timestamp_ms: s.committed_at_ms,
                            },
                        )),
                        Err(e) => tracing::warn!(path = %pdir, error = %e, "skipping an unreadable group offset"),
                    }
                }
            }
        }
        Ok(out)
    }

    /// Hands a publish to its partition's publisher, starting one when needed. Synchronous,
    /// so publishes reach a partition's stream in the order the shard sent them.
    fn publish(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        job: Job,
    ) {
        let key = (topic, partition);
        let mut pubs = self.publishers.borrow_mut();
        let job = match pubs.get(&key) {
            Some(tx) => match tx.send(job) {
                Ok(()) => return,
                // The publisher ended (its topic was deleted): start a new one.
                Err(mpsc::error::SendError(job)) => job,
            },
            None => job,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(job);
        pubs.insert(key.clone(), tx);
        tokio::task::spawn_local(publisher::run(self.clone(), key.0, key.1, rx));
    }

    fn dispatch(self: &Rc<Self>, cmd: Command) {
        let me = self.clone();
        match cmd {
            Command::Publish {
                topic,
                partition,
                batches,
                deadline,
                permit,
                reply,
            } => self.publish(topic, partition, Job::new(batches, deadline, permit, reply)),
            Command::Fetch {
                topic,
                partition,
                offset,
                max_bytes,
                end,
                reply,
            } => spawn(async move {
                let _ = reply.send(me.fetch(&topic, partition, offset, max_bytes, end).await);
            }),
            Command::Range {
                topic,
                partition,
                reply,
            } => spawn(async move {
                let _ = reply.send(me.range(&topic, partition).await);
            }),
            Command::CreateTopic {
                name,
                partitions,
                reply,
            } => spawn(async move {
                let _ = reply.send(me.create_topic(&name, partitions).await);
            }),
            Command::LookupTopic { name, reply } => spawn(async move {
                let _ = reply.send(me.lookup_topic(&name).await);
            }),
            Command::DeleteTopic { name, reply } => spawn(async move {
                let _ = reply.send(me.delete_topic(&name).await);
            }),
            Command::CommitOffsets {
                group,
                offsets,
                reply,
            } => spawn(async move {
                let _ = reply.send(me.commit_offsets(&group, offsets).await);
            }),
            Command::DeleteOffsets {
                group,
                partitions,
                reply,
            } => spawn(async move {
                let _ = reply.send(me.delete_offsets(&group, partitions).await);
            }),
            Command::DeleteGroup { group, reply } => spawn(async move {
                let _ = reply.send(me.delete_group(&group).await);
            }),
            Command::LoadOffsets { reply } => spawn(async move {
                let _ = reply.send(me.load_offsets().await);
            }),
        }
    }

    /// Keeps the cluster metadata in step with SeaweedMQ's topics, forever.
    async fn refresh_topics(self: Rc<Self>) {
        loop {
            tokio::time::sleep(self.s.topic_refresh).await;
            if let Err(e) = self.sync_topics().await {
                tracing::debug!(error = %e, "topic refresh failed");
            }
        }
    }

    async fn startup(&self) -> Result<usize, KelpError> {
        self.discover().await?;
        self.sync_topics().await
    }
}

fn spawn(f: impl std::future::Future<Output = ()> + 'static) {
    tokio::task::spawn_local(f);
}

/// The forwarder thread's main loop: connect (bounded wait), report readiness, then serve
/// commands until every shard is gone.
pub async fn run(
    settings: Settings,
    cluster: Arc<Cluster>,
    stats: Arc<ForwarderStats>,
    mut rx: mpsc::Receiver<Command>,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
) {
    let deadline = Instant::now() + settings.connect_timeout;
    let fwd = Rc::new(Forwarder::new(settings, cluster, stats.clone()));
    let mut logged = false;
    loop {
        match fwd.startup().await {
            Ok(n) => {
                tracing::info!(
                    brokers = ?fwd.brokers.borrow(),
                    filer = ?fwd.filer.borrow(),
                    topics = n,
                    "SeaweedMQ forwarder connected"
                );
                break;
            }
            Err(e) if Instant::now() < deadline => {
                if !logged {
                    tracing::warn!(error = %e, "waiting for SeaweedMQ");
                    logged = true;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => {
                let _ = ready.send(Err(e.to_string()));
                return;
            }
        }
    }
    let _ = ready.send(Ok(()));
    tokio::task::spawn_local(fwd.clone().refresh_topics());
    while let Some(cmd) = rx.recv().await {
        stats.queued.fetch_sub(1, Ordering::Relaxed);
        fwd.dispatch(cmd);
    }
    tracing::debug!("forwarder: every shard is gone");
}
