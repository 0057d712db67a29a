//! DescribeConfigs (key 32, v1-v4): topic configs (overrides and defaults) and a few broker
//! configs clients and tools ask for.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult,
    DescribeConfigsSynonym,
};
use kafka_protocol::messages::DescribeConfigsRequest;

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::cluster::topic_config::{ConfigType, TOPIC_CONFIGS};
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
// Config sources (DescribeConfigs v1+).
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

struct Entry {
    name: String,
    value: String,
    source: i8,
    kind: ConfigType,
    doc: &'static str,
    /// Kafka's synonyms, most specific first: (name, value, source).
    synonyms: Vec<(String, String, i8)>,
}

fn broker_entries(ctx: &RequestContext) -> Vec<Entry> {
    let cfg = &ctx.shard.config;
    let e = |name: &str, value: String, kind, doc| Entry {
        name: name.into(),
        synonyms: vec![(name.into(), value.clone(), SOURCE_STATIC_BROKER)],
        value,
        source: SOURCE_STATIC_BROKER,
        kind,
        doc,
    };
    vec![
        e(
            "auto.create.topics.enable",
            cfg.auto_create_topics.to_string(),
            ConfigType::Boolean,
            "Auto-create topics on Metadata and Produce.",
        ),
        e(
            "num.partitions",
            cfg.default_partitions.to_string(),
            ConfigType::Int,
            "Partitions of auto-created topics.",
        ),
        e(
            "socket.request.max.bytes",
            cfg.max_request_bytes.to_string(),
            ConfigType::Int,
            "Largest request accepted.",
        ),
        e(
            "message.max.bytes",
            "1048588".into(),
            ConfigType::Int,
            "Largest record batch accepted.",
        ),
        e(
            "default.replication.factor",
            "1".into(),
            ConfigType::Int,
            "Single broker: always 1.",
        ),
    ]
}

/// Handles a DescribeConfigs request.
pub fn handle(
    ctx: &RequestContext,
    req: DescribeConfigsRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = DescribeConfigsResponse::default();
    for res in req.resources {
        let entries: Result<Vec<Entry>, KelpError> = match res.resource_type {
            RESOURCE_TOPIC
                if !ctx.allowed(
                    Operation::DescribeConfigs,
                    ResourceType::Topic,
                    res.resource_name.as_str(),
                ) =>
            {
                Err(KelpError::TopicAuthorizationFailed)
            }
            RESOURCE_BROKER if !ctx.cluster_allowed(Operation::DescribeConfigs) => {
                Err(KelpError::ClusterAuthorizationFailed)
            }
            RESOURCE_TOPIC => match ctx
                .shard
                .cluster
                .described_topic(res.resource_name.as_str())
            {
                Some(meta) => Ok(TOPIC_CONFIGS
                    .iter()
                    .map(|d| {
                        let set = meta.configs.get(d.name);
                        // The override, then the broker config that gives the default.
                        let synonyms =
                            set.map(|v| (d.name.to_string(), v.clone(), SOURCE_DYNAMIC_TOPIC))
                                .into_iter()
                                .chain(d.synonym.map(|s| {
                                    (s.to_string(), d.default.to_string(), SOURCE_DEFAULT)
                                }))
                                .collect();
                        Entry {
                            name: d.name.into(),
                            value: set.cloned().unwrap_or_else(|| d.default.to_string()),
                            source: if set.is_some() {
                                SOURCE_DYNAMIC_TOPIC
                            } else {
                                SOURCE_DEFAULT
                            },
                            kind: d.kind,
                            doc: d.doc,
                            synonyms,
                        }
                    })
                    .collect()),
                None => Err(KelpError::UnknownTopicOrPartition),
            },
            RESOURCE_BROKER => Ok(broker_entries(ctx)),
            other => Err(KelpError::InvalidRequest(format!(
                "unsupported resource type {other}"
            ))),
        };
        let mut r = DescribeConfigsResult::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        match entries {
            Ok(list) => {
                r.error_code = code::NONE;
                r.configs = list
                    .into_iter()
                    .filter(|e| {
                        res.configuration_keys
                            .as_ref()
                            .is_none_or(|keys| keys.iter().any(|k| k.as_str() == e.name))
                    })
                    .map(|e| {
                        let mut c = DescribeConfigsResourceResult::default();
                        c.name = sb(e.name.clone());
                        c.value = Some(sb(e.value.clone()));
                        c.read_only = e.source == SOURCE_STATIC_BROKER;
                        c.config_source = e.source;
                        c.config_type = e.kind as i8;
                        if req.include_synonyms {
                            c.synonyms = e
                                .synonyms
                                .into_iter()
                                .map(|(name, value, source)| {
                                    DescribeConfigsSynonym::default()
                                        .with_name(sb(name))
                                        .with_value(Some(sb(value)))
                                        .with_source(source)
                                })
                                .collect();
                        }
                        // Null unless asked for, as Kafka (the codec's default is "").
                        c.documentation = req.include_documentation.then(|| sb(e.doc));
                        c
                    })
                    .collect();
            }
            Err(e) => {
                r.error_code = e.code();
                r.error_message = Some(sb(e.to_string()));
            }
        }
        resp.results.push(r);
    }
    encoded(Response::encode(&ctx.header, &resp))
}
