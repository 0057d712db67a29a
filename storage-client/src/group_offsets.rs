//! Kafka consumer-group offsets as SeaweedFS's Go Kafka gateway stores them on the filer.
//!
//! One small JSON file per (group, topic, partition), stored inline in the filer entry:
//! `/topics/kafka/.meta/consumer_offsets/<group>/<topic>/<partition>/offset` holding
//! `{"type":"offset","value":<next offset>,"committed_at":<unix ms>,"metadata":"..."}`
//! (spec §9.1). Writing the same layout keeps Kelp and the Go gateway interchangeable.

use serde::Deserialize;

/// Filer directory under which all Kafka consumer-group offsets live.
pub const ROOT: &str = "/topics/kafka/.meta/consumer_offsets";

/// Name of the offset file inside a partition directory (see [`dir`]).
pub const FILE_NAME: &str = "offset";

/// The directory holding all offset files of `group` (delete it recursively to drop a group).
pub fn group_dir(group: &str) -> String {
    format!("{ROOT}/{group}")
}

/// The directory holding the file named [`FILE_NAME`] for one (group, topic, partition).
pub fn dir(group: &str, topic: &str, partition: i32) -> String {
    format!("{ROOT}/{group}/{topic}/{partition}")
}

/// A committed offset as stored on the filer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredOffset {
    /// The committed (next-to-consume) offset.
    pub offset: i64,
    /// When it was committed, unix milliseconds.
    pub committed_at_ms: i64,
    /// Client metadata passed with the commit.
    pub metadata: String,
}

/// An offset file that cannot be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The content is not the expected JSON document.
    #[error("offset file is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The document's `type` is not `"offset"` (the Go type also allows `"timestamp"`).
    #[error("offset file has type {0:?}, expected \"offset\"")]
    NotAnOffset(String),
}

/// Serializes a commit in the Go gateway's JSON layout (field order as Go writes it).
pub fn encode(offset: i64, committed_at_ms: i64, metadata: &str) -> Vec<u8> {
    let metadata = serde_json::Value::String(metadata.to_owned());
    format!(
        r#"{{"type":"offset","value":{offset},"committed_at":{committed_at_ms},"metadata":{metadata}}}"#
    )
    .into_bytes()
}

#[derive(Deserialize)]
struct Wire {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    value: i64,
    #[serde(default)]
    committed_at: i64,
    #[serde(default)]
    metadata: Option<String>,
}

/// Parses an offset file. A missing `type` is accepted as `"offset"`; missing
/// `committed_at`/`metadata` default to 0 and `""` (as Go's decoder does).
pub fn decode(b: &[u8]) -> Result<StoredOffset, DecodeError> {
    let w: Wire = serde_json::from_slice(b)?;
    match w.kind.as_deref() {
        None | Some("offset") => {}
        Some(other) => return Err(DecodeError::NotAnOffset(other.to_owned())),
    }
    Ok(StoredOffset {
        offset: w.value,
        committed_at_ms: w.committed_at,
        metadata: w.metadata.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(
            dir("g1", "orders", 3),
            "/topics/kafka/.meta/consumer_offsets/g1/orders/3"
        );
        assert_eq!(group_dir("g1"), "/topics/kafka/.meta/consumer_offsets/g1");
    }

    #[test]
    fn encode_matches_go_layout() {
        let b = encode(42, 1_700_000_000_123, "m");
        assert_eq!(
            std::str::from_utf8(&b).expect("utf8"),
            r#"{"type":"offset","value":42,"committed_at":1700000000123,"metadata":"m"}"#
        );
    }

    #[test]
    fn round_trip() {
        for (off, ts, md) in [
            (0, 0, ""),
            (-1, 5, "x"),
            (
                i64::MAX,
                1_700_000_000_000,
                "quote \" backslash \\ nl \n ünï <&>",
            ),
        ] {
            let got = decode(&encode(off, ts, md)).expect("decode");
            assert_eq!(
                got,
                StoredOffset {
                    offset: off,
                    committed_at_ms: ts,
                    metadata: md.to_owned()
                }
            );
        }
    }

    #[test]
    fn decodes_go_output() {
        // Go's encoding/json escapes <, > and & as \u003c etc.
        let go = br#"{"type":"offset","value":7,"committed_at":1,"metadata":"\u003cm\u003e"}"#;
        let got = decode(go).expect("decode");
        assert_eq!(got.offset, 7);
        assert_eq!(got.metadata, "<m>");
        let minimal = decode(br#"{"value":3}"#).expect("decode");
        assert_eq!((minimal.offset, minimal.committed_at_ms), (3, 0));
    }

    #[test]
    fn rejects_garbage() {
        assert!(matches!(decode(b"12"), Err(DecodeError::Json(_))));
        assert!(matches!(decode(b""), Err(DecodeError::Json(_))));
        assert!(matches!(
            decode(br#"{"type":"timestamp","value":3}"#),
            Err(DecodeError::NotAnOffset(_))
        ));
    }
}
