//! Share groups (KIP-932, "queues for Kafka"): members of a share group read the same
//! partitions together, each record handed to one member at a time under a time-limited
//! lock and acknowledged one by one. This module owns the pure state: a share group's
//! membership and assignment ([`group`]), one share-partition ([`partition`]: which
//! records are available, acquired by whom, acknowledged or archived) and the share
//! sessions members fetch in ([`session`]). It calls `error` and
//! the consumer group's topic view only; the coordinator, sessions and the ShareFetch /
//! ShareAcknowledge handlers that drive it come with the APIs
//! (docs/dev/share-groups-kip932.md has what Kafka 4.2 does).

pub mod group;
pub mod partition;
pub mod session;
