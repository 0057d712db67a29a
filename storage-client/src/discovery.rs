//! Finding SeaweedFS servers through the master, and opening gRPC channels.
//!
//! The master's `ListClusterNodes` lists the registered brokers (`client_type = "broker"`,
//! addresses are gRPC addresses) and filers (`"filer"`, addresses are HTTP addresses; see
//! [`crate::addr`]). Polling it is all a gateway needs (spec §4.1).

use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

use crate::addr;
use crate::pb::master_pb::seaweed_client::SeaweedClient;
use crate::pb::master_pb::ListClusterNodesRequest;
use crate::{Error, Result};

/// `client_type` of SeaweedMQ brokers in `ListClusterNodes`.
pub const BROKER: &str = "broker";
/// `client_type` of filers in `ListClusterNodes`.
pub const FILER: &str = "filer";

/// Timeout for establishing a TCP/HTTP2 connection in [`connect`].
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens a plaintext gRPC channel to an endpoint URI such as `http://127.0.0.1:17777`.
///
/// Fails if the URI is invalid or the connection cannot be established within
/// [`CONNECT_TIMEOUT`]. The channel reconnects on its own after later failures.
pub async fn connect(endpoint: &str) -> Result<Channel> {
    let ep = Endpoint::from_shared(endpoint.to_owned())?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(true);
    ep.connect().await.map_err(|source| Error::Connect {
        endpoint: endpoint.to_owned(),
        source,
    })
}

/// Addresses of the cluster nodes of `client_type` (`"broker"`, `"filer"`, ...) known to the
/// master at `master_grpc_endpoint` (an endpoint URI, e.g. from
/// [`addr::grpc_endpoint_of_http`]). Asks with `filer_group = ""` and `limit = 1000`.
pub async fn cluster_nodes(master_grpc_endpoint: &str, client_type: &str) -> Result<Vec<String>> {
    let mut client = SeaweedClient::new(connect(master_grpc_endpoint).await?);
    let resp = client
        .list_cluster_nodes(ListClusterNodesRequest {
            client_type: client_type.to_owned(),
            filer_group: String::new(),
            limit: 1000,
        })
        .await?
        .into_inner();
    Ok(resp
        .cluster_nodes
        .into_iter()
        .map(|n| n.address)
        .filter(|a| !a.is_empty())
        .collect())
}

/// gRPC endpoint URIs of all brokers known to the master at `master_http` (HTTP address form,
/// `host:port` or `host:port.grpcPort`).
pub async fn broker_endpoints(master_http: &str) -> Result<Vec<String>> {
    let master = addr::grpc_endpoint_of_http(master_http)?;
    let nodes = cluster_nodes(&master, BROKER).await?;
    Ok(nodes.iter().map(|a| addr::grpc_endpoint(a)).collect())
}

/// gRPC endpoint URIs of all filers known to the master at `master_http` (HTTP address form).
pub async fn filer_endpoints(master_http: &str) -> Result<Vec<String>> {
    let master = addr::grpc_endpoint_of_http(master_http)?;
    let nodes = cluster_nodes(&master, FILER).await?;
    nodes
        .iter()
        .map(|a| Ok(addr::grpc_endpoint_of_http(a)?))
        .collect()
}
