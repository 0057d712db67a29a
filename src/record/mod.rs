//! Kafka record batches (log format v2) as raw bytes.
//!
//! Owns validation (magic, lengths, CRC32C), the in-place base-offset rewrite and reading the
//! batch header fields the broker needs. Never decodes or re-encodes the records themselves,
//! except for the rare by-timestamp offset lookup (see [`batch::first_offset_at_or_after`]),
//! which goes through [`decode`].

pub mod batch;
pub mod build;
pub mod decode;

pub use batch::{BatchHeader, ValidatedBatches, BATCH_HEADER_LEN};
