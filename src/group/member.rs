//! One member of a classic group: its identity, timeouts, protocols, assignment and the
//! JoinGroup/SyncGroup responses it is waiting for.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;

use super::messages::{JoinResponse, SyncResponse};

/// A group member as the coordinator tracks it.
pub struct Member {
    /// The member id the coordinator assigned.
    pub id: String,
    /// group.instance.id of a static member (KIP-345).
    pub instance_id: Option<String>,
    /// The client's `client.id`, for DescribeGroups.
    pub client_id: String,
    /// The client's address, for DescribeGroups.
    pub client_host: String,
    /// Silence after which the member is removed.
    pub session_timeout: Duration,
    /// How long a rebalance waits for this member to rejoin.
    pub rebalance_timeout: Duration,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// What the leader assigned it in the current generation.
    pub assignment: Bytes,
    /// The member is expired when this passes without a heartbeat (or join/sync).
    pub session_deadline: Instant,
    /// Order of joining; the earliest member still present becomes leader when one is needed.
    pub join_order: u64,
    /// Its JoinGroup waiting for the join phase to end.
    pub awaiting_join: Option<oneshot::Sender<JoinResponse>>,
    /// Its SyncGroup waiting for the leader's assignment.
    pub awaiting_sync: Option<oneshot::Sender<SyncResponse>>,
    /// Sent SyncGroup in the current generation.
    pub synced: bool,
}

impl Member {
    /// Metadata the member sent for `protocol`.
    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// Pushes the session deadline out from `now`.
    pub fn touch(&mut self, now: Instant) {
        self.session_deadline = now + self.session_timeout;
    }

    /// Whether the member supports `protocol`.
    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(n, _)| n == protocol)
    }
}
