//! Requests to a group coordinator and its replies: plain owned data, so they can cross cores
//! over the channel mesh unchanged when the coordinator is another shard.

use std::time::Duration;

use bytes::Bytes;

use super::consumer::{Description, HeartbeatIn, HeartbeatOut};
use super::offsets::{CommittedOffset, TopicPartition};
use super::state::GroupState;
use crate::error::KelpError;

/// JoinGroup, decoded.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// Empty on a member's first join: the coordinator assigns one.
    pub member_id: String,
    /// `group.instance.id` of a static member, whose id survives restarts.
    pub instance_id: Option<String>,
    /// The client's `client.id`, shown by DescribeGroups.
    pub client_id: String,
    /// The client's address, shown by DescribeGroups.
    pub client_host: String,
    /// Silence after which the member is removed.
    pub session_timeout_ms: i32,
    /// How long a rebalance waits for the members to rejoin.
    pub rebalance_timeout: Duration,
    /// e.g. "consumer"; every member of a group must agree.
    pub protocol_type: String,
    /// (assignor name, subscription metadata), in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: an unknown member first gets MEMBER_ID_REQUIRED and a member id (KIP-394).
    pub require_known_member: bool,
    /// v9+: a rejoining static leader may skip computing an assignment (KIP-814).
    pub supports_skip_assignment: bool,
}

/// One member as the leader sees it in the JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinMember {
    /// The member's id.
    pub member_id: String,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<String>,
    /// Its subscription for the chosen protocol, which the leader assigns from.
    pub metadata: Bytes,
}

/// JoinGroup outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResponse {
    /// Why the join failed, if it did.
    pub error: Option<KelpError>,
    /// The new generation; -1 on failure.
    pub generation_id: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The assignor every member supports, chosen by the coordinator.
    pub protocol_name: Option<String>,
    /// Member id of the leader, who computes the assignment.
    pub leader: String,
    /// KIP-814: the static leader rejoined and keeps the current assignment.
    pub skip_assignment: bool,
    /// The member's (possibly new) id.
    pub member_id: String,
    /// Every member, sent to the leader only.
    pub members: Vec<JoinMember>,
}

impl JoinResponse {
    /// A failed join; `member_id` is echoed (and is the new id for MEMBER_ID_REQUIRED).
    pub fn failed(error: KelpError, member_id: String) -> Self {
        JoinResponse {
            error: Some(error),
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            member_id,
            members: Vec::new(),
        }
    }
}

/// SyncGroup, decoded.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    /// The member syncing.
    pub member_id: String,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<String>,
    /// The generation it joined; an older one is refused.
    pub generation_id: i32,
    /// v5+: checked against the group's, when sent.
    pub protocol_type: Option<String>,
    /// v5+: checked against the group's, when sent.
    pub protocol_name: Option<String>,
    /// (member id, assignment): sent by the leader only.
    pub assignments: Vec<(String, Bytes)>,
}

/// SyncGroup outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResponse {
    /// Why the sync failed, if it did.
    pub error: Option<KelpError>,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The group's chosen assignor.
    pub protocol_name: Option<String>,
    /// This member's share, as the leader assigned it.
    pub assignment: Bytes,
}

impl SyncResponse {
    /// A failed sync.
    pub fn failed(error: KelpError) -> Self {
        SyncResponse {
            error: Some(error),
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// Heartbeat, decoded.
#[derive(Debug, Clone)]
pub struct HeartbeatRequest {
    /// The member proving it is alive.
    pub member_id: String,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<String>,
    /// Its generation; an older one answers ILLEGAL_GENERATION.
    pub generation_id: i32,
}

/// One member leaving: by member id, or by instance id for static members.
#[derive(Debug, Clone)]
pub struct LeavingMember {
    /// The member's id (may be empty when leaving by instance id).
    pub member_id: String,
    /// The static member's `group.instance.id`.
    pub instance_id: Option<String>,
}

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct DescribedMember {
    /// The member's id.
    pub member_id: String,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<String>,
    /// The client's `client.id`.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// Its subscription for the group's protocol.
    pub metadata: Bytes,
    /// Its current assignment.
    pub assignment: Bytes,
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct GroupDescription {
    /// Where the group is in its rebalance cycle.
    pub state: GroupState,
    /// e.g. "consumer"; empty for a group with offsets only.
    pub protocol_type: String,
    /// The chosen assignor.
    pub protocol: String,
    /// Current members.
    pub members: Vec<DescribedMember>,
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone)]
pub struct GroupListing {
    /// The group's id.
    pub group_id: String,
    /// e.g. "consumer"; empty for a group with offsets only.
    pub protocol_type: String,
    /// Its state as Kafka names it (ListGroups v4+ filters on it).
    pub state: &'static str,
    /// "classic" or "consumer" (ListGroups v5+ filters on it).
    pub group_type: &'static str,
}

/// Who commits: a group member (generation >= 0 or a member id) or a "simple" committer.
#[derive(Debug, Clone)]
pub struct CommitRequest {
    /// The committing member; empty for a simple committer.
    pub member_id: String,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<String>,
    /// The member's generation, -1 for a simple committer; a stale one is refused so a
    /// member that lost its partitions cannot overwrite the new owner's offsets.
    pub generation_id: i32,
    /// What to commit, per partition.
    pub offsets: Vec<(TopicPartition, CommittedOffset)>,
    /// Whether the request was OffsetCommit v9 or later, which KIP-848 members must use.
    pub modern: bool,
}

/// TxnOffsetCommit: offsets a transactional producer commits, held until its transaction
/// ends (KIP-98; member fields from KIP-447).
#[derive(Debug, Clone)]
pub struct TxnCommitRequest {
    /// The transactional producer.
    pub producer_id: i64,
    /// Its epoch.
    pub epoch: i16,
    /// The committing member (v3+), empty if not sent.
    pub member_id: String,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<String>,
    /// Its generation (v3+), -1 if not sent.
    pub generation_id: i32,
    /// What to commit, per partition.
    pub offsets: Vec<(TopicPartition, CommittedOffset)>,
}

/// OffsetFetch for one group: None fetches every committed partition.
#[derive(Debug, Clone)]
pub struct FetchRequest {
    /// The partitions asked for; None for all.
    pub partitions: Option<Vec<TopicPartition>>,
    /// KIP-447: a partition whose offset an open transaction holds answers
    /// UNSTABLE_OFFSET_COMMIT instead of its last committed offset.
    pub require_stable: bool,
    /// v9+: the fetching member and its epoch (KIP-848 groups check them).
    pub member: Option<(String, i32)>,
}

/// One partition of an OffsetFetch answer: its committed offset (None: none), or why not.
pub type FetchedOffset = (TopicPartition, Result<Option<CommittedOffset>, KelpError>);

/// A request addressed to the coordinator of one group (`List` goes to every shard).
#[derive(Debug)]
pub enum GroupRequest {
    /// JoinGroup to group `.0`.
    Join(String, JoinRequest),
    /// SyncGroup to group `.0`.
    Sync(String, SyncRequest),
    /// Heartbeat to group `.0`.
    Heartbeat(String, HeartbeatRequest),
    /// LeaveGroup: members leaving group `.0`.
    Leave(String, Vec<LeavingMember>),
    /// DescribeGroups for one group.
    Describe(String),
    /// ListGroups: this shard's groups.
    List,
    /// DeleteGroups for one group.
    Delete(String),
    /// OffsetCommit to group `.0`.
    Commit(String, CommitRequest),
    /// OffsetFetch from group `.0`.
    Fetch(String, FetchRequest),
    /// OffsetDelete: partitions whose offsets group `.0` drops.
    DeleteOffsets(String, Vec<TopicPartition>),
    /// ConsumerGroupHeartbeat (KIP-848) to group `.0`.
    ConsumerHeartbeat(String, Box<HeartbeatIn>),
    /// ConsumerGroupDescribe for one group.
    ConsumerDescribe(String),
    /// TxnOffsetCommit to group `.0`.
    TxnCommit(String, TxnCommitRequest),
    /// ShareGroupHeartbeat (KIP-932) to share group `.0`.
    ShareHeartbeat(String, Box<crate::group::share::messages::ShareHeartbeatIn>),
    /// ShareGroupDescribe for one group.
    ShareDescribe(String),
    /// ShareFetch or ShareAcknowledge to share group `.0`.
    ShareFetch(String, Box<crate::group::share::messages::ShareFetchIn>),
    /// DescribeShareGroupOffsets: every share-partition start of share group `.0`.
    ShareOffsets(String),
    /// AlterShareGroupOffsets: (topic, topic id, partition, start) for share group `.0`.
    ShareAlter(String, Vec<(String, uuid::Uuid, i32, i64)>),
    /// DeleteShareGroupOffsets: topics whose share state group `.0` forgets.
    ShareDeleteOffsets(String, Vec<String>),
    /// A connection that opened share sessions of group `.0` closed: its id.
    ShareClosed(String, u64),
    /// A transaction that committed offsets of a group ended: its offsets become the
    /// group's (commit) or are dropped.
    TxnOutcome {
        /// The group.
        group_id: String,
        /// The transactional producer.
        producer_id: i64,
        /// Whether the transaction committed.
        commit: bool,
    },
}

impl GroupRequest {
    /// The reply refusing this request with a group-level `error`.
    pub fn refuse(self, error: KelpError) -> GroupReply {
        use GroupRequest::*;
        match self {
            Join(_, r) => GroupReply::Join(JoinResponse::failed(error, r.member_id)),
            Sync(..) => GroupReply::Sync(SyncResponse::failed(error)),
            Heartbeat(..) => GroupReply::Heartbeat(Err(error)),
            Leave(..) => GroupReply::Leave(Err(error)),
            Describe(_) => GroupReply::Describe(Err(error)),
            List => GroupReply::List(Vec::new()),
            Delete(_) => GroupReply::Delete(Err(error)),
            Commit(..) => GroupReply::Commit(Err(error)),
            Fetch(..) => GroupReply::Fetch(Err(error)),
            DeleteOffsets(..) => GroupReply::DeleteOffsets(Err(error)),
            ConsumerHeartbeat(..) => GroupReply::ConsumerHeartbeat(Err(error)),
            ConsumerDescribe(_) => GroupReply::ConsumerDescribe(Err(error)),
            TxnCommit(..) => GroupReply::Commit(Err(error)),
            TxnOutcome { .. } | ShareClosed(..) | ShareAlter(..) | ShareDeleteOffsets(..) => {
                GroupReply::Done(Err(error))
            }
            ShareHeartbeat(..) => GroupReply::ShareHeartbeat(Err(error)),
            ShareDescribe(_) => GroupReply::ShareDescribe(Err(error)),
            ShareOffsets(_) => GroupReply::ShareOffsets(Err(error)),
            ShareFetch(..) => GroupReply::ShareFetch(Err(error)),
        }
    }

    /// The group addressed, None for `List`.
    pub fn group_id(&self) -> Option<&str> {
        use GroupRequest::*;
        match self {
            Join(g, _)
            | Sync(g, _)
            | Heartbeat(g, _)
            | Leave(g, _)
            | Describe(g)
            | Delete(g)
            | Commit(g, _)
            | Fetch(g, _)
            | DeleteOffsets(g, _)
            | ConsumerHeartbeat(g, _)
            | ConsumerDescribe(g)
            | TxnCommit(g, _)
            | ShareHeartbeat(g, _)
            | ShareDescribe(g)
            | ShareOffsets(g)
            | ShareAlter(g, _)
            | ShareDeleteOffsets(g, _)
            | ShareFetch(g, _)
            | ShareClosed(g, _)
            | TxnOutcome { group_id: g, .. } => Some(g),
            List => None,
        }
    }
}

/// Per-partition results of an offsets operation.
pub type PartitionResults = Vec<(TopicPartition, Result<(), KelpError>)>;

/// A coordinator's reply, one variant per request.
#[derive(Debug)]
pub enum GroupReply {
    /// To [`GroupRequest::Join`].
    Join(JoinResponse),
    /// To [`GroupRequest::Sync`].
    Sync(SyncResponse),
    /// To [`GroupRequest::Heartbeat`].
    Heartbeat(Result<(), KelpError>),
    /// Group-level result, then one result per leaving member in request order.
    Leave(Result<Vec<Result<(), KelpError>>, KelpError>),
    /// To [`GroupRequest::Describe`].
    Describe(Result<GroupDescription, KelpError>),
    /// To [`GroupRequest::List`].
    List(Vec<GroupListing>),
    /// To [`GroupRequest::Delete`].
    Delete(Result<(), KelpError>),
    /// Group-level error, or one result per committed partition.
    Commit(Result<PartitionResults, KelpError>),
    /// Group-level error or one answer per partition.
    Fetch(Result<Vec<FetchedOffset>, KelpError>),
    /// Group-level error, or one result per partition.
    DeleteOffsets(Result<PartitionResults, KelpError>),
    /// To [`GroupRequest::TxnOutcome`].
    Done(Result<(), KelpError>),
    /// To [`GroupRequest::ConsumerHeartbeat`].
    ConsumerHeartbeat(Result<HeartbeatOut, KelpError>),
    /// To [`GroupRequest::ConsumerDescribe`].
    ConsumerDescribe(Result<Description, KelpError>),
    /// To [`GroupRequest::ShareHeartbeat`].
    ShareHeartbeat(Result<crate::group::share::group::ShareHeartbeatOut, KelpError>),
    /// To [`GroupRequest::ShareDescribe`].
    ShareDescribe(Result<crate::group::share::coordinator::ShareDescription, KelpError>),
    /// To [`GroupRequest::ShareOffsets`]: where each share-partition stands.
    ShareOffsets(Result<Vec<crate::group::share::coordinator::ShareStart>, KelpError>),
    /// To [`GroupRequest::ShareFetch`].
    ShareFetch(Result<crate::group::share::messages::ShareFetchOut, KelpError>),
    /// The coordinator could not be reached.
    Unavailable,
}
