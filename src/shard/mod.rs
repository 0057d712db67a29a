//! A shard: one pinned core's executor state — the partitions it owns, its slice of the batch
//! cache budget, its connections and its links to the other shards.
//!
//! Requests arrive from `server/connection`; partition work runs here when this shard owns the
//! partition, or is shipped over glommio's channel mesh to the owner ([`Shard::scatter`]).
//! Group requests go to the group's coordinator shard the same way ([`Shard::group_call`]).
//! Calls `partition/` for state, `storage/` (through the [`Engine`] chosen at start-up) for
//! what lies behind the cache, `group/` for coordination and `cluster/` for the shared
//! metadata snapshot.

mod group_load;
mod lead;
pub mod ops;
pub mod security;
pub mod share;
pub mod storage;
pub mod topics;
pub mod txn;
mod txn_sync;

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use futures::StreamExt;
use glommio::channels::channel_mesh::{Receivers, Senders};

use crate::cluster::key::key;
use crate::cluster::{routing, Cluster};
use crate::config::Config;
use crate::error::KelpError;
use crate::group::{Coordinator, GroupConfig, GroupReply, GroupRequest, OffsetStore};
use crate::metrics::ShardStats;
use crate::partition::Partition;
use crate::storage::Engine;
use ops::WaitItem;
pub use ops::{Op, ShardMsg};

/// The topic's name is shared between the map and the eviction order, so an append makes no
/// key; lookups take a borrowed [`key`].
type PartitionKey = (Rc<str>, i32);

/// One core's broker state. Shared by the tasks of that core through `Rc`.
pub struct Shard {
    /// Logical shard index (the executor's position in the channel mesh).
    pub id: usize,
    /// Number of shards.
    pub count: usize,
    /// The broker's configuration.
    pub config: Arc<Config>,
    /// The shared topic metadata.
    pub cluster: Arc<Cluster>,
    partitions: RefCell<HashMap<PartitionKey, Partition>>,
    /// Append order of cached batches across this shard's partitions, for eviction: each
    /// entry covers a partition's batches up to and including its last offset, however many
    /// batches one append made visible (a group-commit round can add hundreds at once).
    eviction: RefCell<VecDeque<(PartitionKey, i64)>>,
    cached_bytes: Cell<usize>,
    peers: Senders<ShardMsg>,
    /// Open client connections on this core.
    pub connections: Cell<usize>,
    /// The consumer groups this shard coordinates.
    pub groups: Coordinator,
    /// Groups whose offsets were read since they last moved here, and the reads under way
    /// (several nodes only).
    group_loads: group_load::GroupLoads,
    /// Counters and latencies exported on `--metrics-addr`.
    pub stats: Arc<ShardStats>,
    /// The storage engine behind the caches, chosen at start-up.
    pub engine: Arc<dyn Engine>,
    /// The transactional ids this shard coordinates, by id.
    txns: RefCell<HashMap<String, crate::txn::TxnMeta>>,
    /// Transactional ids with an operation under way.
    txn_busy: RefCell<std::collections::HashSet<String>>,
    /// Operations waiting for a busy transactional id.
    txn_waiters: RefCell<HashMap<String, Vec<futures::channel::oneshot::Sender<()>>>>,
    /// This node's broker configs under Kafka's names, built at the first DescribeConfigs
    /// (the configuration does not change while the process runs; building them resolves
    /// listener addresses, which may ask DNS).
    broker_configs: std::cell::OnceCell<Vec<crate::cluster::broker_config::BrokerConfig>>,
}

impl Shard {
    /// This node's broker configs under Kafka's names (DescribeConfigs), built once.
    pub fn broker_configs(&self) -> &[crate::cluster::broker_config::BrokerConfig] {
        self.broker_configs
            .get_or_init(|| crate::cluster::broker_config::broker_configs(&self.config, self.count))
    }
}

/// How often group timers (sessions, rebalance delays and timeouts) are checked.
const GROUP_TICK: Duration = Duration::from_millis(50);

impl Shard {
    /// State for the shard at mesh position `peers.peer_id()`, with its group offsets store
    /// and the storage engine.
    pub fn new(
        config: Arc<Config>,
        cluster: Arc<Cluster>,
        peers: Senders<ShardMsg>,
        core: usize,
        offsets: Rc<dyn OffsetStore>,
        engine: Arc<dyn Engine>,
    ) -> Self {
        let stats = Arc::new(ShardStats::new(peers.peer_id(), core));
        // Engine code records its latencies into this core's stats (see metrics::storage).
        crate::metrics::storage::set_current(stats.storage.clone());
        let offsets: Rc<dyn OffsetStore> = Rc::new(crate::group::MeteredOffsets::new(
            offsets,
            stats.group_offsets.clone(),
        ));
        Shard {
            stats,
            id: peers.peer_id(),
            count: peers.nr_consumers().max(1),
            config: config.clone(),
            cluster,
            partitions: RefCell::new(HashMap::new()),
            eviction: RefCell::new(VecDeque::new()),
            cached_bytes: Cell::new(0),
            peers,
            connections: Cell::new(0),
            engine,
            txns: RefCell::new(HashMap::new()),
            txn_busy: RefCell::new(std::collections::HashSet::new()),
            txn_waiters: RefCell::new(HashMap::new()),
            broker_configs: std::cell::OnceCell::new(),
            group_loads: group_load::GroupLoads::default(),
            groups: Coordinator::new(
                GroupConfig {
                    initial_rebalance_delay: Duration::from_millis(
                        config.group_initial_rebalance_delay_ms,
                    ),
                    min_session_timeout_ms: config.group_min_session_timeout_ms,
                    max_session_timeout_ms: config.group_max_session_timeout_ms,
                    consumer: crate::group::consumer::ConsumerConfig {
                        session_timeout: Duration::from_millis(
                            config.group_consumer_session_timeout_ms,
                        ),
                        heartbeat_interval: Duration::from_millis(
                            config.group_consumer_heartbeat_interval_ms,
                        ),
                        max_size: config.group_consumer_max_size.max(1),
                    },
                    share: Default::default(),
                },
                offsets,
            ),
        }
    }

    fn set_cached(&self, bytes: usize) {
        self.cached_bytes.set(bytes);
        self.stats
            .cache_bytes
            .store(bytes as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// Bytes held by this shard's batch caches.
    pub fn cached_bytes(&self) -> usize {
        self.cached_bytes.get()
    }

    /// Owner shard of a partition.
    pub fn owner(&self, topic: &str, partition: i32) -> usize {
        routing::owner(topic, partition, self.count)
    }

    /// Runs `f` on a partition this shard owns, creating its state on first use. Fails for
    /// partitions the metadata does not know; state of a deleted-and-recreated topic is reset.
    pub fn with_partition<R>(
        &self,
        topic: &str,
        partition: i32,
        f: impl FnOnce(&mut Partition) -> R,
    ) -> Result<R, KelpError> {
        let meta = self
            .cluster
            .topic(topic)
            .ok_or(KelpError::UnknownTopicOrPartition)?;
        if partition < 0 || partition >= meta.partitions {
            return Err(KelpError::UnknownTopicOrPartition);
        }
        let mut parts = self.partitions.borrow_mut();
        if !parts.contains_key(key(&(topic, partition))) {
            let p = self.new_partition(topic, partition, &meta);
            self.stats
                .partitions
                .add(topic, partition, p.gauges().clone());
            parts.insert((Rc::from(topic), partition), p);
        }
        let Some(p) = parts.get_mut(key(&(topic, partition))) else {
            return Err(KelpError::UnknownTopicOrPartition);
        };
        if p.topic_id != meta.id {
            p.store().remove();
            let fresh = self.new_partition(topic, partition, &meta);
            self.replace_partition(p, fresh);
        }
        let out = f(p);
        // Every change to a partition's offsets goes through here (or evict_over_budget).
        p.publish_gauges(false);
        Ok(out)
    }

    /// Puts `fresh` state in place of a partition's, waking its waiters and releasing its
    /// cache from this shard's account.
    fn replace_partition(&self, p: &mut Partition, fresh: Partition) {
        let freed = p.cached_bytes();
        p.wake_all();
        let gauges = p.gauges().clone();
        *p = fresh;
        // The published series stays the partition's; the fresh state shows in it.
        p.adopt_gauges(gauges);
        self.set_cached(self.cached_bytes.get().saturating_sub(freed));
    }

    /// Fresh state for a partition with no data yet.
    fn new_partition(
        &self,
        topic: &str,
        partition: i32,
        meta: &crate::cluster::TopicMeta,
    ) -> Partition {
        let mut p = Partition::new(meta.id, self.engine.open(topic, partition, meta));
        p.epoch = self.cluster.ownership.lead(topic, partition).unwrap_or(-1);
        self.seed_producers(&mut p, topic, partition);
        p
    }

    /// Accounts `added` cache bytes of a partition and enforces the cache budget.
    fn cached(&self, topic: &str, partition: i32, added: usize) {
        if added == 0 {
            // A duplicate retry: nothing new is cached, so nothing joins the eviction order.
            return;
        }
        // Published by the eviction below: a scrape must never see the cache over budget.
        self.cached_bytes.set(self.cached_bytes.get() + added);
        let entry = self
            .partitions
            .borrow()
            .get_key_value(key(&(topic, partition)))
            .and_then(|(k, p)| Some((k.clone(), p.cached_last_offset()?)));
        if let Some(entry) = entry {
            self.eviction.borrow_mut().push_back(entry);
        }
        self.evict_over_budget();
    }

    /// Evicts the oldest batches of this shard until the cache fits its budget.
    fn evict_over_budget(&self) {
        let budget = self.config.cache_bytes_per_core;
        let mut order = self.eviction.borrow_mut();
        let mut parts = self.partitions.borrow_mut();
        let mut held = self.cached_bytes.get();
        while held > budget {
            let Some((key, through)) = order.pop_front() else {
                // Every cached batch has an entry, so this is a bookkeeping slip: log it
                // rather than spin or trust the count.
                tracing::warn!(held, budget, "cache over budget with nothing left to evict");
                break;
            };
            if let Some(p) = parts.get_mut(&key) {
                held = held.saturating_sub(p.evict_through(through));
                // Engines that keep nothing below the cache moved the log start.
                p.publish_gauges(false);
            }
        }
        self.set_cached(held);
    }

    /// Drops a deleted topic's partitions owned here.
    fn drop_topic(&self, topic: &str) {
        let mut parts = self.partitions.borrow_mut();
        let mut freed = 0;
        parts.retain(|(t, _), p| {
            if &**t == topic {
                freed += p.cached_bytes();
                p.wake_all();
                p.store().remove();
                false
            } else {
                true
            }
        });
        self.set_cached(self.cached_bytes.get().saturating_sub(freed));
        self.eviction
            .borrow_mut()
            .retain(|((t, _), _)| &**t != topic);
        self.stats.partitions.remove_where(|t, _| t == topic);
    }

    /// Tells every shard (this one included) that a topic is gone.
    pub async fn broadcast_drop_topic(&self, topic: &str) {
        self.drop_topic(topic);
        for peer in (0..self.count).filter(|&s| s != self.id) {
            if let Err(e) = self
                .peers
                .send_to(peer, ShardMsg::DropTopic(topic.to_string()))
                .await
            {
                tracing::warn!(peer, error = %e, "could not tell shard about a deleted topic");
            }
        }
    }

    /// Runs per-partition items on their owning shards and returns the results in item order.
    pub async fn scatter<O: Op>(&self, items: Vec<O>) -> Vec<O::Out> {
        self.scatter_ordered(items, || ()).await
    }

    /// [`Shard::scatter`], calling `started` once every item has reached its owner in order:
    /// peers' items are on the mesh (each peer starts its messages in arrival order) and the
    /// local items have run up to their first wait (an append is queued by then). A
    /// connection uses it to start its next request while this one waits for the disk.
    pub async fn scatter_ordered<O: Op>(
        &self,
        items: Vec<O>,
        started: impl FnOnce(),
    ) -> Vec<O::Out> {
        let total = items.len();
        let mut groups: Vec<(Vec<usize>, Vec<O>)> =
            (0..self.count).map(|_| (Vec::new(), Vec::new())).collect();
        for (i, it) in items.into_iter().enumerate() {
            let (t, p) = it.key();
            let g = &mut groups[self.owner(t, p)];
            g.0.push(i);
            g.1.push(it);
        }
        let mut out: Vec<Option<O::Out>> = (0..total).map(|_| None).collect();
        let mut pending = Vec::new();
        let mut local = None;
        for (shard, (idx, its)) in groups.into_iter().enumerate() {
            if its.is_empty() {
                continue;
            }
            if shard == self.id {
                local = Some((idx, its));
                continue;
            }
            let (tx, rx) = oneshot::channel();
            self.stats
                .forwarded_items
                .fetch_add(its.len() as u64, std::sync::atomic::Ordering::Relaxed);
            match self.peers.send_to(shard, O::into_msg(its, tx)).await {
                Ok(()) => pending.push((idx, rx)),
                Err(_) => {
                    for i in idx {
                        out[i] = Some(O::failed(KelpError::ShardUnavailable(shard)));
                    }
                }
            }
        }
        // Local items run while the peers work on theirs.
        if let Some((idx, its)) = local {
            let mut run = O::run(self, its);
            let first = futures::poll!(&mut run);
            started();
            let res = match first {
                std::task::Poll::Ready(res) => res,
                std::task::Poll::Pending => run.await,
            };
            for (i, r) in idx.into_iter().zip(res) {
                out[i] = Some(r);
            }
        } else {
            started();
        }
        for (idx, rx) in pending {
            match rx.await {
                Ok(res) => {
                    for (i, r) in idx.into_iter().zip(res) {
                        out[i] = Some(r);
                    }
                }
                Err(_) => {
                    for i in idx {
                        out[i] = Some(O::failed(KelpError::ShardUnavailable(usize::MAX)));
                    }
                }
            }
        }
        out.into_iter()
            .map(|o| o.unwrap_or_else(|| O::failed(KelpError::ShardUnavailable(usize::MAX))))
            .collect()
    }

    /// Waits until any owned partition among `items` has data past its offset (or an error to
    /// report), or until `deadline`.
    async fn wait_local(&self, items: &[WaitItem], deadline: Instant) {
        loop {
            let mut listeners = Vec::with_capacity(items.len());
            let mut ready = false;
            for it in items {
                // Listen before checking, so an append between the two is not missed.
                match self.with_partition(&it.topic, it.partition, |p| {
                    let l = p.listen();
                    (p.has_data_for(it.offset), l)
                }) {
                    Ok((has, l)) => {
                        ready |= has;
                        listeners.push(l);
                    }
                    Err(_) => ready = true,
                }
            }
            let now = Instant::now();
            if ready || listeners.is_empty() || now >= deadline {
                return;
            }
            let timer = glommio::timer::sleep(deadline - now);
            let any = futures::future::select_all(listeners.into_iter().map(Box::pin));
            futures::future::select(Box::pin(timer), any).await;
        }
    }

    /// Waits until any partition among `items`, on any shard, has data past its offset, or
    /// until `deadline`. Returns as soon as one owner reports data.
    pub async fn wait_any(&self, items: Vec<WaitItem>, deadline: Instant) {
        let mut groups: Vec<Vec<WaitItem>> = (0..self.count).map(|_| Vec::new()).collect();
        for it in items {
            let s = self.owner(&it.topic, it.partition);
            groups[s].push(it);
        }
        let mut waits: Vec<futures::future::LocalBoxFuture<'_, ()>> = Vec::new();
        for (shard, g) in groups.into_iter().enumerate() {
            if g.is_empty() {
                continue;
            }
            if shard == self.id {
                waits.push(Box::pin(async move { self.wait_local(&g, deadline).await }));
            } else {
                let (tx, rx) = oneshot::channel();
                if self
                    .peers
                    .send_to(shard, ShardMsg::Wait(g, deadline, tx))
                    .await
                    .is_ok()
                {
                    waits.push(Box::pin(async move {
                        let _ = rx.await;
                    }));
                }
            }
        }
        if waits.is_empty() {
            return;
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        let timer = glommio::timer::sleep(remaining + Duration::from_millis(5));
        futures::future::select(Box::pin(timer), futures::future::select_all(waits)).await;
    }

    /// Coordinator shard of a group.
    pub fn group_owner(&self, group_id: &str) -> usize {
        routing::group_owner(group_id, self.count)
    }

    /// Sends a group request to shard `shard` (this one included) and awaits its reply.
    pub async fn group_call_on(&self, shard: usize, req: GroupRequest) -> GroupReply {
        if shard == self.id {
            return self.serve_group(req).await;
        }
        let (tx, rx) = oneshot::channel();
        if self
            .peers
            .send_to(shard, ShardMsg::Group(req, tx))
            .await
            .is_err()
        {
            return GroupReply::Unavailable;
        }
        rx.await.unwrap_or(GroupReply::Unavailable)
    }

    /// Runs a request on the coordinator shard of its group.
    pub async fn group_call(&self, req: GroupRequest) -> GroupReply {
        let shard = req.group_id().map_or(self.id, |g| self.group_owner(g));
        self.group_call_on(shard, req).await
    }

    /// Drives the timers of this shard's groups, and drops the state of partitions another
    /// node took over, forever.
    pub async fn run_group_timers(self: Rc<Self>) {
        let (mut led, mut placed) = (0, 0);
        let mut ticks: u32 = 0;
        loop {
            glommio::timer::sleep(GROUP_TICK).await;
            self.groups.tick(Instant::now());
            // Record locks last seconds: looked at every tenth tick; idle share groups'
            // state leaves memory about every ten seconds.
            ticks = ticks.wrapping_add(1);
            if ticks.is_multiple_of(10) {
                self.share_tick(ticks.is_multiple_of(200)).await;
            }
            // Partitions and groups another node took over free their state here, not on
            // next use.
            led = self.drop_unled(led);
            placed = self.drop_moved_groups(placed);
        }
    }

    /// Serves requests from peer shards until the mesh closes.
    pub async fn serve_peers(self: Rc<Self>, mut receivers: Receivers<ShardMsg>) {
        let streams = receivers.streams();
        let mut tasks = Vec::new();
        for (peer, stream) in streams {
            let shard = self.clone();
            tasks.push(glommio::spawn_local(async move {
                let mut stream = stream;
                while let Some(msg) = stream.next().await {
                    shard.clone().handle_peer(msg);
                }
                tracing::debug!(peer, "peer link closed");
            }));
        }
        futures::future::join_all(tasks).await;
    }

    fn handle_peer(self: Rc<Self>, msg: ShardMsg) {
        match msg {
            // Partition ops may wait for the disk: never block the peer link on them.
            ShardMsg::Produce(items, reply) => spawn_reply(self, items, reply),
            ShardMsg::Read(items, reply) => spawn_reply(self, items, reply),
            ShardMsg::ListOffsets(items, reply) => spawn_reply(self, items, reply),
            ShardMsg::DeleteRecords(items, reply) => spawn_reply(self, items, reply),
            ShardMsg::Producers(items, reply) => spawn_reply(self, items, reply),
            ShardMsg::Wait(items, deadline, reply) => {
                glommio::spawn_local(async move {
                    self.wait_local(&items, deadline).await;
                    let _ = reply.send(());
                })
                .detach();
            }
            ShardMsg::DropTopic(topic) => self.drop_topic(&topic),
            ShardMsg::Group(req, reply) => {
                // Joins and syncs wait for the rebalance: never block the peer link on them.
                glommio::spawn_local(async move {
                    let _ = reply.send(self.serve_group(req).await);
                })
                .detach();
            }
            ShardMsg::Txn(req, reply) => {
                // Ending a transaction waits for its markers.
                glommio::spawn_local(async move {
                    let _ = reply.send(self.serve_txn(req).await);
                })
                .detach();
            }
        }
    }
}

/// Runs a peer's partition op on this shard in its own task and sends the results back.
fn spawn_reply<O: Op>(shard: Rc<Shard>, items: Vec<O>, reply: oneshot::Sender<Vec<O::Out>>) {
    glommio::spawn_local(async move {
        let _ = reply.send(O::run(&shard, items).await);
    })
    .detach();
}

#[cfg(test)]
mod cross_core_tests;

#[cfg(test)]
mod cache_tests;

#[cfg(test)]
mod fault_tests;

#[cfg(test)]
mod local_shard_tests;

#[cfg(test)]
mod metrics_tests;

#[cfg(test)]
mod remote_read_tests;
