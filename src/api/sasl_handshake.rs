//! SaslHandshake (key 17, v1): the client names its SASL mechanism; the answer lists the
//! enabled ones. An unknown mechanism (or a handshake on a listener without SASL) is answered
//! with its error and the connection then closes, as Kafka does.

use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};

use super::{encoded, sb, RequestContext};
use crate::error::{code, ConnectionError};
use crate::protocol::Response;

/// Handles a SaslHandshake request.
pub fn handle(
    ctx: &RequestContext,
    req: SaslHandshakeRequest,
) -> Result<Response, ConnectionError> {
    let session = &ctx.session;
    let (names, ok) = session.handshake(req.mechanism.as_str());
    let mut resp = SaslHandshakeResponse::default();
    resp.mechanisms = names.into_iter().map(sb).collect();
    resp.error_code = if ok {
        code::NONE
    } else if !session.uses_sasl() {
        code::ILLEGAL_SASL_STATE
    } else {
        tracing::info!(peer = %session.peer, mechanism = %req.mechanism.as_str(),
            "SASL mechanism not enabled; closing");
        code::UNSUPPORTED_SASL_MECHANISM
    };
    encoded(Response::encode(&ctx.header, &resp))
}
