//! ApiVersions (key 18): the supported-version table, the features (KIP-584: the
//! `transaction.version` level, which tells clients to run transactions v2), and KIP-511's
//! answer to unknown versions.

use std::sync::OnceLock;

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, ApiVersionsResponse, FinalizedFeatureKey, SupportedFeatureKey,
};
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

/// The feature naming the transaction protocol level (KIP-890).
const TRANSACTION_VERSION: &str = "transaction.version";

/// The feature naming the group coordinator's protocol level: 1 serves KIP-848 groups.
const GROUP_VERSION: &str = "group.version";

/// The epoch of the finalized features: clients keep the features of the highest epoch they
/// saw, so it grows with every start (a changed `--transaction-version` reaches clients that
/// reconnect), as Kafka's metadata offset grows.
fn features_epoch() -> i64 {
    static EPOCH: OnceLock<i64> = OnceLock::new();
    *EPOCH.get_or_init(crate::clock::now_ms)
}

/// Adds the features to a successful answer: the levels this broker supports (to v4+
/// requests: Kafka leaves out features whose minimum is 0 before, KAFKA-17492) and the
/// finalized ones: `transaction.version` (`--transaction-version`; 0 is left out) and
/// `group.version` 1 (KIP-848 consumer groups are served), as Kafka 4 lists them.
fn with_features(mut r: ApiVersionsResponse, ctx: &RequestContext) -> ApiVersionsResponse {
    // Features are tagged fields, which v3 brought.
    if ctx.header.api_version < 3 {
        return r;
    }
    let txn_level = ctx.shard.config.transaction_version;
    let supported = [(TRANSACTION_VERSION, 2), (GROUP_VERSION, 1)].into_iter();
    if ctx.header.api_version >= 4 {
        r.supported_features = supported
            .map(|(name, max)| {
                SupportedFeatureKey::default()
                    .with_name(name.into())
                    .with_min_version(0)
                    .with_max_version(max)
            })
            .collect();
    }
    r.finalized_features_epoch = features_epoch();
    let finalized = (txn_level > 0)
        .then_some((TRANSACTION_VERSION, txn_level))
        .into_iter()
        .chain([(GROUP_VERSION, 1)]);
    r.finalized_features = finalized
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(name.into())
                .with_min_version_level(level)
                .with_max_version_level(level)
        })
        .collect();
    r
}

/// Kafka's rule for client_software_name/version (KIP-511):
/// `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`.
fn valid_software_field(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_alphanumeric();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            edge(first)
                && edge(last)
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
        }
        _ => false,
    }
}

/// Answers a supported ApiVersions request.
pub fn handle(ctx: &RequestContext, req: ApiVersionsRequest) -> Result<Response, ConnectionError> {
    let (name, version) = (
        req.client_software_name.as_str(),
        req.client_software_version.as_str(),
    );
    tracing::debug!(client = %name, version = %version, "api versions");
    if ctx.header.api_version >= 3 && !(valid_software_field(name) && valid_software_field(version))
    {
        // As Kafka: INVALID_REQUEST, connection kept open so the client can retry.
        let mut r = ApiVersionsResponse::default();
        r.error_code = code::INVALID_REQUEST;
        return encoded(Response::encode(&ctx.header, &r));
    }
    encoded(Response::encode(
        &ctx.header,
        &with_features(response(code::NONE), ctx),
    ))
}

/// Answers an ApiVersions request of a version Kelp does not know: a v0 response carrying
/// UNSUPPORTED_VERSION and the ApiVersions range, so the client can pick a version and retry.
pub fn unsupported(ctx: &RequestContext) -> Result<Response, ConnectionError> {
    // Like Kafka 4, list only ApiVersions itself: enough to pick a version to retry with.
    let mut r = response(code::UNSUPPORTED_VERSION);
    r.api_keys.retain(|a| a.api_key == ctx.header.api_key);
    encoded(Response::encode_at(&ctx.header, &r, 0))
}

#[cfg(test)]
mod tests {
    use super::valid_software_field as ok;

    #[test]
    fn client_software_fields() {
        assert!(ok("apache-kafka-java") && ok("4.0.0") && ok("librdkafka") && ok("a"));
        assert!(!ok("") && !ok("bad name!") && !ok("-x") && !ok("x.") && !ok("x_y"));
    }
}
