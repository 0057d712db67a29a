//! Request header v0-v2 (v2 adds tagged fields for flexible API versions).

use super::versions;
use super::wire::{Reader, WireError};
use crate::error::ConnectionError;

/// A parsed request header and where the body starts in the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    /// Which API ([`super::versions::key`]).
    pub api_key: i16,
    /// Its version, which decides the body's layout.
    pub api_version: i16,
    /// Echoed in the response so the client can match it to the request.
    pub correlation_id: i32,
    /// The client's `client.id`, for logs and DescribeGroups.
    pub client_id: Option<String>,
    /// Offset of the request body within the frame.
    pub body_offset: usize,
}

impl RequestHeader {
    /// Parses the header at the start of `frame`. Unknown api keys and truncated headers are
    /// connection errors; an unsupported version of a known key is reported to the caller
    /// through [`RequestHeader::support`] so ApiVersions can still answer (KIP-511).
    pub fn parse(frame: &[u8]) -> Result<Self, ConnectionError> {
        let mut r = Reader::new(frame);
        let bad = |e: WireError| ConnectionError::Malformed(format!("request header: {e}"));
        let api_key = r.i16().map_err(bad)?;
        let api_version = r.i16().map_err(bad)?;
        let correlation_id = r.i32().map_err(bad)?;
        let client_id = r.nullable_string(false).map_err(bad)?.map(str::to_owned);
        let support = versions::lookup(api_key).ok_or(ConnectionError::UnknownApiKey(api_key))?;
        // Header v2 only for supported flexible versions: an unsupported ApiVersions request
        // is answered from what follows the client id, which it never needs.
        if support.supports(api_version) && support.is_flexible(api_version) {
            r.skip_tagged_fields().map_err(bad)?;
        }
        Ok(RequestHeader {
            api_key,
            api_version,
            correlation_id,
            client_id,
            body_offset: r.pos(),
        })
    }

    /// The support entry of this request's api key (always present after a successful parse).
    pub fn support(&self) -> &'static versions::ApiSupport {
        versions::lookup(self.api_key).expect("api key checked during parse")
    }

    /// Whether this request's version is one Kelp implements.
    pub fn version_supported(&self) -> bool {
        self.support().supports(self.api_version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_v1_and_v2_headers() {
        // Metadata v1: key 3, version 1, corr 7, client "ab".
        let f = [0, 3, 0, 1, 0, 0, 0, 7, 0, 2, b'a', b'b', 0xaa];
        let h = RequestHeader::parse(&f).unwrap();
        assert_eq!((h.api_key, h.api_version, h.correlation_id), (3, 1, 7));
        assert_eq!(h.client_id.as_deref(), Some("ab"));
        assert_eq!(h.body_offset, 12);
        // Metadata v12 (flexible): tagged fields byte after the client id.
        let f = [0, 3, 0, 12, 0, 0, 0, 9, 0xff, 0xff, 0, 0xbb];
        let h = RequestHeader::parse(&f).unwrap();
        assert_eq!(h.client_id, None);
        assert_eq!(h.body_offset, 11);
    }

    #[test]
    fn rejects_unknown_keys_and_truncation() {
        assert!(matches!(
            RequestHeader::parse(&[0x27, 0x0f, 0, 0, 0, 0, 0, 1, 0xff, 0xff]),
            Err(ConnectionError::UnknownApiKey(9999))
        ));
        assert!(RequestHeader::parse(&[0, 3, 0]).is_err());
        assert!(RequestHeader::parse(&[0, 3, 0, 1, 0, 0, 0, 7, 0, 9, b'a']).is_err());
    }
}
