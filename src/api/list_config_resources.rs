//! ListConfigResources (key 74, v0-1; v0 was ListClientMetricsResources): the resources
//! that have configs, which Kafka 4.1's `kafka-configs --describe` asks for before
//! describing each. DESCRIBE_CONFIGS on the cluster. v0 lists client metrics resources
//! (Kelp has none); v1 the asked types (none asked: all): every topic, this node's broker
//! id(s) for BROKER and BROKER_LOGGER, the groups with config overrides; another type is
//! INVALID_REQUEST.

use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::Operation;
use crate::error::{ConnectionError, KelpError};
use crate::protocol::Response;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;

/// Handles a ListConfigResources request.
pub fn handle(
    ctx: &RequestContext,
    req: ListConfigResourcesRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = ListConfigResourcesResponse::default();
    let v = ctx.header.api_version;
    let types: Vec<i8> = if v == 0 {
        vec![CLIENT_METRICS]
    } else if req.resource_types.is_empty() {
        vec![TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP]
    } else {
        req.resource_types.clone()
    };
    let refused = if !ctx.cluster_allowed(Operation::DescribeConfigs) {
        Some(KelpError::ClusterAuthorizationFailed)
    } else if types
        .iter()
        .any(|t| ![TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP].contains(t))
    {
        Some(KelpError::InvalidRequest(
            "Unsupported resource type".into(),
        ))
    } else {
        None
    };
    if let Some(e) = refused {
        resp.error_code = e.code();
        return encoded(Response::encode(&ctx.header, &resp));
    }
    let snap = ctx.shard.cluster.snapshot();
    let cfg = &ctx.shard.config;
    let brokers = if cfg.advertise_shards {
        ctx.shard.count
    } else {
        1
    };
    let mut out = Vec::new();
    for t in types {
        let names: Vec<String> = match t {
            TOPIC => {
                let mut n: Vec<String> = snap.topics.keys().cloned().collect();
                n.sort();
                n
            }
            BROKER | BROKER_LOGGER => (0..brokers)
                .map(|s| (i64::from(cfg.node_id) + s as i64).to_string())
                .collect(),
            GROUP => {
                let mut n: Vec<String> = snap
                    .group_configs
                    .iter()
                    .filter(|(_, c)| !c.is_empty())
                    .map(|(g, _)| g.clone())
                    .collect();
                n.sort();
                n
            }
            _ => Vec::new(),
        };
        out.extend(names.into_iter().map(|name| {
            let mut r = ConfigResource::default();
            r.resource_name = sb(name);
            r.resource_type = t;
            r
        }));
    }
    resp.config_resources = out;
    encoded(Response::encode(&ctx.header, &resp))
}
