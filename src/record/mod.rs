//! Kafka record batches (log format v2) as raw bytes.
//!
//! Owns validation (magic, lengths, CRC32C, header counts, and for uncompressed batches the
//! records themselves against the header), the in-place base-offset rewrite, reading the
//! batch header fields the broker needs, and walking records ([`walk`]) for the rare readers
//! that need them (by-timestamp lookups, the SeaweedMQ forwarder). Never re-encodes records.

pub mod batch;
pub mod build;
pub mod control;
pub mod walk;

pub use batch::{BatchHeader, ValidatedBatches, BATCH_HEADER_LEN};
