//! Kelp: a Kafka-compatible, thread-per-core broker front-end.
//!
//! Data path, top to bottom: [`server`] (executors, connections) → [`protocol`] (frames,
//! headers, codecs) → [`api`] (one handler per Kafka API) → [`shard`] (cross-core routing) →
//! [`partition`] (offsets, batch cache) with [`record`] (batch validation); [`group`] is the
//! consumer group coordinator, sharded by group id. [`log`] is the embedded durable storage
//! behind the cache (`--storage local`). [`cluster`] holds
//! the shared topic metadata; [`auth`] who is on a connection; [`error`] maps failures to Kafka error codes.

pub mod api;
pub mod auth;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod deadline;
pub mod disk;
pub mod error;
pub mod forwarder;
pub mod group;
pub mod hex;
pub mod log;
pub mod metrics;
pub mod partition;
pub mod protocol;
pub mod record;
pub mod server;
pub mod shard;
pub mod storage;
pub mod txn;
