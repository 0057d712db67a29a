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

/// A known topic config and its broker default.
#[derive(Debug, Clone, Copy)]
pub struct ConfigDef {
    /// Kafka's name for it.
    pub name: &'static str,
    /// Kelp's default, as DescribeConfigs reports it.
    pub default: &'static str,
    /// What values it takes.
    pub kind: ConfigType,
    /// DescribeConfigs' documentation string (v3+).
    pub doc: &'static str,
}

/// Topic configs accepted by CreateTopics and listed by DescribeConfigs.
pub const TOPIC_CONFIGS: &[ConfigDef] = &[
    ConfigDef {
        name: "cleanup.policy",
        default: "delete",
        kind: ConfigType::List,
        doc: "Retention policy: delete or compact.",
    },
    ConfigDef {
        name: "compression.type",
        default: "producer",
        kind: ConfigType::String,
        doc: "Final compression type; 'producer' keeps the producer's codec.",
    },
    ConfigDef {
        name: "max.message.bytes",
        default: "1048588",
        kind: ConfigType::Int,
        doc: "Largest record batch size allowed.",
    },
    ConfigDef {
        name: "message.timestamp.type",
        default: "CreateTime",
        kind: ConfigType::String,
        doc: "CreateTime or LogAppendTime.",
    },
    ConfigDef {
        name: "min.insync.replicas",
        default: "1",
        kind: ConfigType::Int,
        doc: "Minimum in-sync replicas for acks=all.",
    },
    ConfigDef {
        name: "retention.bytes",
        default: "-1",
        kind: ConfigType::Long,
        doc: "Maximum partition size before old segments are deleted.",
    },
    ConfigDef {
        name: "retention.ms",
        default: "604800000",
        kind: ConfigType::Long,
        doc: "Maximum age of data before it is deleted.",
    },
    ConfigDef {
        name: "segment.bytes",
        default: "1073741824",
        kind: ConfigType::Int,
        doc: "Segment file size.",
    },
    ConfigDef {
        name: "segment.ms",
        default: "604800000",
        kind: ConfigType::Long,
        doc: "Time after which a segment is rolled.",
    },
    ConfigDef {
        name: "unclean.leader.election.enable",
        default: "false",
        kind: ConfigType::Boolean,
        doc: "Not applicable to a single broker.",
    },
];

/// The definition of a known topic config.
pub fn lookup(name: &str) -> Option<&'static ConfigDef> {
    TOPIC_CONFIGS.iter().find(|c| c.name == name)
}

/// Broker default of a topic config.
pub fn default_of(name: &str) -> Option<&'static str> {
    lookup(name).map(|c| c.default)
}

/// The values a config takes, where they are a fixed set (Kafka's ValidString/ValidList).
fn choices(name: &str) -> Option<&'static [&'static str]> {
    Some(match name {
        MESSAGE_TIMESTAMP_TYPE => &["CreateTime", "LogAppendTime"],
        "cleanup.policy" => &["delete", "compact"],
        "compression.type" => &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"],
        _ => return None,
    })
}

/// Rejects unknown configs and values that do not parse as their type or are not one of
/// its choices.
pub fn validate(name: &str, value: &str) -> Result<(), KelpError> {
    let def = lookup(name)
        .ok_or_else(|| KelpError::InvalidConfig(format!("unknown topic config '{name}'")))?;
    let ok = match def.kind {
        ConfigType::Boolean => value == "true" || value == "false",
        ConfigType::Int => value.parse::<i32>().is_ok(),
        ConfigType::Short => value.parse::<i16>().is_ok(),
        ConfigType::Long => value.parse::<i64>().is_ok(),
        ConfigType::Double => value.parse::<f64>().is_ok(),
        ConfigType::String => choices(name).is_none_or(|c| c.contains(&value)),
        ConfigType::List => choices(name)
            .is_none_or(|c| !value.is_empty() && value.split(',').all(|v| c.contains(&v.trim()))),
    };
    if ok {
        Ok(())
    } else {
        Err(KelpError::InvalidConfig(format!(
            "invalid value '{value}' for '{name}'"
        )))
    }
}
