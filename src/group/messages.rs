//! Requests to a group coordinator and its replies: plain owned data, so they can cross cores
//! over the channel mesh unchanged when the coordinator is another shard.

use std::time::Duration;

use bytes::Bytes;

use super::offsets::{CommittedOffset, TopicPartition};
use super::state::GroupState;
use crate::error::KelpError;

/// JoinGroup, decoded.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout: Duration,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: an unknown member first gets MEMBER_ID_REQUIRED and a member id (KIP-394).
    pub require_known_member: bool,
    /// v9+: a rejoining static leader may skip computing an assignment (KIP-814).
    pub supports_skip_assignment: bool,
}

/// One member as the leader sees it in the JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

/// JoinGroup outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResponse {
    pub error: Option<KelpError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub skip_assignment: bool,
    pub member_id: String,
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
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

/// SyncGroup outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResponse {
    pub error: Option<KelpError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
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
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation_id: i32,
}

/// One member leaving: by member id, or by instance id for static members.
#[derive(Debug, Clone)]
pub struct LeavingMember {
    pub member_id: String,
    pub instance_id: Option<String>,
}

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct DescribedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct GroupDescription {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<DescribedMember>,
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: GroupState,
}

/// Who commits: a group member (generation >= 0 or a member id) or a "simple" committer.
#[derive(Debug, Clone)]
pub struct CommitRequest {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation_id: i32,
    pub offsets: Vec<(TopicPartition, CommittedOffset)>,
}

/// OffsetFetch for one group: None fetches every committed partition.
#[derive(Debug, Clone)]
pub struct FetchRequest {
    pub partitions: Option<Vec<TopicPartition>>,
}

/// A request addressed to the coordinator of one group (`List` goes to every shard).
#[derive(Debug)]
pub enum GroupRequest {
    Join(String, JoinRequest),
    Sync(String, SyncRequest),
    Heartbeat(String, HeartbeatRequest),
    Leave(String, Vec<LeavingMember>),
    Describe(String),
    List,
    Delete(String),
    Commit(String, CommitRequest),
    Fetch(String, FetchRequest),
    DeleteOffsets(String, Vec<TopicPartition>),
}

impl GroupRequest {
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
            | DeleteOffsets(g, _) => Some(g),
            List => None,
        }
    }
}

/// Per-partition results of an offsets operation.
pub type PartitionResults = Vec<(TopicPartition, Result<(), KelpError>)>;

/// A coordinator's reply, one variant per request.
#[derive(Debug)]
pub enum GroupReply {
    Join(JoinResponse),
    Sync(SyncResponse),
    Heartbeat(Result<(), KelpError>),
    /// Group-level result, then one result per leaving member in request order.
    Leave(Result<Vec<Result<(), KelpError>>, KelpError>),
    Describe(Result<GroupDescription, KelpError>),
    List(Vec<GroupListing>),
    Delete(Result<(), KelpError>),
    Commit(Result<PartitionResults, KelpError>),
    /// Group-level error or (partition, offset if committed).
    Fetch(Result<Vec<(TopicPartition, Option<CommittedOffset>)>, KelpError>),
    DeleteOffsets(Result<PartitionResults, KelpError>),
    /// The coordinator could not be reached.
    Unavailable,
}
