//! FindCoordinator (key 10, v0-v6): each group belongs to one shard. By default this broker
//! is the coordinator of every group and requests for a group are forwarded to its shard
//! (`shard/`); with `--advertise-shards` the answer names the owning shard's own node, so
//! the group's requests arrive on its core. Several Kelp nodes over SeaweedMQ spread the
//! groups over the live nodes (`cluster::leaders`). Transactional ids are placed like groups
//! (the same hash), so their coordinator is found the same way.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;

/// Key types: consumer group and transactional id (KIP-98).
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

fn check_key(ctx: &RequestContext, key: &str, key_type: i8) -> Result<(), KelpError> {
    match key_type {
        KEY_TYPE_GROUP if key.is_empty() => Err(KelpError::InvalidGroupId),
        KEY_TYPE_GROUP if !ctx.allowed(Operation::Describe, ResourceType::Group, key) => {
            Err(KelpError::GroupAuthorizationFailed)
        }
        KEY_TYPE_GROUP => Ok(()),
        KEY_TYPE_TRANSACTION => super::txn::check_id(ctx, key, Operation::Describe),
        other => Err(KelpError::InvalidRequest(format!(
            "unknown key type {other}"
        ))),
    }
}

/// Handles a FindCoordinator request.
pub fn handle(
    ctx: &RequestContext,
    req: FindCoordinatorRequest,
) -> Result<Response, ConnectionError> {
    let cluster = &ctx.shard.cluster;
    let mut resp = FindCoordinatorResponse::default();
    if ctx.header.api_version >= 4 {
        // Batched lookups (KIP-699): one entry per key.
        resp.coordinators = req
            .coordinator_keys
            .iter()
            .map(|k| {
                let mut c = Coordinator::default().with_key(k.clone());
                match check_key(ctx, k.as_str(), req.key_type) {
                    Ok(()) => {
                        let n = cluster.coordinator(k.as_str());
                        let (host, port) = n.on(&ctx.session.listener.name);
                        c.node_id = BrokerId(n.id);
                        c.host = sb(host);
                        c.port = port;
                        c.error_code = code::NONE;
                    }
                    Err(e) => {
                        c.node_id = BrokerId(-1);
                        c.host = sb("");
                        c.port = -1;
                        c.error_code = e.code();
                        c.error_message = e.message().map(sb);
                    }
                }
                c
            })
            .collect();
    } else {
        match check_key(ctx, req.key.as_str(), req.key_type) {
            Ok(()) => {
                let n = cluster.coordinator(req.key.as_str());
                let (host, port) = n.on(&ctx.session.listener.name);
                resp.error_code = code::NONE;
                resp.node_id = BrokerId(n.id);
                resp.host = sb(host);
                resp.port = port;
            }
            Err(e) => {
                resp.error_code = e.code();
                resp.error_message = e.message().map(sb);
                resp.node_id = BrokerId(-1);
                resp.host = sb("");
                resp.port = -1;
            }
        }
    }
    encoded(Response::encode(&ctx.header, &resp))
}
