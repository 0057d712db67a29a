//! The forwarder's connections: discovery (master `ListClusterNodes` or fixed lists), gRPC
//! channels per broker, control-plane calls with retries, partition routes
//! (`LookupTopicBrokers`, cached, dropped on NOT_LEADER), command dispatch, the main loop and
//! the shutdown drain. Runs on the forwarder thread only (single-threaded tokio runtime and
//! `LocalSet`). Publishing ([`super::publisher`]), reads ([`super::reads`]), topics
//! ([`super::topics`]) and group offsets ([`super::filer_offsets`]) build on it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::LocalBoxFuture;
use kelp_storage_client::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use kelp_storage_client::pb::messaging_pb::seaweed_messaging_client::SeaweedMessagingClient;
use kelp_storage_client::pb::messaging_pb::{BrokerPartitionAssignment, LookupTopicBrokersRequest};
use kelp_storage_client::pb::schema_pb;
use kelp_storage_client::{addr, discovery, ring};
use tokio::sync::mpsc;
use tonic::transport::{Channel, Endpoint};

use super::publisher::{self, Job};
use super::topics::smq_topic;
use super::Command;
use crate::cluster::Cluster;
use crate::config::Config;
use crate::error::KelpError;
use crate::metrics::ForwarderStats;

/// The namespace of every Kafka topic in SeaweedMQ.
pub const NAMESPACE: &str = "kafka";

/// How long a partition route is trusted (the brokers cache theirs as long).
const ROUTE_TTL: Duration = Duration::from_secs(30);

/// How long after SeaweedMQ's last acknowledgement a shutdown keeps the publish streams open:
/// brokers checkpoint partition offsets every 2 s (see [`super::ForwarderHandle::drain`]).
pub const CHECKPOINT_GRACE: Duration = Duration::from_millis(2500);

/// How long a broker takes to flush and unload a partition after its last publisher left
/// (about 1 s measured with weed 4.48).
pub const UNLOAD_GRACE: Duration = Duration::from_millis(1500);

/// How long a control-plane call keeps trying brokers that cannot answer.
const CONTROL_RETRY: Duration = Duration::from_secs(10);

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
    /// How often SeaweedMQ's topic list is read into the cluster metadata, so topics made
    /// by other gateways appear.
    pub topic_refresh: Duration,
    /// How long start-up waits for SeaweedMQ before giving up.
    pub connect_timeout: Duration,
    /// This node, as it registers among the Kelp nodes over this SeaweedMQ.
    pub me: super::membership::Me,
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
        let default = c
            .listeners()
            .map_err(anyhow::Error::msg)?
            .into_iter()
            .next()
            .ok_or_else(|| anyhow::anyhow!("no listener"))?;
        Ok(Settings {
            master,
            brokers,
            filer,
            filer_http: c.seaweedmq_filer.as_deref().map(addr::http_host_port),
            topic_refresh: Duration::from_millis(c.seaweedmq_topic_refresh_ms.max(100)),
            connect_timeout: Duration::from_millis(c.seaweedmq_connect_timeout_ms),
            me: super::membership::Me {
                node_id: c.node_id,
                host: default.advertised_host,
                port: i32::from(default.advertised_port),
                colocated: c.seaweedmq_colocated_broker.clone(),
            },
        })
    }
}

pub(super) struct Route {
    pub(super) assignments: Vec<BrokerPartitionAssignment>,
    pub(super) at: Instant,
}

/// Where a Kafka partition lives in SeaweedMQ.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The SeaweedMQ topic (`kafka/<name>`).
    pub topic: schema_pb::Topic,
    /// The ring range that is this Kafka partition.
    pub partition: schema_pb::Partition,
    /// The broker leading that range: publishes and reads go to it.
    pub leader: String,
}

/// The forwarder's connections and caches.
pub struct Forwarder {
    pub(super) s: Settings,
    pub(super) cluster: Arc<Cluster>,
    /// Its counters, shared with `/metrics`.
    pub stats: Arc<ForwarderStats>,
    pub(super) brokers: RefCell<Vec<String>>,
    pub(super) control: Cell<usize>,
    pub(super) filer: RefCell<Option<String>>,
    /// The filer's HTTP address ("host:port"), for reading log files.
    pub(super) filer_http: RefCell<Option<String>>,
    pub(super) log_files: super::filer_log::LogFiles,
    pub(super) channels: RefCell<HashMap<String, Channel>>,
    pub(super) routes: RefCell<HashMap<String, Route>>,
    /// One publisher task per partition, fed over its channel.
    pub(super) publishers: RefCell<HashMap<(String, i32), mpsc::UnboundedSender<Job>>>,
    /// The publisher tasks, to wait for one to finish when its partition is given up.
    pub(super) publisher_tasks: RefCell<HashMap<(String, i32), tokio::task::JoinHandle<()>>>,
    /// When SeaweedMQ last acknowledged a record.
    pub last_ack: Cell<Option<Instant>>,
    /// Publisher tasks running.
    pub active_publishers: Cell<usize>,
    /// Topics this Kelp deleted, and when: brokers may list them from memory for a while,
    /// so the topic refresh must not bring them back.
    pub(super) deleted: RefCell<HashMap<String, Instant>>,
    /// Logical log starts read or set (see [`super::log_start`]).
    pub(super) log_starts: RefCell<HashMap<(String, i32), i64>>,
    /// This node's lease among the Kelp nodes ([`super::membership`]).
    pub(super) lease: RefCell<Option<kelp_storage_client::lock::Lease>>,
    /// Set once the node leaves (clean stop): the lease is no longer renewed.
    pub(super) leaving: Cell<bool>,
    /// Tells the ownership loop to give every partition up (clean stop).
    pub(super) stop_owning: tokio::sync::Notify,
    /// Fired by the ownership loop once it has given everything up.
    pub(super) owning_stopped: tokio::sync::Notify,
    /// Take-overs running (None) or failed and waiting until then (Some).
    pub(super) taking: RefCell<HashMap<super::ownership::Key, Option<Instant>>>,
    /// Failed take-overs in a row per partition, for their backoff.
    pub(super) take_failures: RefCell<HashMap<super::ownership::Key, u32>>,
    /// Slots for take-overs a request waits for: never queued behind background ones.
    pub(super) asked_slots: Arc<tokio::sync::Semaphore>,
    /// Slots for take-overs running at once.
    pub(super) take_slots: Arc<tokio::sync::Semaphore>,
    /// The partitions this node leads, with their leases ([`super::ownership`]).
    pub(super) tenures: RefCell<HashMap<super::ownership::Key, super::ownership::Tenure>>,
    /// Fired when the live nodes changed: the ownership loop runs a round at once.
    pub(super) placement_moved: tokio::sync::Notify,
    /// What the topic refresh saw ([`super::topic_refresh`]).
    pub(super) topic_seen: RefCell<super::topic_refresh::Seen>,
}

/// How long a deleted topic stays out of the topic refresh.
pub(super) const DELETED_MEMORY: Duration = Duration::from_secs(300);

pub(super) fn storage(what: &str, e: impl std::fmt::Display) -> KelpError {
    KelpError::Storage(format!("SeaweedMQ {what}: {e}"))
}

/// SeaweedMQ could not answer now (unreachable, no leader yet): callers may retry.
pub(super) fn unavailable(what: &str, e: impl std::fmt::Display) -> KelpError {
    KelpError::StorageUnavailable(format!("SeaweedMQ {what}: {e}"))
}

/// A status that says the peer could not be reached (as opposed to an answer).
pub(super) fn is_transport(s: &tonic::Status) -> bool {
    matches!(
        s.code(),
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
    )
}

pub(super) fn request<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(CALL_TIMEOUT);
    r
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
            publisher_tasks: RefCell::new(HashMap::new()),
            deleted: RefCell::new(HashMap::new()),
            log_starts: RefCell::new(HashMap::new()),
            lease: RefCell::new(None),
            leaving: Cell::new(false),
            stop_owning: tokio::sync::Notify::new(),
            owning_stopped: tokio::sync::Notify::new(),
            placement_moved: tokio::sync::Notify::new(),
            topic_seen: RefCell::new(Default::default()),
            tenures: RefCell::new(HashMap::new()),
            taking: RefCell::new(HashMap::new()),
            take_failures: RefCell::new(HashMap::new()),
            asked_slots: Arc::new(tokio::sync::Semaphore::new(super::ownership::TAKING)),
            take_slots: Arc::new(tokio::sync::Semaphore::new(super::ownership::TAKING)),
            last_ack: Cell::new(None),
            active_publishers: Cell::new(0),
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

    pub(super) fn filer_client(&self) -> Result<SeaweedFilerClient<Channel>, KelpError> {
        let f = self
            .filer
            .borrow()
            .clone()
            .ok_or_else(|| storage("filer", "no filer known"))?;
        Ok(SeaweedFilerClient::new(self.channel(&f)?))
    }

    /// Refreshes broker and filer addresses from the master (when one is configured).
    pub(super) async fn discover(&self) -> Result<(), KelpError> {
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
            *self.filer_http.borrow_mut() = Some(addr::http_host_port(f));
        }
        *self.brokers.borrow_mut() = brokers;
        Ok(())
    }

    /// Runs a control-plane call on some broker (any broker proxies to the balancer),
    /// moving on to the next broker, re-discovered, when one cannot be reached or has no
    /// balancer yet (right after a broker restart), for at most [`CONTROL_RETRY`].
    pub(super) async fn control<T>(
        &self,
        what: &str,
        f: impl Fn(SeaweedMessagingClient<Channel>) -> LocalBoxFuture<'static, Result<T, tonic::Status>>,
    ) -> Result<T, tonic::Status> {
        let deadline = Instant::now() + CONTROL_RETRY;
        let mut last = tonic::Status::unavailable("no mq broker known");
        for attempt in 0.. {
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
            if Instant::now() >= deadline {
                break;
            }
            if let Err(e) = self.discover().await {
                tracing::debug!(error = %e, "re-discovery failed");
            }
            tokio::time::sleep(Duration::from_millis(100 * (attempt as u64 + 1).min(5))).await;
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
                            unavailable("LookupTopicBrokers", s)
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
        let partition = a.partition.ok_or(KelpError::UnknownTopicOrPartition)?;
        if a.leader_broker.is_empty() {
            // With two brokers, weed 4.48 leaves a dead leader's partitions without one until
            // a broker returns.
            return Err(unavailable("route", "partition has no leader"));
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

    /// Hands a publish to its partition's publisher, starting one when needed. Synchronous,
    /// so publishes reach a partition's stream in the order the shard sent them.
    fn publish(self: &Rc<Self>, topic: String, partition: i32, job: Job) {
        // The fence: once this node gives a partition up (or its lease nears expiry) nothing
        // more of it is sent, even what a shard let through just before. Checked here, on
        // the thread that gives partitions up, so it orders with the give-up.
        if let Err(e) = self.cluster.ownership.lead(&topic, partition) {
            job.refuse(e);
            return;
        }
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
        let task = tokio::task::spawn_local(publisher::run(self.clone(), key.0.clone(), key.1, rx));
        self.publisher_tasks.borrow_mut().insert(key, task);
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
                deadline,
                reply,
            } => spawn(async move {
                let r = match me.range_until(&topic, partition, deadline).await {
                    Ok((earliest, hwm)) => me
                        .log_start(&topic, partition)
                        .await
                        .map(|start| (earliest.max(start).min(hwm), hwm)),
                    Err(e) => Err(e),
                };
                let _ = reply.send(r);
            }),
            Command::SetLogStart {
                topic,
                partition,
                offset,
                reply,
            } => spawn(async move {
                let _ = reply.send(me.set_log_start(&topic, partition, offset).await);
            }),
            Command::LoadTxns {
                topic,
                partition,
                reply,
            } => spawn(async move {
                let _ = reply.send(me.load_txns(&topic, partition).await);
            }),
            Command::SaveTxns {
                topic,
                partition,
                checkpoint,
                reply,
            } => spawn(async move {
                let _ = reply.send(me.save_txns(&topic, partition, checkpoint).await);
            }),
            Command::CreateTopic {
                name,
                partitions,
                configs,
                reply,
            } => spawn(async move {
                let _ = reply.send(me.create_topic(&name, partitions, configs).await);
            }),
            Command::FlushedFiles {
                topic,
                partition,
                reply,
            } => spawn(async move {
                let _ = reply.send(me.flushed_files(&topic, partition).await);
            }),
            Command::AllocateProducerIds { n, reply } => spawn(async move {
                let _ = reply.send(me.allocate_producer_ids(n).await);
            }),
            Command::SetTopicConfigs {
                name,
                configs,
                reply,
            } => spawn(async move {
                let _ = reply.send(me.set_topic_configs(&name, &configs).await);
            }),
            Command::Records { space, reply } => spawn(async move {
                let _ = reply.send(me.records(&space).await);
            }),
            Command::PutRecord {
                space,
                name,
                value,
                reply,
            } => spawn(async move {
                let _ = reply.send(me.put_record(&space, &name, value).await);
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
            Command::LoadOffsets { owns, reply } => spawn(async move {
                let _ = reply.send(me.load_offsets(owns).await);
            }),
            Command::LoadGroupOffsets { group, reply } => spawn(async move {
                let _ = reply.send(me.load_group_offsets(&group).await);
            }),
            Command::Drain { reply } => spawn(async move {
                // This node leaves (its partitions first) as soon as nothing is in flight, so
                // the other nodes take its partitions while it waits out the checkpoint.
                while me.stats.inflight_bytes.load(Ordering::Relaxed) > 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                me.leave().await;
                me.drain().await;
                let _ = reply.send(());
            }),
        }
    }

    /// Waits until nothing is in flight and the last ack is [`CHECKPOINT_GRACE`] old, then
    /// closes the publish streams and gives the brokers a moment to unload the partitions, so
    /// a Kelp started next does not publish into a partition that is being unloaded (its
    /// records get "log buffer is stopping", and the reloaded partition may count again).
    async fn drain(&self) {
        loop {
            let busy = self.stats.inflight_bytes.load(Ordering::Relaxed) > 0;
            let recent = self
                .last_ack
                .get()
                .is_some_and(|t| t.elapsed() < CHECKPOINT_GRACE);
            if !busy && !recent {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let had = !self.publishers.borrow().is_empty();
        self.publishers.borrow_mut().clear();
        self.publisher_tasks.borrow_mut().clear();
        while self.active_publishers.get() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if had {
            tokio::time::sleep(UNLOAD_GRACE).await;
        }
    }

    async fn startup(&self) -> Result<usize, KelpError> {
        self.discover().await?;
        let topics = self.sync_topics().await?;
        // Read again with every topic refresh: a failure here only delays them.
        if let Err(e) = self.sync_group_configs().await {
            tracing::warn!(error = %e, "group configs not read yet");
        }
        Ok(topics)
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
    let me = fwd.s.me.clone();
    let (lease, owner) = match fwd.join(&me).await {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
            return;
        }
    };
    *fwd.lease.borrow_mut() = Some(lease.clone());
    // Ready once this node leads what placement gives it (one round of leases), so a lone
    // node serves its partitions from its first request.
    if let Err(e) = fwd.view().await {
        tracing::warn!(error = %e, "live nodes not read at start");
    }
    let (first_round, led) = tokio::sync::oneshot::channel();
    tokio::task::spawn_local(fwd.clone().keep_ownership(owner.clone(), first_round));
    let _ = tokio::time::timeout(Duration::from_secs(10), led).await;
    let _ = ready.send(Ok(()));
    tokio::task::spawn_local(fwd.clone().refresh_topics());
    tokio::task::spawn_local(fwd.clone().keep_membership(me, lease, owner));
    while let Some(cmd) = rx.recv().await {
        stats.queued.fetch_sub(1, Ordering::Relaxed);
        fwd.dispatch(cmd);
    }
    tracing::debug!("forwarder: every shard is gone");
}
