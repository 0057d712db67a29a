//! Topic configs Kelp knows: their defaults, validation and DescribeConfigs metadata.

use crate::error::KelpError;

/// Read on every produce ([`super::TopicMeta::max_message_bytes`]), so named once here.
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";
/// Read on every produce ([`super::TopicMeta::log_append_time`]).
pub const MESSAGE_TIMESTAMP_TYPE: &str = "message.timestamp.type";
/// Kafka's default `max.message.bytes` (1 MiB plus the record batch overhead), so clients
/// tuned for Kafka fit.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1_048_588;

/// Kind of a config value, for validation and DescribeConfigs `config_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    /// "true" or "false".
    Boolean = 1,
    /// Any string.
    String = 2,
    /// A 32-bit integer.
    Int = 3,
    /// A 16-bit integer.
    Short = 4,
    /// A 64-bit integer.
    Long = 5,
    /// A floating-point number.
    Double = 6,
    /// A comma-separated list.
    List = 7,
}

/// What values a config accepts besides its type (Kafka's validators in LogConfig).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Check {
    /// Any value of the type.
    Any,
    /// A number at least this.
    AtLeast(i64),
    /// A whole number in this range (inclusive).
    Between(i64, i64),
    /// A fraction in this range (inclusive).
    Fraction(f64, f64),
    /// One of these strings.
    OneOf(&'static [&'static str]),
    /// A non-empty comma-separated list of these.
    ListOf(&'static [&'static str]),
    /// gzip's level: -1 (the codec's default) or 1-9.
    GzipLevel,
    /// Throttled replicas: empty, `*`, or `partition:broker` pairs.
    Replicas,
}

/// A known topic config and its broker default.
#[derive(Debug, Clone, Copy)]
pub struct ConfigDef {
    /// Kafka's name for it.
    pub name: &'static str,
    /// The default, as DescribeConfigs reports it (Kafka 4.1's).
    pub default: &'static str,
    /// What values it takes.
    pub kind: ConfigType,
    /// Further limits on the value.
    pub check: Check,
    /// The broker config that sets its default on Kafka (DescribeConfigs' synonym).
    pub synonym: Option<&'static str>,
    /// Whether Kelp acts on it; the others are accepted, stored and described as Kafka
    /// does, without effect (listed in docs/topics.md).
    pub acted_on: bool,
    /// DescribeConfigs' documentation string (v3+).
    pub doc: &'static str,
}

const fn def(
    name: &'static str,
    default: &'static str,
    kind: ConfigType,
    check: Check,
    synonym: Option<&'static str>,
    acted_on: bool,
    doc: &'static str,
) -> ConfigDef {
    ConfigDef {
        name,
        default,
        kind,
        check,
        synonym,
        acted_on,
        doc,
    }
}

use Check::{AtLeast, Between};
use ConfigType::{Boolean, Double, Int, List, Long};

const CODECS: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
const MAX: &str = "9223372036854775807";

/// Every topic config of Kafka 4.1, in name order: accepted by CreateTopics and
/// IncrementalAlterConfigs, listed by DescribeConfigs with Kafka's defaults and synonyms.
#[rustfmt::skip]
pub const TOPIC_CONFIGS: &[ConfigDef] = &[
    def("cleanup.policy", "delete", List, Check::ListOf(&["compact", "delete"]),
        Some("log.cleanup.policy"), true,
        "Retention policy: delete old segments, or compact to the latest record per key."),
    def("compression.gzip.level", "-1", Int, Check::GzipLevel, Some("compression.gzip.level"),
        false, "gzip level when compression.type is gzip."),
    def("compression.lz4.level", "9", Int, Between(1, 17), Some("compression.lz4.level"), false,
        "lz4 level when compression.type is lz4."),
    def("compression.type", "producer", ConfigType::String, Check::OneOf(CODECS),
        Some("compression.type"), false,
        "Final compression type; 'producer' keeps the producer's codec."),
    def("compression.zstd.level", "3", Int, Between(-131_072, 22),
        Some("compression.zstd.level"), false, "zstd level when compression.type is zstd."),
    def("delete.retention.ms", "86400000", Long, AtLeast(0),
        Some("log.cleaner.delete.retention.ms"), true,
        "How long tombstones are kept on compacted topics."),
    def("file.delete.delay.ms", "60000", Long, AtLeast(0), Some("log.segment.delete.delay.ms"),
        false, "Wait before a deleted segment's file is removed."),
    def("flush.messages", MAX, Long, AtLeast(1), Some("log.flush.interval.messages"), false,
        "Records between forced fsyncs (Kelp: --fsync-policy)."),
    def("flush.ms", MAX, Long, AtLeast(0), None, false,
        "Time between forced fsyncs (Kelp: --fsync-policy)."),
    def("follower.replication.throttled.replicas", "", List, Check::Replicas, None, false,
        "Replicas whose replication is throttled on followers."),
    def("index.interval.bytes", "4096", Int, AtLeast(0), Some("log.index.interval.bytes"), false,
        "Bytes between offset index entries."),
    def("leader.replication.throttled.replicas", "", List, Check::Replicas, None, false,
        "Replicas whose replication is throttled on the leader."),
    def("local.retention.bytes", "-2", Long, AtLeast(-2), Some("log.local.retention.bytes"),
        false, "Local bytes kept with tiered storage (-2: retention.bytes)."),
    def("local.retention.ms", "-2", Long, AtLeast(-2), Some("log.local.retention.ms"), false,
        "Local time kept with tiered storage (-2: retention.ms)."),
    def("max.compaction.lag.ms", MAX, Long, AtLeast(1),
        Some("log.cleaner.max.compaction.lag.ms"), true,
        "Longest a record stays uncompacted."),
    def(MAX_MESSAGE_BYTES, "1048588", Int, AtLeast(0), Some("message.max.bytes"), true,
        "Largest record batch allowed."),
    def("message.timestamp.after.max.ms", "3600000", Long, AtLeast(0),
        Some("log.message.timestamp.after.max.ms"), false,
        "How far ahead of the broker's clock a CreateTime timestamp may be."),
    def("message.timestamp.before.max.ms", MAX, Long, AtLeast(0),
        Some("log.message.timestamp.before.max.ms"), false,
        "How far behind the broker's clock a CreateTime timestamp may be."),
    def(MESSAGE_TIMESTAMP_TYPE, "CreateTime", ConfigType::String,
        Check::OneOf(&["CreateTime", "LogAppendTime"]), Some("log.message.timestamp.type"), true,
        "CreateTime (the producer's) or LogAppendTime (the broker's)."),
    def("min.cleanable.dirty.ratio", "0.5", Double, Check::Fraction(0.0, 1.0),
        Some("log.cleaner.min.cleanable.ratio"), true,
        "Share of a log not yet compacted that starts the cleaner."),
    def("min.compaction.lag.ms", "0", Long, AtLeast(0), Some("log.cleaner.min.compaction.lag.ms"),
        true, "Shortest a record stays uncompacted."),
    def("min.insync.replicas", "1", Int, AtLeast(1), Some("min.insync.replicas"), false,
        "Minimum in-sync replicas for acks=all (one replica here)."),
    def("preallocate", "false", Boolean, Check::Any, Some("log.preallocate"), false,
        "Preallocate segment files."),
    def("remote.log.copy.disable", "false", Boolean, Check::Any, None, false,
        "Stop copying segments to tiered storage."),
    def("remote.log.delete.on.disable", "false", Boolean, Check::Any, None, false,
        "Delete tiered segments when tiered storage is turned off."),
    def("remote.storage.enable", "false", Boolean, Check::Any, None, false,
        "Tiered storage for the topic."),
    def("retention.bytes", "-1", Long, Check::Any, Some("log.retention.bytes"), true,
        "Maximum partition size before old segments are deleted (-1: no limit)."),
    def("retention.ms", "604800000", Long, AtLeast(-1), None, true,
        "Maximum age of data before it is deleted (-1: no limit)."),
    def("segment.bytes", "1073741824", Int, AtLeast(1_048_576), Some("log.segment.bytes"), true,
        "Segment file size."),
    def("segment.index.bytes", "10485760", Int, AtLeast(4), Some("log.index.size.max.bytes"),
        false, "Offset index size per segment."),
    def("segment.jitter.ms", "0", Long, AtLeast(0), None, false,
        "Random jitter subtracted from segment.ms."),
    def("segment.ms", "604800000", Long, AtLeast(1), None, true,
        "Time after which a segment is rolled."),
    def("unclean.leader.election.enable", "false", Boolean, Check::Any,
        Some("unclean.leader.election.enable"), false, "Not applicable: one replica."),
];

/// The definition of a known topic config.
pub fn lookup(name: &str) -> Option<&'static ConfigDef> {
    TOPIC_CONFIGS.iter().find(|c| c.name == name)
}

/// Broker default of a topic config.
pub fn default_of(name: &str) -> Option<&'static str> {
    lookup(name).map(|c| c.default)
}

/// Rejects unknown configs and values that do not parse as their type or fall outside
/// Kafka's limits for them.
pub fn validate(name: &str, value: &str) -> Result<(), KelpError> {
    let def = lookup(name)
        .ok_or_else(|| KelpError::InvalidConfig(format!("unknown topic config '{name}'")))?;
    let whole = value.trim().parse::<i64>().ok();
    let typed = match def.kind {
        ConfigType::Boolean => value == "true" || value == "false",
        ConfigType::Int => value.trim().parse::<i32>().is_ok(),
        ConfigType::Short => value.trim().parse::<i16>().is_ok(),
        ConfigType::Long => whole.is_some(),
        ConfigType::Double => value.trim().parse::<f64>().is_ok_and(f64::is_finite),
        ConfigType::String | ConfigType::List => true,
    };
    let fits = typed
        && match def.check {
            Check::Any => true,
            Check::AtLeast(min) => whole.is_some_and(|v| v >= min),
            Check::Between(lo, hi) => whole.is_some_and(|v| (lo..=hi).contains(&v)),
            Check::Fraction(lo, hi) => value
                .trim()
                .parse::<f64>()
                .is_ok_and(|v| (lo..=hi).contains(&v)),
            Check::OneOf(choices) => choices.contains(&value),
            Check::ListOf(choices) => {
                !value.trim().is_empty() && value.split(',').all(|v| choices.contains(&v.trim()))
            }
            Check::GzipLevel => whole.is_some_and(|v| v == -1 || (1..=9).contains(&v)),
            Check::Replicas => {
                let v = value.trim();
                v.is_empty()
                    || v == "*"
                    || v.split(',').all(|pair| {
                        pair.trim().split_once(':').is_some_and(|(p, b)| {
                            p.trim().parse::<u32>().is_ok() && b.trim().parse::<u32>().is_ok()
                        })
                    })
            }
        };
    if fits {
        Ok(())
    } else {
        Err(KelpError::InvalidConfig(format!(
            "invalid value '{value}' for '{name}'"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka 4.1.1's DescribeConfigs of a new topic (a real broker, by scripts/kafka.sh):
    /// every name and default.
    const KAFKA_4_1: &[(&str, &str)] = &[
        ("cleanup.policy", "delete"),
        ("compression.gzip.level", "-1"),
        ("compression.lz4.level", "9"),
        ("compression.type", "producer"),
        ("compression.zstd.level", "3"),
        ("delete.retention.ms", "86400000"),
        ("file.delete.delay.ms", "60000"),
        ("flush.messages", "9223372036854775807"),
        ("flush.ms", "9223372036854775807"),
        ("follower.replication.throttled.replicas", ""),
        ("index.interval.bytes", "4096"),
        ("leader.replication.throttled.replicas", ""),
        ("local.retention.bytes", "-2"),
        ("local.retention.ms", "-2"),
        ("max.compaction.lag.ms", "9223372036854775807"),
        ("max.message.bytes", "1048588"),
        ("message.timestamp.after.max.ms", "3600000"),
        ("message.timestamp.before.max.ms", "9223372036854775807"),
        ("message.timestamp.type", "CreateTime"),
        ("min.cleanable.dirty.ratio", "0.5"),
        ("min.compaction.lag.ms", "0"),
        ("min.insync.replicas", "1"),
        ("preallocate", "false"),
        ("remote.log.copy.disable", "false"),
        ("remote.log.delete.on.disable", "false"),
        ("remote.storage.enable", "false"),
        ("retention.bytes", "-1"),
        ("retention.ms", "604800000"),
        ("segment.bytes", "1073741824"),
        ("segment.index.bytes", "10485760"),
        ("segment.jitter.ms", "0"),
        ("segment.ms", "604800000"),
        ("unclean.leader.election.enable", "false"),
    ];

    #[test]
    fn the_same_configs_and_defaults_as_kafka() {
        let ours: Vec<(&str, &str)> = TOPIC_CONFIGS.iter().map(|d| (d.name, d.default)).collect();
        assert_eq!(ours, KAFKA_4_1);
        for d in TOPIC_CONFIGS {
            assert_eq!(validate(d.name, d.default), Ok(()), "{}", d.name);
        }
    }

    #[test]
    fn values_are_held_to_kafkas_limits() {
        for (name, value) in [
            ("delete.retention.ms", "0"),
            ("retention.ms", "-1"),
            ("retention.bytes", "-5"),
            ("min.cleanable.dirty.ratio", "0.75"),
            ("compression.gzip.level", "9"),
            ("compression.zstd.level", "-5"),
            ("cleanup.policy", "compact,delete"),
            ("cleanup.policy", "delete, compact"),
            ("leader.replication.throttled.replicas", "0:1,1:1"),
            ("follower.replication.throttled.replicas", "*"),
            ("segment.bytes", "1048576"),
            ("preallocate", "true"),
        ] {
            assert_eq!(validate(name, value), Ok(()), "{name}={value}");
        }
        for (name, value) in [
            ("delete.retention.ms", "-1"),
            ("retention.ms", "-2"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("min.cleanable.dirty.ratio", "NaN"),
            ("compression.gzip.level", "0"),
            ("compression.lz4.level", "18"),
            ("cleanup.policy", ""),
            ("cleanup.policy", "compact,forever"),
            ("leader.replication.throttled.replicas", "0-1"),
            ("segment.bytes", "1000"),
            ("segment.bytes", "4294967296"),
            ("message.timestamp.type", "logappendtime"),
            ("preallocate", "yes"),
            ("no.such.config", "1"),
        ] {
            assert!(validate(name, value).is_err(), "{name}={value}");
        }
    }
}
