//! Per-core counters and latency histograms, served as Prometheus text on `--metrics-addr`,
//! and the broker's health on `/health`.
//!
//! Each shard owns one [`ShardStats`] and updates it on its own core (relaxed atomics; the
//! request histograms sit behind a mutex only the owner and the occasional scrape take; the
//! maps of partitions and group offsets behind one taken when a partition or group comes or
//! goes, a commit lands, or a scrape reads). The [`Registry`] lists every shard's stats so the
//! HTTP thread in [`http`] can read them while the broker runs; a scrape never calls into a
//! shard. Nothing here calls into the data path.

pub mod errors;
pub mod health;
pub mod http;
pub mod partitions;
pub mod process;
pub mod render;
pub mod storage;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;

/// Request kinds with their own latency histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Produce, whose latency includes the storage's durability wait.
    Produce = 0,
    /// Fetch, whose latency includes the long-poll wait.
    Fetch = 1,
    /// Everything else.
    Other = 2,
}

impl Kind {
    /// All kinds, in label order.
    pub const ALL: [Kind; 3] = [Kind::Produce, Kind::Fetch, Kind::Other];

    /// Label value.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Produce => "produce",
            Kind::Fetch => "fetch",
            Kind::Other => "other",
        }
    }
}

/// Largest latency recorded without clamping: one hour, in microseconds.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// One core's counters.
pub struct ShardStats {
    /// The shard's index (the `shard` label).
    pub shard: usize,
    /// The core it is pinned to (the `core` label).
    pub core: usize,
    /// Open client connections.
    pub connections: AtomicI64,
    /// Bytes held by the batch cache: the figure the cache budget is enforced on.
    pub cache_bytes: AtomicU64,
    /// Produce request bytes received (whole frames).
    pub produce_bytes: AtomicU64,
    /// Fetch response bytes sent.
    pub fetch_bytes: AtomicU64,
    /// Partition items (produce, fetch, offsets) this core handed to their owning core: the
    /// cross-core hops that `--advertise-shards` saves.
    pub forwarded_items: AtomicU64,
    /// Reads below the cache from a remote store that a Fetch stopped waiting for
    /// (`--remote-fetch-max-wait-ms`).
    pub remote_reads_expired: AtomicU64,
    /// Requests per Kind.
    pub requests: [AtomicU64; 3],
    /// Latency histograms per Kind, in microseconds.
    latency: Mutex<Vec<Histogram<u64>>>,
    /// Requests per Kafka API key.
    pub requests_by_api: [AtomicU64; errors::API_SLOTS],
    /// Set once the shard has bound its listeners and serves.
    pub serving: AtomicBool,
    /// When the shard's executor last ran its heartbeat task ([`health::mono_ms`]; 0: never).
    pub heartbeat_ms: AtomicU64,
    /// Storage engine latencies and failures of operations run on this core.
    pub storage: Arc<storage::StorageStats>,
    /// The partitions this shard owns, with their offsets and sizes.
    pub partitions: partitions::OwnedPartitions,
    /// Committed offsets of the consumer groups this shard coordinates.
    pub group_offsets: Arc<partitions::GroupOffsets>,
}

impl ShardStats {
    /// Zeroed stats for a shard on `core`.
    pub fn new(shard: usize, core: usize) -> Self {
        let hist = || Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("static bounds");
        ShardStats {
            shard,
            core,
            connections: AtomicI64::new(0),
            cache_bytes: AtomicU64::new(0),
            produce_bytes: AtomicU64::new(0),
            fetch_bytes: AtomicU64::new(0),
            forwarded_items: AtomicU64::new(0),
            remote_reads_expired: AtomicU64::new(0),
            requests: Default::default(),
            latency: Mutex::new(Kind::ALL.iter().map(|_| hist()).collect()),
            requests_by_api: [const { AtomicU64::new(0) }; errors::API_SLOTS],
            serving: AtomicBool::new(false),
            heartbeat_ms: AtomicU64::new(0),
            storage: Arc::default(),
            partitions: Default::default(),
            group_offsets: Arc::default(),
        }
    }

    /// Counts one request of API `api_key`.
    pub fn count_api(&self, api_key: i16) {
        if let Some(c) = usize::try_from(api_key)
            .ok()
            .and_then(|k| self.requests_by_api.get(k))
        {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The shard's executor is alive: called every [`health::HEARTBEAT_EVERY`] by a task of
    /// its own.
    pub fn beat(&self) {
        self.heartbeat_ms
            .store(health::mono_ms(), Ordering::Relaxed);
    }

    /// Records one served request.
    pub fn record(&self, kind: Kind, elapsed: Duration) {
        self.requests[kind as usize].fetch_add(1, Ordering::Relaxed);
        let us = (elapsed.as_micros() as u64).clamp(1, MAX_LATENCY_US);
        if let Ok(mut h) = self.latency.lock() {
            h[kind as usize].saturating_record(us);
        }
    }

    /// A copy of the latency histograms (for a scrape).
    pub fn latency_snapshot(&self) -> Vec<Histogram<u64>> {
        self.latency.lock().map(|h| h.clone()).unwrap_or_default()
    }
}

/// Counters of the SeaweedMQ forwarder, read by `/metrics`. Defined here rather than in
/// `forwarder` so that metrics depends on nothing of the data path; the forwarder updates them.
#[derive(Debug, Default)]
pub struct ForwarderStats {
    /// Commands sent by shards and not yet taken by the forwarder.
    pub queued: AtomicI64,
    /// Bytes of batches handed to the forwarder and not yet answered.
    pub inflight_bytes: AtomicI64,
    /// Records SeaweedMQ acknowledged.
    pub published_records: AtomicU64,
    /// Publish streams that broke or could not open.
    pub publish_errors: AtomicU64,
    /// Publish streams (re)opened.
    pub streams_opened: AtomicU64,
    /// Reads below the cache sent to SeaweedMQ (FetchMessage).
    pub fetch_requests: AtomicU64,
    /// Kelp nodes holding a lease over this SeaweedMQ (this one included).
    pub live_nodes: AtomicI64,
}

/// Every shard's stats, readable from any thread.
pub struct Registry {
    shards: Mutex<Vec<Arc<ShardStats>>>,
    forwarder: Mutex<Option<Arc<ForwarderStats>>>,
    request_memory: Mutex<Option<RequestMemoryGauge>>,
    /// The cores a shard will start on, once start-up launched them.
    expected_cores: Mutex<Vec<usize>>,
    /// Set when the broker starts to stop: `/health` answers 503 from then on.
    pub shutting_down: AtomicBool,
    /// Whether a stop was asked for (the signal handler's flag), read by `/health` so it
    /// answers 503 from the signal on, before the shards have noticed it.
    shutdown_probe: std::sync::OnceLock<fn() -> bool>,
    /// The storage engine whose operations `kelp_storage_latency_seconds` shows.
    storage_engine: Mutex<Option<&'static str>>,
    /// `--data-dir`, whose file system is reported.
    data_dir: Mutex<Option<PathBuf>>,
    /// When the process started, in seconds since the epoch.
    start_time_s: f64,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            shards: Mutex::default(),
            forwarder: Mutex::default(),
            request_memory: Mutex::default(),
            expected_cores: Mutex::default(),
            shutting_down: AtomicBool::new(false),
            shutdown_probe: std::sync::OnceLock::new(),
            storage_engine: Mutex::default(),
            data_dir: Mutex::default(),
            start_time_s: crate::clock::now_ms() as f64 / 1000.0,
        }
    }
}

/// Reads the broker-wide request memory: (bytes held, budget).
pub type RequestMemoryGauge = Arc<dyn Fn() -> (u64, u64) + Send + Sync>;

impl Registry {
    /// Adds a shard's stats.
    pub fn register(&self, stats: Arc<ShardStats>) {
        if let Ok(mut s) = self.shards.lock() {
            s.push(stats);
            s.sort_by_key(|x| x.shard);
        }
    }

    /// Adds the SeaweedMQ forwarder's counters.
    pub fn register_forwarder(&self, stats: Arc<ForwarderStats>) {
        if let Ok(mut f) = self.forwarder.lock() {
            *f = Some(stats);
        }
    }

    /// The forwarder's counters, when it runs.
    pub fn forwarder(&self) -> Option<Arc<ForwarderStats>> {
        self.forwarder.lock().ok().and_then(|f| f.clone())
    }

    /// Adds the broker-wide request memory gauge.
    pub fn register_request_memory(&self, gauge: RequestMemoryGauge) {
        if let Ok(mut g) = self.request_memory.lock() {
            *g = Some(gauge);
        }
    }

    /// The request memory gauge, once registered.
    pub fn request_memory(&self) -> Option<RequestMemoryGauge> {
        self.request_memory.lock().ok().and_then(|g| g.clone())
    }

    /// The registered stats, by shard id.
    pub fn shards(&self) -> Vec<Arc<ShardStats>> {
        self.shards.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Start-up launches a shard on each of `cores`: health waits for every one.
    pub fn expect_cores(&self, cores: &[usize]) {
        if let Ok(mut c) = self.expected_cores.lock() {
            *c = cores.to_vec();
        }
    }

    /// The cores a shard is launched on (empty before start-up launched them).
    pub fn expected_cores(&self) -> Vec<usize> {
        self.expected_cores
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default()
    }

    /// Tells the registry how to ask whether a stop was requested.
    pub fn set_shutdown_probe(&self, requested: fn() -> bool) {
        let _ = self.shutdown_probe.set(requested);
    }

    /// Whether the broker is stopping (asked to, or its shards already are).
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed) || self.shutdown_probe.get().is_some_and(|f| f())
    }

    /// Names the storage engine whose operation latencies are shown (`engine` label).
    pub fn set_storage_engine(&self, engine: &'static str) {
        if let Ok(mut e) = self.storage_engine.lock() {
            *e = Some(engine);
        }
    }

    /// The storage engine named by [`Self::set_storage_engine`].
    pub fn storage_engine(&self) -> Option<&'static str> {
        self.storage_engine.lock().ok().and_then(|e| *e)
    }

    /// The data directory whose file system is reported.
    pub fn set_data_dir(&self, dir: PathBuf) {
        if let Ok(mut d) = self.data_dir.lock() {
            *d = Some(dir);
        }
    }

    /// The data directory, once set.
    pub fn data_dir(&self) -> Option<PathBuf> {
        self.data_dir.lock().ok().and_then(|d| d.clone())
    }

    /// When the process started, in seconds since the epoch.
    pub fn start_time_s(&self) -> f64 {
        self.start_time_s
    }
}
