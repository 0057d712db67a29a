//! A response frame as a list of byte slices, written to the socket with one gather write.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::Encodable;

use super::error_codes::ErrorCodes;
use super::RequestHeader;
use crate::error::KelpError;

/// One complete response frame (length prefix included) as slices in wire order.
#[derive(Debug, Default)]
pub struct Response {
    /// Written with one writev: record batches go out as the cached slices, not copied.
    pub chunks: Vec<Bytes>,
}

impl Response {
    /// Total frame bytes, length prefix included.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(Bytes::len).sum()
    }

    /// Whether the frame is empty (never for a built response).
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Frames `body` (slices, in order) with the length prefix and response header.
    pub fn from_body(header: &RequestHeader, mut body: Vec<Bytes>, first: BytesMut) -> Self {
        let flexible_header = header.support().response_header_version(header.api_version) == 1;
        let body_len: usize = first.len() + body.iter().map(Bytes::len).sum::<usize>();
        let hdr_len = 4 + usize::from(flexible_header);
        let mut head = BytesMut::with_capacity(4 + hdr_len + first.len());
        head.put_i32((hdr_len + body_len) as i32);
        head.put_i32(header.correlation_id);
        if flexible_header {
            head.put_u8(0); // no tagged fields in the response header
        }
        head.extend_from_slice(&first);
        let mut chunks = Vec::with_capacity(body.len() + 1);
        chunks.push(head.freeze());
        chunks.append(&mut body);
        Response { chunks }
    }

    /// Encodes a `kafka-protocol` message at the request's version, counting its error codes
    /// (`kelp_request_errors_total`).
    pub fn encode<M: Encodable + ErrorCodes>(
        header: &RequestHeader,
        msg: &M,
    ) -> Result<Self, KelpError> {
        Self::encode_at(header, msg, header.api_version)
    }

    /// Encodes a message at an explicit version (ApiVersions answers v0 to unknown versions),
    /// counting its error codes under the request's API.
    pub fn encode_at<M: Encodable + ErrorCodes>(
        header: &RequestHeader,
        msg: &M,
        version: i16,
    ) -> Result<Self, KelpError> {
        msg.error_codes(&mut |code| crate::metrics::errors::count(header.api_key, code));
        // Header and body share one buffer; the length prefix is patched in afterwards.
        let mut buf = BytesMut::with_capacity(256);
        buf.put_i32(0);
        buf.put_i32(header.correlation_id);
        if header.support().response_header_version(header.api_version) == 1 {
            buf.put_u8(0);
        }
        msg.encode(&mut buf, version)
            .map_err(|e| KelpError::InvalidRequest(format!("encoding response: {e}")))?;
        let len = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        Ok(Response {
            chunks: vec![buf.freeze()],
        })
    }
}
