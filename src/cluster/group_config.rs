//! Group configs (ConfigResource type GROUP, 32): the per-group overrides Kafka 4.2 knows
//! (`org.apache.kafka.coordinator.group.GroupConfig`, KIP-848 / KIP-932 / KIP-1071), their
//! defaults, types and DescribeConfigs metadata, and their validation against the broker's
//! limits ([`Limits`]). The overrides themselves live in the cluster snapshot
//! ([`super::Cluster::group_config`]); this module only knows what they may be.
//!
//! Kafka checks a group's whole resulting override set at once, filled up with the broker's
//! values where the group sets none, so one change can be refused for another key's value
//! (a session timeout no longer above its heartbeat interval). [`Limits::validate`] does the
//! same, in Kafka's order, with Kafka's messages.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::topic_config::ConfigType;
use crate::config::Config;
use crate::error::KelpError;

/// How long a KIP-848 consumer group member may stay silent.
pub const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
/// How often KIP-848 consumer group members are told to heartbeat.
pub const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";
/// How long a share group member may stay silent.
pub const SHARE_SESSION_TIMEOUT_MS: &str = "share.session.timeout.ms";
/// How often share group members are told to heartbeat.
pub const SHARE_HEARTBEAT_INTERVAL_MS: &str = "share.heartbeat.interval.ms";
/// How long a share group member holds the records it acquired.
pub const SHARE_RECORD_LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";
/// Where a share-partition starts when the group has no state for it.
pub const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";
/// Whether share groups deliver aborted transactional records.
pub const SHARE_ISOLATION_LEVEL: &str = "share.isolation.level";
/// How long a streams group member may stay silent.
pub const STREAMS_SESSION_TIMEOUT_MS: &str = "streams.session.timeout.ms";
/// How often streams group members are told to heartbeat.
pub const STREAMS_HEARTBEAT_INTERVAL_MS: &str = "streams.heartbeat.interval.ms";
/// Standby replicas of each streams task.
pub const STREAMS_NUM_STANDBY_REPLICAS: &str = "streams.num.standby.replicas";
/// Wait for more streams members before a new group's first rebalance.
pub const STREAMS_INITIAL_REBALANCE_DELAY_MS: &str = "streams.initial.rebalance.delay.ms";

/// The space of cluster-wide records group configs are kept in by engines that keep them
/// beside the data (SeaweedMQ), one record per group.
pub const SPACE: &str = "group-configs";

/// What values a group config accepts besides its type (Kafka's validators in GroupConfig).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// An integer at least this.
    AtLeast(i64),
    /// One of these strings, exactly.
    OneOf(&'static [&'static str]),
    /// `earliest`, `latest` or `by_duration:<ISO-8601 duration, not negative>`
    /// (ShareGroupAutoOffsetResetStrategy).
    OffsetReset,
}

/// A group config Kafka 4.2 knows.
#[derive(Debug, Clone, Copy)]
pub struct GroupConfigDef {
    /// Kafka's name for it.
    pub name: &'static str,
    /// Kafka's default where the broker config behind it is not set (Kelp's flag, if it has
    /// one, may give another: [`Limits::default_value`]).
    pub default: &'static str,
    /// Its type (INT or STRING).
    pub kind: ConfigType,
    /// What values it takes.
    pub check: Check,
    /// DescribeConfigs' documentation string (v3+).
    pub doc: &'static str,
}

const fn def(
    name: &'static str,
    default: &'static str,
    kind: ConfigType,
    check: Check,
    doc: &'static str,
) -> GroupConfigDef {
    GroupConfigDef {
        name,
        default,
        kind,
        check,
        doc,
    }
}

const ISOLATION_LEVELS: &[&str] = &["read_committed", "read_uncommitted"];

/// Every group config of Kafka 4.2, in the order Kafka defines them (which is the order it
/// checks them in).
#[rustfmt::skip]
pub const GROUP_CONFIGS: &[GroupConfigDef] = &[
    def(CONSUMER_SESSION_TIMEOUT_MS, "45000", ConfigType::Int, Check::AtLeast(1),
        "Silence after which a member of this consumer group (KIP-848 protocol) is removed."),
    def(CONSUMER_HEARTBEAT_INTERVAL_MS, "5000", ConfigType::Int, Check::AtLeast(1),
        "Heartbeat interval given to the members of this consumer group (KIP-848 protocol)."),
    def(SHARE_SESSION_TIMEOUT_MS, "45000", ConfigType::Int, Check::AtLeast(1),
        "Silence after which a member of this share group is removed."),
    def(SHARE_HEARTBEAT_INTERVAL_MS, "5000", ConfigType::Int, Check::AtLeast(1),
        "Heartbeat interval given to the members of this share group."),
    def(SHARE_RECORD_LOCK_DURATION_MS, "30000", ConfigType::Int, Check::AtLeast(1000),
        "How long a member of this share group holds the records it acquired."),
    def(SHARE_AUTO_OFFSET_RESET, "latest", ConfigType::String, Check::OffsetReset,
        "Where a share-partition starts: earliest, latest, or by_duration:<ISO-8601 duration> \
         (that long before now; not negative)."),
    def(SHARE_ISOLATION_LEVEL, "read_uncommitted", ConfigType::String,
        Check::OneOf(ISOLATION_LEVELS),
        "read_committed delivers only committed transactional records; read_uncommitted \
         delivers aborted ones too. Other records are delivered either way."),
    def(STREAMS_SESSION_TIMEOUT_MS, "45000", ConfigType::Int, Check::AtLeast(1),
        "Silence after which a member of this streams group is removed."),
    def(STREAMS_HEARTBEAT_INTERVAL_MS, "5000", ConfigType::Int, Check::AtLeast(1),
        "Heartbeat interval given to the members of this streams group."),
    def(STREAMS_NUM_STANDBY_REPLICAS, "0", ConfigType::Int, Check::AtLeast(0),
        "Standby replicas of each task of this streams group."),
    def(STREAMS_INITIAL_REBALANCE_DELAY_MS, "3000", ConfigType::Int, Check::AtLeast(0),
        "Wait for more members before this streams group's first rebalance."),
];

/// The definition of a known group config.
pub fn lookup(name: &str) -> Option<&'static GroupConfigDef> {
    GROUP_CONFIGS.iter().find(|c| c.name == name)
}

/// Kafka's default of a group config (the broker's own setting may differ:
/// [`Limits::default_value`]); None for a name Kafka does not know.
pub fn default_of(key: &str) -> Option<&'static str> {
    lookup(key).map(|c| c.default)
}

/// One range check of Kafka's `GroupConfig.validateValues`: the config, and the broker
/// configs (name, value) that bound it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bound {
    config: &'static str,
    min: Option<(&'static str, i64)>,
    max: (&'static str, i64),
}

/// The broker side of group configs: the value each takes where a group sets none, and the
/// broker limits Kafka holds them to (group.consumer.min.session.timeout.ms and the like).
/// Kelp has flags for the consumer group defaults only; every other value is Kafka's default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    consumer_session_timeout_ms: i64,
    consumer_heartbeat_interval_ms: i64,
    bounds: Vec<Bound>,
}

/// A broker range widened to take in the broker's own default: Kafka refuses to start with
/// a default outside its min/max, Kelp has no min/max flags, so a flag outside Kafka's
/// default range moves the range rather than making every change to every group fail.
fn around(min: i64, max: i64, value: i64) -> (i64, i64) {
    (min.min(value), max.max(value))
}

impl Limits {
    /// The limits of a broker started with `config`.
    pub fn new(config: &Config) -> Self {
        let session = i64::try_from(config.group_consumer_session_timeout_ms).unwrap_or(i64::MAX);
        let heartbeat =
            i64::try_from(config.group_consumer_heartbeat_interval_ms).unwrap_or(i64::MAX);
        let (session_min, session_max) = around(45_000, 60_000, session);
        let (heartbeat_min, heartbeat_max) = around(5_000, 15_000, heartbeat);
        let b = |config, min: Option<(&'static str, i64)>, max| Bound { config, min, max };
        #[rustfmt::skip]
        let bounds = vec![
            b(CONSUMER_HEARTBEAT_INTERVAL_MS,
              Some(("group.consumer.min.heartbeat.interval.ms", heartbeat_min)),
              ("group.consumer.max.heartbeat.interval.ms", heartbeat_max)),
            b(CONSUMER_SESSION_TIMEOUT_MS,
              Some(("group.consumer.min.session.timeout.ms", session_min)),
              ("group.consumer.max.session.timeout.ms", session_max)),
            b(SHARE_HEARTBEAT_INTERVAL_MS,
              Some(("group.share.min.heartbeat.interval.ms", 5_000)),
              ("group.share.max.heartbeat.interval.ms", 15_000)),
            b(SHARE_SESSION_TIMEOUT_MS,
              Some(("group.share.min.session.timeout.ms", 45_000)),
              ("group.share.max.session.timeout.ms", 60_000)),
            b(SHARE_RECORD_LOCK_DURATION_MS,
              Some(("group.share.min.record.lock.duration.ms", 15_000)),
              ("group.share.max.record.lock.duration.ms", 60_000)),
            b(STREAMS_HEARTBEAT_INTERVAL_MS,
              Some(("group.streams.min.heartbeat.interval.ms", 5_000)),
              ("group.streams.max.heartbeat.interval.ms", 15_000)),
            b(STREAMS_SESSION_TIMEOUT_MS,
              Some(("group.streams.min.session.timeout.ms", 45_000)),
              ("group.streams.max.session.timeout.ms", 60_000)),
            b(STREAMS_NUM_STANDBY_REPLICAS, None, ("group.streams.max.standby.replicas", 2)),
        ];
        Limits {
            consumer_session_timeout_ms: session,
            consumer_heartbeat_interval_ms: heartbeat,
            bounds,
        }
    }

    /// The value of `name` for a group that does not set it: the broker's (Kelp's flags for
    /// the consumer group ones), else Kafka's default. None for an unknown name.
    pub fn default_value(&self, name: &str) -> Option<String> {
        match name {
            CONSUMER_SESSION_TIMEOUT_MS => Some(self.consumer_session_timeout_ms.to_string()),
            CONSUMER_HEARTBEAT_INTERVAL_MS => Some(self.consumer_heartbeat_interval_ms.to_string()),
            _ => default_of(name).map(str::to_string),
        }
    }

    /// Checks a group's whole override set as Kafka's `GroupConfigManager.validate` does:
    /// unknown names first, then every value's type and validator (an unset one takes the
    /// broker's consumer group values, else Kafka's default), then the broker's ranges, then
    /// each session timeout against its heartbeat interval. INVALID_CONFIG, Kafka's message.
    pub fn validate(&self, overrides: &BTreeMap<String, String>) -> Result<(), KelpError> {
        if let Some(name) = overrides.keys().find(|k| lookup(k).is_none()) {
            return Err(KelpError::InvalidConfig(format!(
                "Unknown group config name: {name}"
            )));
        }
        let mut ints: BTreeMap<&str, i64> = BTreeMap::new();
        for d in GROUP_CONFIGS {
            // Kafka fills in only the consumer group values from the broker; the others from
            // GroupConfig's own defaults (the same values unless the broker changed them).
            let value = match overrides.get(d.name) {
                Some(v) => v.clone(),
                None => match d.name {
                    CONSUMER_SESSION_TIMEOUT_MS | CONSUMER_HEARTBEAT_INTERVAL_MS => {
                        self.default_value(d.name).unwrap_or_default()
                    }
                    _ => d.default.to_string(),
                },
            };
            if let Some(n) = check_value(d, &value)? {
                ints.insert(d.name, n);
            }
        }
        let get = |name: &str| ints.get(name).copied().unwrap_or_default();
        for b in &self.bounds {
            let v = get(b.config);
            if let Some((min_name, min)) = b.min {
                if v < min {
                    return Err(KelpError::InvalidConfig(format!(
                        "{} must be greater than or equal to {min_name}",
                        b.config
                    )));
                }
            }
            if v > b.max.1 {
                return Err(KelpError::InvalidConfig(format!(
                    "{} must be less than or equal to {}",
                    b.config, b.max.0
                )));
            }
        }
        for (session, heartbeat) in [
            (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
            (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
            (STREAMS_SESSION_TIMEOUT_MS, STREAMS_HEARTBEAT_INTERVAL_MS),
        ] {
            if get(session) <= get(heartbeat) {
                return Err(KelpError::InvalidConfig(format!(
                    "{session} must be greater than {heartbeat}"
                )));
            }
        }
        Ok(())
    }
}

/// Kafka's `ConfigException` text for a value its config does not take.
fn invalid(name: &str, value: &str, why: &str) -> KelpError {
    KelpError::InvalidConfig(format!(
        "Invalid value {value} for configuration {name}: {why}"
    ))
}

/// Parses one value as Kafka's ConfigDef does (trimmed) and runs its validator: the integer
/// for INT configs.
fn check_value(d: &GroupConfigDef, value: &str) -> Result<Option<i64>, KelpError> {
    let trimmed = value.trim();
    match d.kind {
        ConfigType::Int => {
            let n = trimmed
                .parse::<i32>()
                .map_err(|_| invalid(d.name, value, "Not a number of type INT"))?;
            if let Check::AtLeast(min) = d.check {
                if i64::from(n) < min {
                    return Err(invalid(
                        d.name,
                        &n.to_string(),
                        &format!("Value must be at least {min}"),
                    ));
                }
            }
            Ok(Some(i64::from(n)))
        }
        _ => {
            match d.check {
                Check::OneOf(choices) if !choices.contains(&trimmed) => {
                    return Err(invalid(
                        d.name,
                        trimmed,
                        &format!("String must be one of: {}", choices.join(", ")),
                    ));
                }
                Check::OffsetReset if !valid_offset_reset(trimmed) => {
                    return Err(invalid(
                        d.name,
                        trimmed,
                        &format!(
                            "Invalid value `{trimmed}` for configuration {}. The value must be \
                             either 'earliest', 'latest' or of the format \
                             'by_duration:<PnDTnHnMn.nS>'.",
                            d.name
                        ),
                    ));
                }
                _ => {}
            }
            Ok(None)
        }
    }
}

/// Whether a share group may start from `v` (Kafka's ShareGroupAutoOffsetResetStrategy:
/// the consumer's `none` is not offered).
fn valid_offset_reset(v: &str) -> bool {
    match v {
        "earliest" | "latest" => true,
        _ => v
            .strip_prefix("by_duration:")
            .and_then(iso_duration_nanos)
            .is_some_and(|n| n >= 0),
    }
}

/// `[-+]?[0-9]+` at the start of `s`: the number and what follows.
fn signed_digits(s: &str) -> Option<(i64, &str)> {
    let sign_len = usize::from(s.starts_with(['-', '+']));
    let digits = s[sign_len..].bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let end = sign_len + digits;
    Some((s[..end].parse().ok()?, &s[end..]))
}

/// A duration as Java's `Duration.parse` reads it (`[-+]?P[nD][T[nH][nM][n[.f]S]]`, letters
/// of either case, at least one part, no `T` without a time part), in nanoseconds; None
/// for text it refuses, overflow included.
fn iso_duration_nanos(text: &str) -> Option<i128> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let rest = rest.strip_prefix(['P', 'p'])?;
    let (date, time) = match rest.find(['T', 't']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let mut seconds: i64 = 0;
    let mut nanos: i64 = 0;
    let mut parts = 0;
    if !date.is_empty() {
        let (days, after) = signed_digits(date)?;
        if !after.eq_ignore_ascii_case("D") {
            return None;
        }
        seconds = days.checked_mul(86_400)?;
        parts += 1;
    }
    if let Some(mut t) = time {
        let before = parts;
        for (unit, scale) in [('H', 3_600), ('M', 60)] {
            if let Some((n, after)) = signed_digits(t) {
                if after.starts_with([unit, unit.to_ascii_lowercase()]) {
                    seconds = seconds.checked_add(n.checked_mul(scale)?)?;
                    t = &after[1..];
                    parts += 1;
                }
            }
        }
        if let Some((n, after)) = signed_digits(t) {
            let (fraction, after) = match after.strip_prefix(['.', ',']) {
                Some(f) => {
                    let len = f.bytes().take_while(u8::is_ascii_digit).count();
                    if len > 9 {
                        return None;
                    }
                    let digits = &f[..len];
                    let value: i64 = if len == 0 { 0 } else { digits.parse().ok()? };
                    (value * 10i64.pow(9 - len as u32), &f[len..])
                }
                None => (0, after),
            };
            if !after.eq_ignore_ascii_case("S") {
                return None;
            }
            seconds = seconds.checked_add(n)?;
            // The fraction takes the seconds' sign, as Java's does.
            nanos = if t.starts_with('-') {
                -fraction
            } else {
                fraction
            };
            parts += 1;
        } else if !t.is_empty() {
            return None;
        }
        if parts == before {
            return None;
        }
    }
    if parts == 0 {
        return None;
    }
    let total = i128::from(seconds) * 1_000_000_000 + i128::from(nanos);
    Some(if negative { -total } else { total })
}

/// A group's overrides as one record of [`SPACE`] holds them.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Stored {
    group: String,
    configs: BTreeMap<String, String>,
}

/// The record body of `group`'s overrides (it names the group: record keys are file names).
pub fn encode(group: &str, configs: &BTreeMap<String, String>) -> Result<Vec<u8>, KelpError> {
    serde_json::to_vec(&Stored {
        group: group.to_string(),
        configs: configs.clone(),
    })
    .map_err(|e| KelpError::Storage(format!("encoding group configs: {e}")))
}

/// The group and overrides a record body holds; None for one that does not decode.
pub fn decode(body: &[u8]) -> Option<(String, BTreeMap<String, String>)> {
    serde_json::from_slice::<Stored>(body)
        .ok()
        .map(|s| (s.group, s.configs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn limits(args: &[&str]) -> Limits {
        let mut all = vec!["kelp"];
        all.extend_from_slice(args);
        Limits::new(&Config::parse_from(all))
    }

    fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn message(r: Result<(), KelpError>) -> String {
        match r {
            Err(KelpError::InvalidConfig(m)) => m,
            other => panic!("expected INVALID_CONFIG, got {other:?}"),
        }
    }

    #[test]
    fn kafkas_configs_and_defaults() {
        let names: Vec<&str> = GROUP_CONFIGS.iter().map(|d| d.name).collect();
        assert_eq!(names.len(), 11);
        assert_eq!(default_of(SHARE_AUTO_OFFSET_RESET), Some("latest"));
        assert_eq!(default_of(SHARE_RECORD_LOCK_DURATION_MS), Some("30000"));
        assert_eq!(default_of("no.such"), None);
        let l = limits(&[]);
        assert_eq!(l.validate(&BTreeMap::new()), Ok(()));
        for d in GROUP_CONFIGS {
            assert_eq!(
                l.validate(&set(&[(d.name, d.default)])),
                Ok(()),
                "{}",
                d.name
            );
        }
        let flagged = limits(&["--group-consumer-session-timeout-ms", "50000"]);
        assert_eq!(
            flagged
                .default_value(CONSUMER_SESSION_TIMEOUT_MS)
                .as_deref(),
            Some("50000")
        );
        assert_eq!(
            flagged.default_value(SHARE_SESSION_TIMEOUT_MS).as_deref(),
            Some("45000")
        );
    }

    #[test]
    fn values_are_held_to_kafkas_limits() {
        let l = limits(&[]);
        for (k, v) in [
            (SHARE_AUTO_OFFSET_RESET, "earliest"),
            (SHARE_AUTO_OFFSET_RESET, "by_duration:PT1H"),
            (SHARE_AUTO_OFFSET_RESET, "by_duration:P1DT2H3M4.5S"),
            (SHARE_AUTO_OFFSET_RESET, "by_duration:pt0s"),
            (SHARE_AUTO_OFFSET_RESET, " latest "),
            (SHARE_ISOLATION_LEVEL, "read_committed"),
            (SHARE_RECORD_LOCK_DURATION_MS, "15000"),
            (SHARE_RECORD_LOCK_DURATION_MS, "60000"),
            (CONSUMER_SESSION_TIMEOUT_MS, "60000"),
            (CONSUMER_HEARTBEAT_INTERVAL_MS, "15000"),
            (STREAMS_NUM_STANDBY_REPLICAS, "2"),
            (STREAMS_INITIAL_REBALANCE_DELAY_MS, "0"),
        ] {
            assert_eq!(l.validate(&set(&[(k, v)])), Ok(()), "{k}={v}");
        }
        for (k, v, why) in [
            (
                "no.such.config",
                "1",
                "Unknown group config name: no.such.config",
            ),
            (
                SHARE_AUTO_OFFSET_RESET,
                "none",
                "Invalid value none for configuration \
              share.auto.offset.reset: Invalid value `none` for configuration \
              share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the \
              format 'by_duration:<PnDTnHnMn.nS>'.",
            ),
            (
                SHARE_ISOLATION_LEVEL,
                "READ_COMMITTED",
                "Invalid value READ_COMMITTED for \
              configuration share.isolation.level: String must be one of: read_committed, \
              read_uncommitted",
            ),
            (
                SHARE_RECORD_LOCK_DURATION_MS,
                "abc",
                "Invalid value abc for configuration \
              share.record.lock.duration.ms: Not a number of type INT",
            ),
            (
                SHARE_RECORD_LOCK_DURATION_MS,
                "999",
                "Invalid value 999 for configuration \
              share.record.lock.duration.ms: Value must be at least 1000",
            ),
            (
                SHARE_RECORD_LOCK_DURATION_MS,
                "10000",
                "share.record.lock.duration.ms must be \
              greater than or equal to group.share.min.record.lock.duration.ms",
            ),
            (
                SHARE_RECORD_LOCK_DURATION_MS,
                "60001",
                "share.record.lock.duration.ms must be \
              less than or equal to group.share.max.record.lock.duration.ms",
            ),
            (
                CONSUMER_SESSION_TIMEOUT_MS,
                "30000",
                "consumer.session.timeout.ms must be \
              greater than or equal to group.consumer.min.session.timeout.ms",
            ),
            (
                STREAMS_NUM_STANDBY_REPLICAS,
                "3",
                "streams.num.standby.replicas must be less \
              than or equal to group.streams.max.standby.replicas",
            ),
        ] {
            assert_eq!(message(l.validate(&set(&[(k, v)]))), why, "{k}={v}");
        }
        // Kafka's ranges keep sessions above heartbeats; a flag that widens them does not.
        let wide = limits(&["--group-consumer-heartbeat-interval-ms", "50000"]);
        assert_eq!(
            message(wide.validate(&set(&[(CONSUMER_HEARTBEAT_INTERVAL_MS, "46000")]))),
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
        );
        // A broker default outside Kafka's range moves the range rather than refusing all.
        let low = limits(&["--group-consumer-session-timeout-ms", "10000"]);
        assert_eq!(
            low.validate(&set(&[(SHARE_AUTO_OFFSET_RESET, "earliest")])),
            Ok(())
        );
        assert_eq!(
            low.validate(&set(&[(CONSUMER_SESSION_TIMEOUT_MS, "20000")])),
            Ok(())
        );
    }

    #[test]
    fn iso_durations_as_java_reads_them() {
        for (text, nanos) in [
            ("PT1H", 3_600_000_000_000i128),
            ("P1D", 86_400_000_000_000),
            ("PT0.5S", 500_000_000),
            ("PT1,25S", 1_250_000_000),
            ("PT-1.5S", -1_500_000_000),
            ("-PT1M", -60_000_000_000),
            ("-P-1D", 86_400_000_000_000),
            ("P1DT1S", 86_401_000_000_000),
            ("PT1.S", 1_000_000_000),
        ] {
            assert_eq!(iso_duration_nanos(text), Some(nanos), "{text}");
        }
        for text in [
            "",
            "P",
            "PT",
            "P1DT",
            "1H",
            "PT1",
            "P1H",
            "PT1S1M",
            "PT1.1234567890S",
            "PT.5S",
            "P1W",
            "PT1H ",
            "P99999999999999999D",
        ] {
            assert_eq!(iso_duration_nanos(text), None, "{text}");
        }
        assert!(!valid_offset_reset("by_duration:-PT1H"));
        assert!(!valid_offset_reset("by_duration"));
        assert!(!valid_offset_reset("EARLIEST"));
    }

    #[test]
    fn records_name_their_group() {
        let c = set(&[(SHARE_AUTO_OFFSET_RESET, "earliest")]);
        let body = encode("g/1", &c).unwrap();
        assert_eq!(decode(&body), Some(("g/1".to_string(), c)));
        assert_eq!(decode(b"[]"), None);
    }
}
