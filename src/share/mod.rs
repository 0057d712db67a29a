//! Share groups (KIP-932, "queues for Kafka"): members of a share group read the same
//! partitions together, each record handed to one member at a time under a time-limited
//! lock and acknowledged one by one. This module owns the pure state of one share-partition
//! (a group's view of one partition: which records are available, acquired by whom,
//! acknowledged or archived). It calls only `std`; the coordinator, sessions and the
//! ShareFetch/ShareAcknowledge handlers that drive it come with the APIs
//! (docs/dev/share-groups-kip932.md has what Kafka 4.2 does).

pub mod partition;
