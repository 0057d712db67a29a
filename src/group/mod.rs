//! Consumer group coordination (Kafka's classic group protocol and KIP-848 consumer groups),
//! sharded by group id.
//!
//! Each group lives on exactly one shard, its coordinator shard
//! ([`crate::cluster::routing::group_owner`]). [`Coordinator`] holds that shard's groups and committed offsets and answers [`GroupRequest`]s,
//! whether they come from a connection on the same core or over the channel mesh from another.
//! [`Group`] is the pure classic state machine, [`consumer::ConsumerGroup`] the KIP-848 one,
//! [`share`] the KIP-932 share groups; [`OffsetStore`] the pluggable offsets store.
//! Nothing here touches the network, partitions or cluster metadata; `api/` validates topics.

pub mod classic;
pub mod consumer;
pub mod coordinator;
pub mod member;
pub mod messages;
pub mod metered;
pub mod offsets;
pub mod protocol;
pub mod share;
pub mod state;

pub use classic::{Group, GroupConfig, Pending};
pub use coordinator::Coordinator;
pub use messages::{GroupReply, GroupRequest};
pub use metered::MeteredOffsets;
pub use offsets::{CommittedOffset, InMemoryOffsetStore, OffsetStore};
pub use state::GroupState;
