//! SaslAuthenticate (key 36, v0-v2): one SASL message each way, after SaslHandshake. A
//! failed authentication is answered with SASL_AUTHENTICATION_FAILED and the connection
//! closes; nothing else is served on it. With `--connections-max-reauth-ms` the answer
//! carries the session lifetime (KIP-368) and the client re-authenticates before it ends.

use std::time::{Duration, Instant};

use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::AuthStep;
use crate::error::{code, ConnectionError};
use crate::protocol::Response;

/// Handles a SaslAuthenticate request.
pub fn handle(
    ctx: &RequestContext,
    req: SaslAuthenticateRequest,
) -> Result<Response, ConnectionError> {
    let reauth = Duration::from_millis(ctx.shard.config.connections_max_reauth_ms);
    let mut resp = SaslAuthenticateResponse::default();
    match ctx
        .session
        .authenticate(&req.auth_bytes, reauth, Instant::now())
    {
        AuthStep::Continue(out) => resp.auth_bytes = out.into(),
        AuthStep::Done(out, lifetime) => {
            resp.auth_bytes = out.into();
            resp.session_lifetime_ms = i64::try_from(lifetime.as_millis()).unwrap_or(i64::MAX);
        }
        AuthStep::Failed(message) => {
            resp.error_code = code::SASL_AUTHENTICATION_FAILED;
            // Kafka's words: the client learns nothing about which part was wrong (for
            // OAUTHBEARER, RFC 7628's error JSON it was already sent).
            resp.error_message = Some(sb(message.as_deref().unwrap_or(
                "Authentication failed during authentication due to invalid credentials with SASL mechanism",
            )));
        }
    }
    encoded(Response::encode(&ctx.header, &resp))
}
