//! DescribeCluster (key 60, v0-v1): this broker as the only node and the controller.

use bytes::Bytes;
use kafka_protocol::messages::describe_cluster_response::{
    DescribeClusterBroker, DescribeClusterResponse,
};
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest};

use super::{encoded, sb, RequestContext};
use crate::error::{code, ConnectionError};
use crate::protocol::Response;

/// Handles a DescribeCluster request.
pub fn handle(ctx: &RequestContext, body: Bytes) -> Result<Response, ConnectionError> {
    let req: DescribeClusterRequest = ctx.decode(body)?;
    let c = &ctx.shard.cluster;
    let mut resp = DescribeClusterResponse::default();
    resp.error_code = code::NONE;
    resp.endpoint_type = req.endpoint_type;
    resp.cluster_id = sb(c.cluster_id.clone());
    resp.controller_id = BrokerId(c.node_id);
    resp.cluster_authorized_operations = i32::MIN;
    resp.brokers = vec![DescribeClusterBroker::default()
        .with_broker_id(BrokerId(c.node_id))
        .with_host(sb(c.host.clone()))
        .with_port(c.port)];
    encoded(Response::encode(&ctx.header, &resp))
}
