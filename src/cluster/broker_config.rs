//! Broker configs as Kafka names them, for DescribeConfigs on a broker resource: the value
//! each has on this node (from Kelp's flags, or what Kelp always does), and whether a flag
//! changed it from Kelp's default. Kafka's tools and clients read these names
//! (`kafka-configs --entity-type brokers --all`, admin clients checking a broker's limits,
//! topic configs' synonyms). Every entry is read-only: Kelp's configuration is its flags.
//!
//! Calls `config` and [`super::topic_config`] only.

use std::sync::OnceLock;

use clap::Parser;

use super::topic_config::{ConfigType, TOPIC_CONFIGS};
use crate::config::{AuthorizerKind, Config, FsyncPolicy};

/// One broker config as this node has it.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerConfig {
    /// Kafka's name for it.
    pub name: &'static str,
    /// Its value here (None: unset, as Kafka describes an unset nullable config).
    pub value: Option<String>,
    /// Its type.
    pub kind: ConfigType,
    /// Whether a flag set it to something other than Kelp's default (Kafka's
    /// STATIC_BROKER_CONFIG source, else DEFAULT_CONFIG).
    pub set: bool,
    /// Its value with every flag at Kelp's default.
    pub default: Option<String>,
    /// DescribeConfigs' documentation string: what it does here, and the flag.
    pub doc: &'static str,
}

/// Kafka's `Long.MAX_VALUE` and `Integer.MAX_VALUE` as configs print them.
const LONG_MAX: &str = "9223372036854775807";
const INT_MAX: &str = "2147483647";

/// Every broker config this node describes, in Kafka's (alphabetical) order, on a node of
/// `shards` shard cores.
pub fn broker_configs(cfg: &Config, shards: usize) -> Vec<BrokerConfig> {
    // Parsing no flags cannot fail today; if it ever did, nothing would count as set.
    let defaults = values(default_config().unwrap_or(cfg), shards);
    let mut out: Vec<BrokerConfig> = values(cfg, shards)
        .into_iter()
        .map(|(name, value, kind, doc)| {
            let default = defaults
                .iter()
                .find(|d| d.0 == name)
                .and_then(|d| d.1.clone());
            BrokerConfig {
                name,
                set: default != value,
                value,
                kind,
                default,
                doc,
            }
        })
        .collect();
    // The broker configs that give topic configs their defaults, where Kelp has no flag of
    // its own for them: Kafka's default, which is what Kelp applies.
    for d in TOPIC_CONFIGS {
        let Some(name) = d.synonym else { continue };
        if out.iter().any(|b| b.name == name) {
            continue;
        }
        out.push(BrokerConfig {
            name,
            value: Some(d.default.to_string()),
            kind: d.kind,
            set: false,
            default: Some(d.default.to_string()),
            doc: d.doc,
        });
    }
    out.sort_by(|a, b| a.name.cmp(b.name));
    out
}

/// Kelp's defaults (every flag unset).
fn default_config() -> Option<&'static Config> {
    static DEFAULTS: OnceLock<Option<Config>> = OnceLock::new();
    DEFAULTS
        .get_or_init(|| Config::try_parse_from(["kelp"]).ok())
        .as_ref()
}

type Value = (&'static str, Option<String>, ConfigType, &'static str);

fn values(cfg: &Config, shards: usize) -> Vec<Value> {
    use ConfigType::{Boolean, Int, List, Long, Short, String as Str};
    let s = |v: &dyn ToString| Some(v.to_string());
    let listeners = cfg.listeners().unwrap_or_default();
    let join = |f: &dyn Fn(&crate::config::Listener) -> String| {
        Some(listeners.iter().map(f).collect::<Vec<_>>().join(","))
    };
    let (flush_messages, flush_ms) = match cfg.fsync {
        FsyncPolicy::Always => (s(&1), None),
        FsyncPolicy::Interval(ms) => (s(&LONG_MAX), s(&ms)),
        FsyncPolicy::Never => (s(&LONG_MAX), None),
    };
    let oauth = &cfg.oauth;
    vec![
        ("advertised.listeners", join(&|l| format!("{}://{}:{}", l.name, l.advertised_host, l.advertised_port)), Str,
         "Addresses clients are told to connect to (--advertised-host/--advertised-port, --advertised-listeners)."),
        ("authorizer.class.name", Some(match cfg.authorizer {
            AuthorizerKind::Acl => "org.apache.kafka.metadata.authorizer.StandardAuthorizer".into(),
            AuthorizerKind::None => String::new(),
        }), Str, "Kafka ACLs are enforced when set (--authorizer acl)."),
        ("auto.create.topics.enable", s(&cfg.auto_create_topics), Boolean,
         "Auto-create topics on Metadata and Produce (--auto-create-topics)."),
        ("broker.id", s(&cfg.node_id), Int, "This node's id (--node-id)."),
        ("connections.max.idle.ms", s(&cfg.connections_max_idle_ms), Long,
         "Idle connections are closed after this (--connections-max-idle-ms)."),
        ("connections.max.reauth.ms", s(&cfg.connections_max_reauth_ms), Long,
         "SASL sessions must re-authenticate within this (--connections-max-reauth-ms)."),
        ("default.replication.factor", s(&1), Int, "One replica: the storage engine keeps the data."),
        ("delete.topic.enable", s(&true), Boolean, "Topics can be deleted."),
        ("fetch.max.bytes", s(&cfg.fetch_max_bytes), Int,
         "Most bytes one Fetch answer holds per shard core (--fetch-max-bytes)."),
        ("group.consumer.heartbeat.interval.ms", s(&cfg.group_consumer_heartbeat_interval_ms), Int,
         "KIP-848 members' heartbeat interval (--group-consumer-heartbeat-interval-ms)."),
        ("group.consumer.max.size", s(&if cfg.group_consumer_max_size == usize::MAX {
            INT_MAX.to_string()
        } else {
            cfg.group_consumer_max_size.to_string()
        }), Int, "Most members of a KIP-848 group (--group-consumer-max-size)."),
        ("group.consumer.session.timeout.ms", s(&cfg.group_consumer_session_timeout_ms), Int,
         "KIP-848 members' session timeout (--group-consumer-session-timeout-ms)."),
        ("group.initial.rebalance.delay.ms", s(&cfg.group_initial_rebalance_delay_ms), Int,
         "Wait for more members before a new group's first rebalance (--group-initial-rebalance-delay-ms)."),
        ("group.max.session.timeout.ms", s(&cfg.group_max_session_timeout_ms), Int,
         "Largest session timeout a classic member may ask for (--group-max-session-timeout-ms)."),
        ("group.min.session.timeout.ms", s(&cfg.group_min_session_timeout_ms), Int,
         "Smallest session timeout a classic member may ask for (--group-min-session-timeout-ms)."),
        ("listener.security.protocol.map", join(&|l| format!("{}:{}", l.name, l.protocol.name())), Str,
         "Each listener's security protocol (--listener-security-protocol-map)."),
        ("listeners", join(&|l| format!("{}://{}", l.name, l.bind)), Str,
         "Addresses this node binds (--listen, --listeners)."),
        ("log.cleaner.backoff.ms", s(&cfg.log_cleaner_backoff_ms), Long,
         "How often each core's log cleaner looks for work (--log-cleaner-backoff-ms)."),
        ("log.cleaner.dedupe.buffer.size", s(&cfg.log_cleaner_dedupe_buffer_size), Long,
         "Memory of each core's cleaner key map (--log-cleaner-dedupe-buffer-size)."),
        ("log.cleaner.io.max.bytes.per.second", Some(cfg.log_cleaner_io_max_bytes_per_second
            .map_or_else(|| "1.7976931348623157E308".to_string(), |r| format!("{r:.1}"))), ConfigType::Double,
         "Bytes a second each core's cleaner may read and write (--log-cleaner-io-max-bytes-per-second)."),
        ("log.cleaner.enable", s(&true), Boolean, "Compacted topics are cleaned (on the embedded log)."),
        ("log.cleaner.threads", s(&shards), Int, "One log cleaner per shard core."),
        ("log.dirs", s(&cfg.data_dir.display()), Str, "Where the embedded log and Kelp's state live (--data-dir)."),
        ("log.flush.interval.messages", flush_messages, Long,
         "1: every acks=all write is synced before it is answered (--fsync always)."),
        ("log.flush.interval.ms", flush_ms, Long, "Logs are synced this often (--fsync interval:MS)."),
        ("log.retention.check.interval.ms", s(&cfg.retention_check_ms), Long,
         "How often retention runs (--retention-check-ms)."),
        ("log.retention.hours", s(&168), Int,
         "Retention of topics without retention.ms (7 days, as Kafka's default)."),
        ("log.roll.hours", s(&168), Int, "Segments roll at this age without segment.ms (7 days)."),
        ("log.segment.bytes", s(&cfg.segment_bytes), Int,
         "Segment size of topics without segment.bytes (--segment-bytes)."),
        ("max.connections", s(&cfg.max_connections_per_core.saturating_mul(shards)), Int,
         "Most client connections (--max-connections-per-core on each shard core)."),
        ("message.max.bytes", s(&super::topic_config::DEFAULT_MAX_MESSAGE_BYTES), Int,
         "Largest record batch of topics without max.message.bytes."),
        ("min.insync.replicas", s(&1), Int, "One replica."),
        ("node.id", s(&cfg.node_id), Int, "This node's id (--node-id)."),
        ("num.partitions", s(&cfg.default_partitions), Int,
         "Partitions of auto-created topics (--default-partitions)."),
        ("offsets.topic.replication.factor", s(&1), Short, "One replica."),
        ("process.roles", s(&"broker,controller"), List, "Every Kelp node serves clients and the cluster's metadata."),
        ("queued.max.request.bytes", s(&cfg.queued_max_request_bytes), Long,
         "Bytes of requests read and not yet answered, per shard core (--queued-max-request-bytes)."),
        ("sasl.enabled.mechanisms", s(&cfg.sasl_enabled_mechanisms.0.join(",")), List,
         "SASL mechanisms offered (--sasl-enabled-mechanisms)."),
        ("sasl.oauthbearer.clock.skew.seconds", s(&oauth.sasl_oauthbearer_clock_skew_seconds), Int,
         "Clock skew allowed on OAUTHBEARER tokens (--sasl-oauthbearer-clock-skew-seconds)."),
        ("sasl.oauthbearer.expected.audience", s(&oauth.sasl_oauthbearer_expected_audience.join(",")), List,
         "Audiences a token must name one of (--sasl-oauthbearer-expected-audience)."),
        ("sasl.oauthbearer.expected.issuer", oauth.sasl_oauthbearer_expected_issuer.clone(), Str,
         "Issuer tokens must name (--sasl-oauthbearer-expected-issuer)."),
        ("sasl.oauthbearer.jwks.endpoint.url", oauth.sasl_oauthbearer_jwks_file.as_ref().map(|p| format!("file://{}", p.display())), Str,
         "Keys tokens are checked with (--sasl-oauthbearer-jwks-file)."),
        ("sasl.oauthbearer.scope.claim.name", s(&oauth.sasl_oauthbearer_scope_claim_name), Str,
         "Claim holding a token's scope (--sasl-oauthbearer-scope-claim-name)."),
        ("sasl.oauthbearer.sub.claim.name", s(&oauth.sasl_oauthbearer_sub_claim_name), Str,
         "Claim holding a token's subject (--sasl-oauthbearer-sub-claim-name)."),
        ("socket.request.max.bytes", s(&cfg.max_request_bytes), Int, "Largest request accepted (--max-request-bytes)."),
        ("ssl.client.auth", s(&if cfg.ssl_client_ca_file.is_some() { "required" } else { "none" }), Str,
         "TLS clients must present a certificate when a client CA is given (--ssl-client-ca-file)."),
        ("ssl.principal.mapping.rules", s(&cfg.ssl_principal_mapping_rules), Str,
         "How a client certificate's name becomes a principal (--ssl-principal-mapping-rules)."),
        ("transaction.max.timeout.ms", s(&cfg.transaction_max_timeout_ms), Int,
         "Largest transaction timeout a producer may ask for (--transaction-max-timeout-ms)."),
        ("transaction.state.log.min.isr", s(&1), Int, "One replica."),
        ("transaction.state.log.replication.factor", s(&1), Short, "One replica."),
        ("transactional.id.expiration.ms", s(&cfg.transactional_id_expiration_ms), Int,
         "Transactional ids unused this long are forgotten (--transactional-id-expiration-ms)."),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(all: &'a [BrokerConfig], name: &str) -> &'a BrokerConfig {
        all.iter().find(|c| c.name == name).expect(name)
    }

    #[test]
    fn values_come_from_flags_and_only_changed_ones_count_as_set() {
        let cfg = Config::parse_from([
            "kelp",
            "--default-partitions",
            "6",
            "--segment-bytes",
            "1048576",
            "--fsync",
            "interval:50",
            "--node-id",
            "3",
        ]);
        let all = broker_configs(&cfg, 2);
        let p = find(&all, "num.partitions");
        assert_eq!((p.value.as_deref(), p.set), (Some("6"), true));
        assert_eq!(
            find(&all, "log.segment.bytes").value.as_deref(),
            Some("1048576")
        );
        assert_eq!(
            find(&all, "log.flush.interval.ms").value.as_deref(),
            Some("50")
        );
        assert_eq!(find(&all, "node.id").value.as_deref(), Some("3"));
        assert_eq!(
            find(&all, "max.connections").value,
            Some((2 * cfg.max_connections_per_core).to_string())
        );
        let a = find(&all, "auto.create.topics.enable");
        assert_eq!((a.value.as_deref(), a.set), (Some("true"), false));
        // Topic configs' broker synonyms without a flag: Kafka's default.
        let r = find(&all, "log.cleaner.delete.retention.ms");
        assert_eq!((r.value.as_deref(), r.set), (Some("86400000"), false));
        // Sorted, each once.
        let names: Vec<&str> = all.iter().map(|c| c.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
    }
}
