//! DescribeConfigs (key 32, v1-v4): topic configs (overrides and defaults, with the broker
//! configs that give them), this node's broker configs (`cluster::broker_config`) and group
//! configs (`cluster::group_config`: every one Kafka 4.2 knows, the group's override or the
//! broker's value, for any group id, existing or not, as Kafka).

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult,
    DescribeConfigsSynonym,
};
use kafka_protocol::messages::DescribeConfigsRequest;

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::cluster::broker_config::BrokerConfig;
use crate::cluster::group_config::GROUP_CONFIGS;
use crate::cluster::topic_config::{ConfigType, TOPIC_CONFIGS};
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_GROUP: i8 = 32;
// Config sources (DescribeConfigs v1+).
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
/// Kafka's GROUP_CONFIG (the admin client's DYNAMIC_GROUP_CONFIG).
const SOURCE_GROUP: i8 = 8;

struct Entry {
    name: String,
    value: Option<String>,
    source: i8,
    read_only: bool,
    kind: ConfigType,
    doc: &'static str,
    /// Kafka's synonyms, most specific first: (name, value, source).
    synonyms: Vec<(String, Option<String>, i8)>,
}

/// A broker config's value as Kafka's synonyms list it: the flag's, then the default.
fn broker_synonyms(b: &BrokerConfig) -> Vec<(String, Option<String>, i8)> {
    let default = (b.name.to_string(), b.default.clone(), SOURCE_DEFAULT);
    if b.set {
        vec![
            (b.name.to_string(), b.value.clone(), SOURCE_STATIC_BROKER),
            default,
        ]
    } else {
        vec![default]
    }
}

/// Whether broker resource `name` is "" (the cluster-wide dynamic defaults) or one of this
/// process's broker ids (each shard's with --advertise-shards); Kafka's INVALID_REQUEST
/// otherwise.
pub(super) fn check_broker_name(ctx: &RequestContext, name: &str) -> Result<(), KelpError> {
    if name.is_empty() {
        return Ok(());
    }
    let id: i32 = name.parse().map_err(|_| {
        KelpError::InvalidRequest(format!("Broker id must be an integer, but it is: {name}"))
    })?;
    // With --advertise-shards this process is a broker per shard core (ids node_id + shard).
    let cfg = &ctx.shard.config;
    let own = cfg.node_id;
    let shards = if cfg.advertise_shards {
        ctx.shard.count as i64
    } else {
        1
    };
    if !(i64::from(own)..i64::from(own) + shards).contains(&i64::from(id)) {
        return Err(KelpError::InvalidRequest(format!(
            "Unexpected broker id, expected {own} or empty string, but received {name}"
        )));
    }
    Ok(())
}

/// This node's broker configs, for resource name `name`: Kafka answers its own id with
/// every config, the empty name (the cluster-wide dynamic defaults) with none, since Kelp
/// has no dynamic broker configs, and any other name with INVALID_REQUEST.
fn broker_entries(ctx: &RequestContext, name: &str) -> Result<Vec<Entry>, KelpError> {
    if name.is_empty() {
        return Ok(Vec::new());
    }
    check_broker_name(ctx, name)?;
    Ok(ctx
        .shard
        .broker_configs()
        .iter()
        .map(|b| Entry {
            name: b.name.to_string(),
            value: b.value.clone(),
            source: if b.set {
                SOURCE_STATIC_BROKER
            } else {
                SOURCE_DEFAULT
            },
            read_only: true,
            kind: b.kind,
            doc: b.doc,
            synonyms: broker_synonyms(b),
        })
        .collect())
}

/// A topic's configs: its overrides, else the broker's value (a flag's, or the default).
fn topic_entries(ctx: &RequestContext, name: &str) -> Result<Vec<Entry>, KelpError> {
    let meta = ctx
        .shard
        .cluster
        .described_topic(name)
        .ok_or(KelpError::UnknownTopicOrPartition)?;
    let brokers = ctx.shard.broker_configs();
    Ok(TOPIC_CONFIGS
        .iter()
        .map(|d| {
            let set = meta.configs.get(d.name);
            let broker = d.synonym.and_then(|s| brokers.iter().find(|b| b.name == s));
            // The override, then the broker configs that give the default.
            let mut synonyms: Vec<(String, Option<String>, i8)> = set
                .map(|v| (d.name.to_string(), Some(v.clone()), SOURCE_DYNAMIC_TOPIC))
                .into_iter()
                .collect();
            synonyms.extend(broker.map(broker_synonyms).unwrap_or_default());
            let (value, source) = match (set, broker) {
                (Some(v), _) => (Some(v.clone()), SOURCE_DYNAMIC_TOPIC),
                (None, Some(b)) if b.set => (b.value.clone(), SOURCE_STATIC_BROKER),
                (None, Some(b)) => (b.value.clone(), SOURCE_DEFAULT),
                (None, None) => (Some(d.default.to_string()), SOURCE_DEFAULT),
            };
            Entry {
                name: d.name.into(),
                value,
                source,
                read_only: false,
                kind: d.kind,
                doc: d.doc,
                synonyms,
            }
        })
        .collect())
}

/// A group's configs: its overrides, else the broker's values. Kafka lists each with one
/// synonym, itself (no broker config has a group config's name), from the group or the
/// default.
fn group_entries(ctx: &RequestContext, name: &str) -> Result<Vec<Entry>, KelpError> {
    if name.is_empty() {
        return Err(KelpError::InvalidRequest(
            "Group name must not be empty".into(),
        ));
    }
    let cluster = &ctx.shard.cluster;
    let overrides = cluster.group_configs(name);
    Ok(GROUP_CONFIGS
        .iter()
        .map(|d| {
            let (value, source) = match overrides.get(d.name) {
                Some(v) => (v.clone(), SOURCE_GROUP),
                None => (
                    cluster
                        .group_limits
                        .default_value(d.name)
                        .unwrap_or_else(|| d.default.to_string()),
                    SOURCE_DEFAULT,
                ),
            };
            Entry {
                name: d.name.into(),
                value: Some(value.clone()),
                source,
                read_only: false,
                kind: d.kind,
                doc: d.doc,
                synonyms: vec![(d.name.to_string(), Some(value), source)],
            }
        })
        .collect())
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
            RESOURCE_GROUP
                if !ctx.allowed(
                    Operation::DescribeConfigs,
                    ResourceType::Group,
                    res.resource_name.as_str(),
                ) =>
            {
                Err(KelpError::GroupAuthorizationFailed)
            }
            RESOURCE_TOPIC => topic_entries(ctx, res.resource_name.as_str()),
            RESOURCE_BROKER => broker_entries(ctx, res.resource_name.as_str()),
            RESOURCE_GROUP => group_entries(ctx, res.resource_name.as_str()),
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
                        c.value = e.value.clone().map(sb);
                        c.read_only = e.read_only;
                        c.config_source = e.source;
                        c.config_type = e.kind as i8;
                        if req.include_synonyms {
                            c.synonyms = e
                                .synonyms
                                .into_iter()
                                .map(|(name, value, source)| {
                                    DescribeConfigsSynonym::default()
                                        .with_name(sb(name))
                                        .with_value(value.map(sb))
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
