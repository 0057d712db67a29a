//! Configuration of the broker: command-line flags and the `--config` file.
//!
//! Owns the `kelp` flag set (parsed by clap) and the parsing of core lists;
//! [`file`](mod@file) reads a `--config` file into the same flags and [`print`](mod@print)
//! writes the effective set back out. Everything else reads the resulting [`Config`]; nothing
//! here touches the network, and only [`file`](mod@file) reads the disk (the one file it is
//! given).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

pub mod file;
pub mod listeners;
pub mod oauth;
pub mod print;

use listeners::{parse_endpoints, parse_protocol_map, EndpointList, ProtocolMap};
pub use listeners::{Listener, SecurityProtocol};

/// Largest read issued on a connection whose current frame is small (and the usual size of
/// its read buffer): big enough for many pipelined requests per syscall. Defined here, not in
/// `server`, because [`Config::check_request_budget`] sizes the request budget against it.
pub const READ_CHUNK: usize = 64 * 1024;

/// Which authorizer checks requests (`--authorizer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuthorizerKind {
    /// None: every client may do everything.
    None,
    /// Kafka's ACLs.
    Acl,
}

/// Where partition data lives besides the in-core batch cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StorageKind {
    /// Cache only: data lives in the per-core batch cache and is evicted (log start offset moves)
    /// when the cache budget is exceeded. For benchmarks and tests.
    Memory,
    /// The embedded durable log: segment files under `<data-dir>/topics/` (see docs/storage.md).
    Local,
    /// SeaweedMQ: a forwarder thread publishes to SeaweedFS's message queue over gRPC
    /// (`--seaweedmq-master`); Kafka topic `t` is SeaweedMQ topic `kafka/t`.
    Seaweedmq,
}

/// When appended data is flushed to stable storage (`--fsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// fdatasync before answering acks=-1 produces (coalesced per partition log).
    Always,
    /// fdatasync dirty logs every this many milliseconds; acks=-1 answers after the write.
    Interval(u64),
    /// Never fdatasync: the kernel flushes when it likes.
    Never,
}

/// Parses "always", "never" or "interval:MS".
pub fn parse_fsync(s: &str) -> Result<FsyncPolicy, String> {
    match s {
        "always" => Ok(FsyncPolicy::Always),
        "never" => Ok(FsyncPolicy::Never),
        other => match other.strip_prefix("interval:").map(str::parse::<u64>) {
            Some(Ok(ms)) if ms > 0 => Ok(FsyncPolicy::Interval(ms)),
            _ => Err(format!(
                "bad fsync policy '{other}': use always, never or interval:MS (MS > 0)"
            )),
        },
    }
}

/// `kelp` command-line flags.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "kelp",
    version,
    about = "Kelp: a Kafka-compatible, thread-per-core broker front-end"
)]
pub struct Config {
    /// TOML file of settings, one per flag: `key = value` with the flag's long name as key
    /// (`data-dir = "/var/lib/kelp"`), a list flag's value as a string or an array, a switch's
    /// as true or false. Flags given on the command line override the file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Print the effective configuration (as a file for --config, each setting's source in a
    /// comment) and exit without starting.
    #[arg(long)]
    pub print_config: bool,

    /// Address the Kafka listener binds on every shard core (SO_REUSEPORT).
    #[arg(long, default_value = "0.0.0.0:9092")]
    pub listen: SocketAddr,

    /// Host name clients are told to connect to (Metadata); defaults to the listen host,
    /// or 127.0.0.1 when listening on the wildcard address.
    #[arg(long)]
    pub advertised_host: Option<String>,

    /// Port clients are told to connect to; defaults to the listen port. (With
    /// `--advertise-shards` the shards' own ports are advertised instead.)
    #[arg(long)]
    pub advertised_port: Option<u16>,

    /// Also give every shard a port of its own and advertise each shard as a broker node
    /// (ids `--node-id` + shard index): Metadata names the owning shard leader of each
    /// partition and FindCoordinator the owning shard of each group, so clients send every
    /// request straight to the core that serves it, with no cross-core hop. The listen port
    /// stays the bootstrap address; every shard still serves any request sent to it.
    #[arg(long)]
    pub advertise_shards: bool,

    /// What clients speak on the listener (and the shard ports), as Kafka's listener security
    /// protocols: PLAINTEXT, SSL (TLS 1.2 and 1.3 with --ssl-certificate-file and
    /// --ssl-key-file), SASL_PLAINTEXT or SASL_SSL.
    #[arg(long, value_enum, default_value = "PLAINTEXT", ignore_case = true)]
    pub security_protocol: SecurityProtocol,

    /// Named listeners, as Kafka's `listeners`: "NAME://HOST:PORT,..." (empty HOST: every
    /// interface). A name that is not a security protocol takes its protocol from
    /// --listener-security-protocol-map. Replaces --listen, --security-protocol,
    /// --advertised-host and --advertised-port; the first listener is the default one.
    #[arg(long, value_parser = parse_endpoints,
        conflicts_with_all = ["listen", "security_protocol", "advertised_host", "advertised_port"])]
    pub listeners: Option<EndpointList>,

    /// What clients are told to connect to, per listener: "NAME://HOST:PORT,..." (as
    /// Kafka's `advertised.listeners`). A listener left out advertises its bind address
    /// (127.0.0.1 for every interface).
    #[arg(long, value_parser = parse_endpoints)]
    pub advertised_listeners: Option<EndpointList>,

    /// Security protocol of each named listener: "NAME:PROTOCOL,..." with PLAINTEXT, SSL,
    /// SASL_PLAINTEXT or SASL_SSL
    /// (as Kafka's `listener.security.protocol.map`). A listener named after a protocol
    /// needs no entry.
    #[arg(long, value_parser = parse_protocol_map)]
    pub listener_security_protocol_map: Option<ProtocolMap>,

    /// How a client certificate's subject (RFC 2253, "CN=alice,OU=eng") becomes the principal's
    /// name, as Kafka's `ssl.principal.mapping.rules`: `RULE:pattern/replacement/[LU],...,DEFAULT`
    /// (the first rule matching the whole subject wins; DEFAULT keeps it whole; a
    /// subject no rule matches is refused).
    #[arg(long, default_value = "DEFAULT")]
    pub ssl_principal_mapping_rules: String,

    /// SASL mechanisms clients of SASL_PLAINTEXT and SASL_SSL listeners may use, as Kafka's
    /// `sasl.enabled.mechanisms`: any of SCRAM-SHA-256, SCRAM-SHA-512, PLAIN (PLAIN checks
    /// the password against the user's SCRAM credential) and OAUTHBEARER (JWTs, see the
    /// `--sasl-oauthbearer-*` flags).
    #[arg(long, value_parser = parse_sasl_mechanisms,
        default_value = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN")]
    pub sasl_enabled_mechanisms: SaslMechanisms,

    /// OAUTHBEARER token checks.
    #[command(flatten)]
    pub oauth: oauth::OAuthArgs,

    /// File of `USER:PASSWORD` lines: each user without SCRAM credentials yet gets
    /// SCRAM-SHA-256 and SCRAM-SHA-512 ones at start-up (the first admin, before anyone can
    /// run `kafka-configs --alter --entity-type users`). Users that exist are left alone.
    #[arg(long)]
    pub sasl_bootstrap_users: Option<PathBuf>,

    /// Longest a SASL authentication holds (KIP-368, Kafka's `connections.max.reauth.ms`):
    /// clients re-authenticate on the same connection before it runs out, and a connection
    /// that did not gets no further request served. 0: authenticated for the connection's
    /// life.
    #[arg(long, default_value_t = 0)]
    pub connections_max_reauth_ms: u64,

    /// The `transaction.version` feature level ApiVersions finalizes, as Kafka's
    /// `kafka-features --feature transaction.version=N`: 2 (Kafka 4's default) lets clients
    /// run transactions v2 (KIP-890: a new epoch for every transaction, partitions added by
    /// Produce); 0 or 1 keeps them on v1. Requests of either kind are served whatever it is.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(i16).range(0..=2))]
    pub transaction_version: i16,

    /// Longest transaction.timeout.ms a transactional producer may ask for, as Kafka's
    /// `transaction.max.timeout.ms`; a transaction open longer than its timeout is aborted.
    #[arg(long, default_value_t = 900_000)]
    pub transaction_max_timeout_ms: i32,

    /// How long a transactional id with no transaction open is kept after its last use, as
    /// Kafka's `transactional.id.expiration.ms`; then its state is forgotten (a producer
    /// using it again starts afresh, at epoch 0).
    #[arg(long, default_value_t = 604_800_000)]
    pub transactional_id_expiration_ms: u64,

    /// Authorization, as Kafka's `authorizer.class.name`: `none` lets every client do
    /// everything (CreateAcls and friends answer SECURITY_DISABLED); `acl` checks every
    /// request against the ACLs (kept where the data is, managed with `kafka-acls`).
    #[arg(long, value_enum, default_value = "none")]
    pub authorizer: AuthorizerKind,

    /// Principals allowed everything whatever the ACLs say, as Kafka's `super.users`:
    /// "User:admin;User:ops".
    #[arg(long, default_value = "")]
    pub super_users: String,

    /// Let everyone do anything on a resource no ACL names (Kafka's
    /// `allow.everyone.if.no.acl.found`).
    #[arg(long)]
    pub allow_everyone_if_no_acl_found: bool,

    /// PEM file with the listener's certificate chain (leaf first), for SSL.
    #[arg(long)]
    pub ssl_certificate_file: Option<std::path::PathBuf>,

    /// PEM file with the private key of that certificate (PKCS#8, PKCS#1 or SEC1), for SSL.
    #[arg(long)]
    pub ssl_key_file: Option<std::path::PathBuf>,

    /// PEM file with the CAs whose client certificates are required (mutual TLS). Unset:
    /// clients show no certificate.
    #[arg(long)]
    pub ssl_client_ca_file: Option<std::path::PathBuf>,

    /// First per-shard port with `--advertise-shards`: shard i listens on (and advertises)
    /// this + i. Default: the listen port + 1 (each further listener: its port + 1).
    #[arg(long)]
    pub shard_base_port: Option<u16>,

    /// Shard cores, as a list and/or ranges ("0-3", "0,2,4-5"); default: every online core.
    #[arg(long, value_parser = parse_core_list)]
    pub cores: Option<CoreList>,

    /// Directory for broker data (metadata, logs).
    #[arg(long, default_value = "./kelp-data")]
    pub data_dir: PathBuf,

    /// Storage engine behind the in-core batch cache.
    #[arg(long, value_enum, default_value = "local")]
    pub storage: StorageKind,

    /// Durability of appends with local storage: always, interval:MS or never.
    #[arg(long, default_value = "always", value_parser = parse_fsync)]
    pub fsync: FsyncPolicy,

    /// Default segment size in bytes for topics without `segment.bytes`.
    #[arg(long, default_value_t = 1024 * 1024 * 1024)]
    pub segment_bytes: u64,

    /// How often each shard applies retention (retention.bytes / retention.ms), in ms.
    #[arg(long, default_value_t = 30_000)]
    pub retention_check_ms: u64,

    /// How often each shard's log cleaner looks for compacted topics' partitions to clean
    /// (Kafka's log.cleaner.backoff.ms), in ms.
    #[arg(long, default_value_t = 15_000)]
    pub log_cleaner_backoff_ms: u64,

    /// Memory of each shard's log cleaner key map, in bytes (Kafka's
    /// log.cleaner.dedupe.buffer.size): a round maps at most this / 96 keys.
    #[arg(long, default_value_t = 128 * 1024 * 1024)]
    pub log_cleaner_dedupe_buffer_size: u64,

    /// Most bytes a second each shard core's log cleaner reads and writes together (Kafka's
    /// log.cleaner.io.max.bytes.per.second, there for all cleaner threads); unlimited unless
    /// given.
    #[arg(long)]
    pub log_cleaner_io_max_bytes_per_second: Option<u64>,

    /// Batch cache budget per shard core, in bytes.
    #[arg(long, default_value_t = 512 * 1024 * 1024)]
    pub cache_bytes_per_core: usize,

    /// io_uring submission ring depth per shard core.
    #[arg(long, default_value_t = 128)]
    pub ring_depth: usize,

    /// glommio registered io memory per shard core, in bytes (needs locked memory: `ulimit -l`).
    #[arg(long, default_value_t = 2 * 1024 * 1024)]
    pub io_memory: usize,

    /// Threads per shard core, pinned to it, that run the local log's writes and fdatasyncs
    /// (the executor sleeps meanwhile); more than one lets syncs of partitions overlap.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub io_threads_per_core: u16,

    /// Maximum concurrent client connections per shard core; more are closed at accept.
    #[arg(long, default_value_t = 10_000)]
    pub max_connections_per_core: usize,

    /// Largest request frame accepted, in bytes (Kafka's socket.request.max.bytes).
    #[arg(long, default_value_t = 100 * 1024 * 1024)]
    pub max_request_bytes: usize,

    /// Broker-wide budget for request bytes being read and handled, in bytes (Kafka's
    /// queued.max.request.bytes): read buffers grow as bytes arrive and hold their share
    /// until the request is answered; when it is spent, connections pause reading (TCP holds
    /// the clients back). Must be at least --max-request-bytes plus 64 KiB.
    #[arg(long, default_value_t = 512 * 1024 * 1024)]
    pub queued_max_request_bytes: usize,

    /// Largest Fetch response, in bytes (Kafka's fetch.max.bytes): a client's larger
    /// max_bytes, response or partition, is capped to it. With one answer per connection
    /// being written at a time, it bounds the unsent response bytes of a connection.
    #[arg(long, default_value_t = 55 * 1024 * 1024)]
    pub fetch_max_bytes: usize,

    /// Longest a Fetch waits for a read below the cache from a store on another server
    /// (SeaweedMQ), in ms (Kafka's remote.fetch.max.wait.ms); past it the partition is
    /// answered without records and the consumer asks again.
    #[arg(long, default_value_t = 500)]
    pub remote_fetch_max_wait_ms: u64,

    /// A connection whose response write makes no progress for this long (the client stopped
    /// reading its socket) is closed, in ms.
    #[arg(long, default_value_t = 30_000)]
    pub write_timeout_ms: u64,

    /// A connection with no request in progress and no bytes received for this long is
    /// closed, in ms (Kafka's connections.max.idle.ms).
    #[arg(long, default_value_t = 600_000)]
    pub connections_max_idle_ms: u64,

    /// Create unknown topics on Metadata and Produce (Kafka's auto.create.topics.enable).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_create_topics: bool,

    /// Partition count of auto-created topics and of CreateTopics with num_partitions = -1.
    #[arg(long, default_value_t = 1)]
    pub default_partitions: i32,

    /// Node id this broker reports in Metadata.
    #[arg(long, default_value_t = 0)]
    pub node_id: i32,

    /// Cluster id reported in Metadata and DescribeCluster (1-64 of [A-Za-z0-9._-]). Kelp
    /// nodes over one SeaweedMQ with the same id form one cluster; other ids are other
    /// clusters, which see none of its nodes, leases or leaders.
    #[arg(long, default_value = "kelp-cluster", value_parser = parse_cluster_id)]
    pub cluster_id: String,

    /// Delay before the first rebalance of an empty group completes, so more members can join
    /// it (Kafka's group.initial.rebalance.delay.ms).
    #[arg(long, default_value_t = 3000)]
    pub group_initial_rebalance_delay_ms: u64,

    /// Smallest session timeout a group member may ask for (group.min.session.timeout.ms).
    #[arg(long, default_value_t = 6000)]
    pub group_min_session_timeout_ms: i32,

    /// Largest session timeout a group member may ask for (group.max.session.timeout.ms).
    #[arg(long, default_value_t = 1_800_000)]
    pub group_max_session_timeout_ms: i32,

    /// Silence after which a member of a KIP-848 consumer group (group.protocol=consumer) is
    /// removed (Kafka's group.consumer.session.timeout.ms).
    #[arg(long, default_value_t = 45_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub group_consumer_session_timeout_ms: u64,

    /// How often members of KIP-848 consumer groups are told to heartbeat (Kafka's
    /// group.consumer.heartbeat.interval.ms); keep it well below the session timeout.
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..=i32::MAX as u64))]
    pub group_consumer_heartbeat_interval_ms: u64,

    /// Most members a KIP-848 consumer group may have (Kafka's group.consumer.max.size).
    #[arg(long, default_value_t = i32::MAX as usize)]
    pub group_consumer_max_size: usize,

    /// SeaweedFS master (HTTP address, gRPC on port + 10000, or host:port.grpcport), used
    /// to find the mq brokers and the filer (`--storage seaweedmq`).
    #[arg(long)]
    pub seaweedmq_master: Option<String>,

    /// SeaweedMQ broker gRPC addresses ("host:port,host:port"), instead of asking the master.
    #[arg(long)]
    pub seaweedmq_brokers: Option<String>,

    /// The mq broker on this node's host ("host:port", as SeaweedMQ names its brokers):
    /// partitions whose SeaweedMQ leader it is are placed on this node rather than another
    /// (publishes stay on the host). Unset: placement looks at node ids only.
    #[arg(long)]
    pub seaweedmq_colocated_broker: Option<String>,

    /// SeaweedFS filer (HTTP address, gRPC on port + 10000), instead of asking the master.
    #[arg(long)]
    pub seaweedmq_filer: Option<String>,

    /// How long start-up waits for SeaweedMQ to answer, in ms.
    #[arg(long, default_value_t = 60_000)]
    pub seaweedmq_connect_timeout_ms: u64,

    /// How often SeaweedMQ's topic list is read into the metadata, in ms.
    #[arg(long, default_value_t = 5_000)]
    pub seaweedmq_topic_refresh_ms: u64,

    /// Core the SeaweedMQ forwarder thread is pinned to (default: not pinned).
    #[arg(long)]
    pub forwarder_core: Option<usize>,

    /// Most bytes of produced batches in flight to SeaweedMQ; produces beyond it wait.
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    pub forwarder_max_inflight_bytes: usize,

    /// Longest a produce waits for SeaweedMQ (also capped by the request's timeout), in ms;
    /// then it fails with REQUEST_TIMED_OUT, which clients retry.
    #[arg(long, default_value_t = 30_000)]
    pub forwarder_timeout_ms: u64,

    /// Serve Prometheus metrics (per-core counters and latencies) at http://ADDR/metrics.
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,

    /// Log filter (tracing env-filter syntax), e.g. "info" or "kelp=debug".
    #[arg(long, default_value = "info")]
    pub log_level: String,
}

impl Config {
    /// Host name written into Metadata broker entries.
    pub fn advertised_host(&self) -> String {
        match &self.advertised_host {
            Some(h) => h.clone(),
            None if self.listen.ip().is_unspecified() => "127.0.0.1".to_string(),
            None => self.listen.ip().to_string(),
        }
    }

    /// Port written into Metadata broker entries.
    pub fn advertised_port(&self) -> i32 {
        i32::from(self.advertised_port.unwrap_or(self.listen.port()))
    }

    /// The listeners to bind, the default one first; an error names what is wrong with the
    /// listener flags.
    pub fn listeners(&self) -> Result<Vec<Listener>, String> {
        listeners::resolve(self)
    }

    /// Records the ports the listeners were actually bound on (port 0 picks one at start-up),
    /// in [`Config::listeners`] order.
    pub fn set_bound_ports(&mut self, ports: &[u16]) {
        match &mut self.listeners {
            None => {
                if let Some(&p) = ports.first() {
                    self.listen.set_port(p);
                }
            }
            Some(list) => {
                for (e, &p) in list.0.iter_mut().zip(ports) {
                    e.port = p;
                }
            }
        }
    }

    /// The `--super-users` principals.
    pub fn super_users(&self) -> Vec<String> {
        self.super_users
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Whether the request memory budget can hold the largest request (with one read chunk):
    /// a smaller one would stall a connection forever on a request Kelp accepts.
    pub fn check_request_budget(&self) -> Result<(), String> {
        let need = self.max_request_bytes + READ_CHUNK;
        if self.queued_max_request_bytes < need {
            return Err(format!(
                "--queued-max-request-bytes {} must be at least --max-request-bytes + 64 KiB ({need})",
                self.queued_max_request_bytes
            ));
        }
        Ok(())
    }

    /// Whether every port the listeners bind for `shards` shards (their own, and with
    /// `--advertise-shards` one per shard each) is below 65536 and bound once.
    pub fn check_ports(&self, shards: usize) -> Result<(), String> {
        let mut seen = std::collections::HashMap::new();
        for l in self.listeners()? {
            let mut ports = vec![(u32::from(l.bind.port()), "its port".to_string())];
            if self.advertise_shards {
                let (first, last) = (l.shard_base, l.shard_base + shards as u32 - 1);
                if last > u32::from(u16::MAX) {
                    return Err(format!(
                        "--advertise-shards: listener {}'s shard ports {first}-{last} pass 65535",
                        l.name
                    ));
                }
                ports.extend(
                    (0..shards).map(|s| (l.shard_base + s as u32, format!("shard {s}'s port"))),
                );
            }
            for (port, what) in ports {
                if port == 0 {
                    continue;
                }
                let here = format!("listener {}'s {what}", l.name);
                if let Some(before) = seen.insert((l.bind.ip(), port), here.clone()) {
                    return Err(format!("port {port} is both {before} and {here}"));
                }
            }
        }
        Ok(())
    }
}

/// A parsed `--sasl-enabled-mechanisms`: names of mechanisms Kelp serves. A newtype, because
/// clap reads a bare `Vec` field as a repeated flag rather than one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslMechanisms(pub Vec<String>);

/// The SASL mechanisms Kelp can serve.
pub const SASL_MECHANISMS: [&str; 4] = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"];

fn parse_sasl_mechanisms(s: &str) -> Result<SaslMechanisms, String> {
    let mut out: Vec<String> = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !SASL_MECHANISMS.contains(&name) {
            return Err(format!(
                "unsupported SASL mechanism '{name}': use {}",
                SASL_MECHANISMS.join(", ")
            ));
        }
        if !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    if out.is_empty() {
        return Err("no SASL mechanism given".into());
    }
    Ok(SaslMechanisms(out))
}

/// Checks `--cluster-id`: it names filer paths and lock names, so no separators.
fn parse_cluster_id(s: &str) -> Result<String, String> {
    let ok = (1..=64).contains(&s.len())
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
        && s != "."
        && s != "..";
    if ok {
        Ok(s.to_string())
    } else {
        Err("1-64 characters of A-Z, a-z, 0-9, '.', '_' and '-'".into())
    }
}

/// A parsed `--cores` value. A newtype, because clap reads a bare `Vec` field as a
/// repeated flag rather than one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreList(pub Vec<usize>);

fn parse_core_list(s: &str) -> Result<CoreList, String> {
    parse_cores(s).map(CoreList)
}

/// Parses "0-3,5,7-8" into a sorted, de-duplicated core list.
pub fn parse_cores(s: &str) -> Result<Vec<usize>, String> {
    let mut cores = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| format!("bad core '{a}'"))?;
                let b: usize = b.trim().parse().map_err(|_| format!("bad core '{b}'"))?;
                if a > b {
                    return Err(format!("empty core range '{part}'"));
                }
                cores.extend(a..=b);
            }
            None => cores.push(part.parse().map_err(|_| format!("bad core '{part}'"))?),
        }
    }
    cores.sort_unstable();
    cores.dedup();
    if cores.is_empty() {
        return Err("no cores given".into());
    }
    Ok(cores)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_lists_and_ranges() {
        assert_eq!(parse_cores("0-3").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_cores("4,0-1,1").unwrap(), vec![0, 1, 4]);
        assert!(parse_cores("3-1").is_err());
        assert!(parse_cores("x").is_err());
        assert!(parse_cores("").is_err());
    }

    #[test]
    fn cores_flag_through_clap() {
        let c = Config::try_parse_from(["kelp", "--cores", "0-1,3"]).unwrap();
        assert_eq!(c.cores, Some(CoreList(vec![0, 1, 3])));
        assert!(Config::try_parse_from(["kelp", "--cores", "2-1"]).is_err());
        assert_eq!(Config::try_parse_from(["kelp"]).unwrap().cores, None);
    }

    #[test]
    fn fsync_policies() {
        assert_eq!(parse_fsync("always").unwrap(), FsyncPolicy::Always);
        assert_eq!(parse_fsync("never").unwrap(), FsyncPolicy::Never);
        assert_eq!(
            parse_fsync("interval:50").unwrap(),
            FsyncPolicy::Interval(50)
        );
        assert!(parse_fsync("interval:0").is_err());
        assert!(parse_fsync("sometimes").is_err());
    }
}
