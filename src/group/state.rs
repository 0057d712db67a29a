//! The states of a classic group, named as Kafka names them on the wire.

/// Where a group is in its rebalance cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members (possibly committed offsets).
    Empty,
    /// Waiting for members to (re)join before a new generation starts.
    PreparingRebalance,
    /// Generation formed; waiting for the leader's assignment in SyncGroup.
    CompletingRebalance,
    /// Members have their assignments and heartbeat.
    Stable,
    /// Deleted; kept only while in-flight requests still see it.
    Dead,
}

impl GroupState {
    /// The state name DescribeGroups and ListGroups send.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}
