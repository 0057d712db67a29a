//! ApiVersions (key 18): the supported-version table, and KIP-511's answer to unknown versions.

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::{ApiVersion, ApiVersionsResponse};
use kafka_protocol::messages::ApiVersionsRequest;

use super::{encoded, RequestContext};
use crate::error::{code, ConnectionError};
use crate::protocol::versions::SUPPORTED;
use crate::protocol::Response;

fn response(error_code: i16) -> ApiVersionsResponse {
    let mut r = ApiVersionsResponse::default();
    r.error_code = error_code;
    r.api_keys = SUPPORTED
        .iter()
        .map(|a| {
            ApiVersion::default()
                .with_api_key(a.key)
                .with_min_version(a.min)
                .with_max_version(a.max)
        })
        .collect();
    r
}

/// Answers a supported ApiVersions request.
pub fn handle(ctx: &RequestContext, body: Bytes) -> Result<Response, ConnectionError> {
    let req: ApiVersionsRequest = ctx.decode(body)?;
    tracing::debug!(
        client = %req.client_software_name.as_str(),
        version = %req.client_software_version.as_str(),
        "api versions"
    );
    encoded(Response::encode(&ctx.header, &response(code::NONE)))
}

/// Answers an ApiVersions request of a version Kelp does not know: a v0 response carrying
/// UNSUPPORTED_VERSION and the table, so the client can pick a version and retry.
pub fn unsupported(ctx: &RequestContext) -> Result<Response, ConnectionError> {
    encoded(Response::encode_at(
        &ctx.header,
        &response(code::UNSUPPORTED_VERSION),
        0,
    ))
}
