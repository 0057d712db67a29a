//! Kafka wire protocol: framing, request headers, the supported-version table and the two
//! hand-written codecs of the data path (Produce request, Fetch response) that keep record
//! data as zero-copy `Bytes`. Everything else is encoded with the `kafka-protocol` crate.
//!
//! Knows nothing of shards or partitions; `api/` calls into it.

pub mod error_codes;
pub mod fetch_response;
pub mod frame;
pub mod header;
pub mod produce_request;
pub mod request;
pub mod response;
pub mod shape;
pub mod versions;
pub mod wire;

pub use header::RequestHeader;
pub use response::Response;
