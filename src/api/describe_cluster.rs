//! DescribeCluster (key 60, v0-v1): the advertised nodes (one, or one per shard with
//! `--advertise-shards`); the first is the controller.

use kafka_protocol::messages::describe_cluster_response::{
    DescribeClusterBroker, DescribeClusterResponse,
};
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::Operation;
use crate::error::{code, ConnectionError};
use crate::protocol::Response;

/// Handles a DescribeCluster request.
pub fn handle(
    ctx: &RequestContext,
    req: DescribeClusterRequest,
) -> Result<Response, ConnectionError> {
    let c = &ctx.shard.cluster;
    let mut resp = DescribeClusterResponse::default();
    if !ctx.cluster_allowed(Operation::Describe) {
        let e = crate::error::KelpError::ClusterAuthorizationFailed;
        resp.error_code = e.code();
        resp.error_message = e.message().map(sb);
        resp.endpoint_type = req.endpoint_type;
        return encoded(Response::encode(&ctx.header, &resp));
    }
    resp.error_code = code::NONE;
    resp.endpoint_type = req.endpoint_type;
    resp.cluster_id = sb(c.cluster_id.clone());
    resp.controller_id = BrokerId(c.controller().id);
    resp.cluster_authorized_operations = ctx.operations_if(
        req.include_cluster_authorized_operations,
        crate::auth::acl::ResourceType::Cluster,
        crate::auth::acl::CLUSTER_NAME,
    );
    resp.brokers = c
        .brokers()
        .iter()
        .map(|n| {
            // The addresses of the listener this client came in on.
            let (host, port) = n.on(&ctx.session.listener.name);
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(n.id))
                .with_host(sb(host))
                .with_port(port)
        })
        .collect();
    encoded(Response::encode(&ctx.header, &resp))
}
