//! Share groups (KIP-932, "queues for Kafka"): members of a share group read the same
//! partitions together, each record handed to one member at a time under a time-limited
//! lock and acknowledged one by one. This module owns the state: a share group's membership
//! and assignment ([`group`]), one share-partition ([`partition`]: which records are
//! available, acquired by whom, acknowledged or archived), the share sessions members fetch
//! in ([`session`]), their durable form ([`state`]) and one shard's share groups
//! ([`coordinator`]). `shard::share` reads the partitions for it; the handlers are
//! `api::share_*` (docs/dev/share-groups-kip932.md has what Kafka 4.2 does).

pub mod coordinator;
pub mod group;
pub mod messages;
pub mod partition;
pub mod session;
pub mod state;
