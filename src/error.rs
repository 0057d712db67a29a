//! Typed broker errors and their single mapping to Kafka error codes.
//!
//! Every handler reports failures as [`KelpError`]; [`KelpError::code`] is the one place a
//! failure becomes a wire error code. The [`code`] module names the codes Kelp uses.

use thiserror::Error;

/// Kafka protocol error codes used by Kelp (see the Kafka protocol guide, "Error Codes"),
/// under Kafka's own names so a code seen in a client's log can be searched for here.
pub mod code {
    /// Success: every response field that carries an error carries this when nothing failed.
    pub const NONE: i16 = 0;
    /// Fetch or ListOffsets below the log start or past the high watermark: the consumer
    /// resets by its `auto.offset.reset`.
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    /// A batch failed its CRC or framing checks: never stored, the producer fails the batch.
    pub const CORRUPT_MESSAGE: i16 = 2;
    /// The topic or partition is not in the cluster metadata; clients refresh and retry.
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    /// The shard owning the partition is gone (shutting down), or another Kelp node leads
    /// it: retriable, clients refresh metadata.
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    /// The request's deadline passed, including a produce that waited on unreachable storage.
    pub const REQUEST_TIMED_OUT: i16 = 7;
    /// A batch bigger than the topic's `max.message.bytes`.
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    /// OffsetCommit metadata longer than the broker keeps.
    pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    /// The coordinator (here: the producer id source) is not ready yet; retried by clients.
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    /// The group was removed while the request waited on it: the client finds the
    /// coordinator again.
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    /// The group lives on another Kelp node: the client finds the coordinator again.
    pub const NOT_COORDINATOR: i16 = 16;
    /// A topic name Kafka would refuse (empty, `.`/`..`, too long, other characters).
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    /// Produce acks other than 0, 1 and -1.
    pub const INVALID_REQUIRED_ACKS: i16 = 21;
    /// A group request from a member of an older generation.
    pub const ILLEGAL_GENERATION: i16 = 22;
    /// A joining member shares no protocol with the group, or has another protocol type.
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    /// An empty group id where one is required.
    pub const INVALID_GROUP_ID: i16 = 24;
    /// A member id the group does not know (expired or never joined): the client rejoins.
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    /// A session timeout outside the broker's allowed range.
    pub const INVALID_SESSION_TIMEOUT: i16 = 26;
    /// The group is rebalancing: the member rejoins.
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    /// A request version Kelp does not serve (ApiVersions answers it in v0, KIP-511).
    pub const UNSUPPORTED_VERSION: i16 = 35;
    /// The principal may not do this to the topic.
    pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    /// The principal may not do this to the group.
    pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
    /// The principal may not do this to the cluster.
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
    /// ACL requests to a broker without an authorizer.
    pub const SECURITY_DISABLED: i16 = 54;
    /// A SASL mechanism the broker does not enable.
    pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
    /// A SASL request out of order.
    pub const ILLEGAL_SASL_STATE: i16 = 34;
    /// Wrong credentials, or a SASL exchange that failed.
    pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
    /// Something named (a user's credentials) does not exist.
    pub const RESOURCE_NOT_FOUND: i16 = 91;
    /// The same resource twice in one request.
    pub const DUPLICATE_RESOURCE: i16 = 92;
    /// A credential the broker does not accept (iterations, salt).
    pub const UNACCEPTABLE_CREDENTIAL: i16 = 93;
    /// CreateTopics for a name already taken.
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    /// A partition count below 1.
    pub const INVALID_PARTITIONS: i16 = 37;
    /// CreateTopics/CreatePartitions: replica assignments that do not fit.
    pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
    /// A replication factor above 1: Kelp is one broker.
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    /// A topic config name or value Kelp does not accept.
    pub const INVALID_CONFIG: i16 = 40;
    /// A request that decodes but asks for something that makes no sense.
    pub const INVALID_REQUEST: i16 = 42;
    /// Refused by policy: e.g. DeleteRecords on an engine that cannot move the log start.
    pub const POLICY_VIOLATION: i16 = 44;
    /// An idempotent producer's sequence number skipped ahead.
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    /// An idempotent producer with an epoch older than the partition has seen (fenced).
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    /// Transactional requests: Kelp has no transactions, and a non-retriable code makes
    /// clients fail at once instead of retrying.
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
    /// An answer the broker did not expect of itself.
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    /// The storage engine failed or cannot be reached; clients retry.
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    /// A transactional request in a state that does not allow it (EndTxn with nothing open).
    pub const INVALID_TXN_STATE: i16 = 48;
    /// A producer id that is not the transactional id's.
    pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
    /// A transaction timeout above `--transaction-max-timeout-ms`.
    pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
    /// Another operation on the transactional id is under way: the client retries.
    pub const CONCURRENT_TRANSACTIONS: i16 = 51;
    /// OffsetFetch with require_stable while a transaction holds offsets of the partition.
    pub const UNSTABLE_OFFSET_COMMIT: i16 = 88;
    /// A newer producer with the same transactional id took over (KIP-588).
    pub const PRODUCER_FENCED: i16 = 90;
    /// The coordinator of a transactional write could not be reached: the producer retries.
    pub const NOT_ENOUGH_REPLICAS: i16 = 19;
    /// A transactional write its transaction did not add (KIP-890): the producer aborts.
    pub const TRANSACTION_ABORTABLE: i16 = 120;
    /// DescribeTransactions of an id the coordinator does not know.
    pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
    /// DeleteGroups on a group that still has members.
    pub const NON_EMPTY_GROUP: i16 = 68;
    /// A group that does not exist.
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    /// A first JoinGroup without a member id (v4+): the client rejoins with the id given.
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    /// A static member replaced by a newer one with the same `group.instance.id`.
    pub const FENCED_INSTANCE_ID: i16 = 82;
    /// OffsetDelete of a partition the group still consumes.
    pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
    /// A batch that is not what its header claims (offsets, record count, undecodable
    /// compressed records), or null records: refused whole.
    pub const INVALID_RECORD: i16 = 87;
    /// A topic id (Fetch v13+, Metadata, DeleteTopics v6+) not in the metadata.
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    /// A request naming a leader epoch older than the partition's current one.
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    /// A request naming a leader epoch newer than the partition's current one (this node's
    /// view is behind): retried by clients.
    pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
    /// ElectLeaders: the partition's leader already is the one asked for.
    pub const ELECTION_NOT_NEEDED: i16 = 84;
    /// AlterPartitionReassignments: no reassignment to cancel.
    pub const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;
    /// The consumer group has as many members as `--group-consumer-max-size` allows.
    pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
    /// KIP-848: the member's epoch is ahead of or behind what the coordinator knows: it
    /// gives up its partitions and rejoins with epoch 0.
    pub const FENCED_MEMBER_EPOCH: i16 = 110;
    /// KIP-848: a static member's instance id is held by a member that has not left.
    pub const UNRELEASED_INSTANCE_ID: i16 = 111;
    /// KIP-848: the server-side assignor named is not one the coordinator has.
    pub const UNSUPPORTED_ASSIGNOR: i16 = 112;
    /// KIP-848: an offset commit or fetch by a member epoch older than the member's.
    pub const STALE_MEMBER_EPOCH: i16 = 113;
    /// KIP-848: a subscription regex that does not compile.
    pub const INVALID_REGULAR_EXPRESSION: i16 = 128;
    /// Share groups: an acknowledgement for a record not acquired by the member.
    pub const INVALID_RECORD_STATE: i16 = 121;
    /// Share groups: no share session for the member on this broker.
    pub const SHARE_SESSION_NOT_FOUND: i16 = 122;
    /// Share groups: a share session epoch other than the one expected.
    pub const INVALID_SHARE_SESSION_EPOCH: i16 = 123;
    /// Share groups: the broker holds as many share sessions as it may.
    pub const SHARE_SESSION_LIMIT_REACHED: i16 = 133;
}

/// A broker-side failure, typed so each maps to exactly one Kafka error code.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum KelpError {
    /// Not in the cluster metadata (or a partition past the topic's count).
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    /// A topic id not in the cluster metadata.
    #[error("unknown topic id")]
    UnknownTopicId,
    /// A read outside the partition's offsets; the bounds go back in the message so a log
    /// shows how far off the client was.
    #[error("offset {offset} out of range [{start}, {end}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: i64,
        /// The log start offset.
        start: i64,
        /// The high watermark.
        end: i64,
    },
    /// A batch that failed CRC or framing checks (the reason is a fixed string: no
    /// allocation on a path a hostile client can drive).
    #[error("corrupt record batch: {0}")]
    CorruptMessage(&'static str),
    /// A batch that is not what its header claims.
    #[error("invalid record batch: {0}")]
    InvalidRecord(&'static str),
    /// A batch over the topic's `max.message.bytes`.
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge {
        /// The batch's length in bytes.
        size: usize,
        /// The topic's limit.
        max: usize,
    },
    /// Produce acks other than 0, 1 and -1 (the value sent).
    #[error("invalid required acks {0}")]
    InvalidRequiredAcks(i16),
    /// A topic name Kafka would refuse; the message says why.
    #[error("invalid topic name: {0}")]
    InvalidTopic(String),
    /// CreateTopics for a name already taken.
    #[error("topic already exists")]
    TopicAlreadyExists,
    /// A partition count below 1 (the value sent).
    #[error("invalid partition count {0}")]
    InvalidPartitions(i32),
    /// CreatePartitions asking for no more partitions than the topic has (current,
    /// requested); Kafka's wording.
    #[error("{}", partitions_not_increased(*.0, *.1))]
    PartitionsNotIncreased(i32, i32),
    /// CreatePartitions' replica assignments that do not fit the new partitions.
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    /// A replication factor Kelp, one broker, cannot give (the value sent).
    #[error("replication factor {0} exceeds the 1 available broker")]
    InvalidReplicationFactor(i16),
    /// A topic config name or value Kelp does not accept.
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    /// A request that decodes but cannot be served as asked.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// Several Kelp nodes share the storage: a transaction's coordinator could not have the
    /// markers written on partitions another node leads (nodes send each other no requests).
    #[error("transactions need a single Kelp node over the shared storage ({0} are live)")]
    TransactionsNeedOneNode(usize),
    /// The shard that owns the partition no longer answers (shutting down).
    #[error("shard {0} is unavailable")]
    ShardUnavailable(usize),
    /// The request's deadline passed.
    #[error("request timed out")]
    RequestTimedOut,
    /// The group was removed while the request waited on it.
    #[error("the group coordinator is not available")]
    CoordinatorNotAvailable,
    /// The client's leader epoch is older than the partition's (its metadata is stale).
    #[error("leader epoch {got} is older than the current {current}")]
    FencedLeaderEpoch {
        /// The epoch the client sent.
        got: i32,
        /// The partition's current epoch.
        current: i32,
    },
    /// The client's leader epoch is newer than this node knows.
    #[error("leader epoch {got} is newer than the current {current}")]
    UnknownLeaderEpoch {
        /// The epoch the client sent.
        got: i32,
        /// The partition's current epoch.
        current: i32,
    },
    /// The coordinator is still reading what it needs (a group's offsets, producer ids).
    #[error("the coordinator is loading")]
    CoordinatorLoadInProgress,
    /// The group lives on another coordinator (another Kelp node over SeaweedMQ): the
    /// client looks the coordinator up again.
    #[error("this node is not the coordinator of the group")]
    NotCoordinator,
    /// The partition is led by another Kelp node (or its lease is moving): the client
    /// refreshes its metadata.
    #[error("this node is not the leader of the partition")]
    NotLeaderOrFollower,
    /// A group request from an older generation.
    #[error("the generation id is not the group's current generation")]
    IllegalGeneration,
    /// A joining member shares no protocol with the group.
    #[error("no protocol is supported by every member, or the protocol type differs")]
    InconsistentGroupProtocol,
    /// An empty group id.
    #[error("invalid group id")]
    InvalidGroupId,
    /// A member id the group does not know.
    #[error("unknown member id")]
    UnknownMemberId,
    /// A session timeout outside the allowed range (the value sent, in ms).
    #[error("session timeout {0} ms outside the broker's allowed range")]
    InvalidSessionTimeout(i32),
    /// The group is rebalancing: the member rejoins.
    #[error("the group is rebalancing")]
    RebalanceInProgress,
    /// A first JoinGroup without a member id: the client rejoins with the one assigned.
    #[error("a member id is required: rejoin with the id given")]
    MemberIdRequired,
    /// A static member replaced by a newer one.
    #[error("a newer member with the same group.instance.id has joined")]
    FencedInstanceId,
    /// DeleteGroups on a group with members.
    #[error("the group is not empty")]
    NonEmptyGroup,
    /// A group that does not exist.
    #[error("group not found")]
    GroupIdNotFound,
    /// A group of the other protocol (classic or consumer) holds the id.
    #[error("group {0} is not a {1} group")]
    GroupProtocolMismatch(String, &'static str),
    /// The consumer group is full (`--group-consumer-max-size`).
    #[error("the consumer group has reached its maximum size of {0} members")]
    GroupMaxSizeReached(usize),
    /// KIP-848: the member's epoch does not match the coordinator's.
    #[error("member epoch {got} is fenced (the member's epoch is {expected})")]
    FencedMemberEpoch {
        /// The epoch sent.
        got: i32,
        /// The member's epoch at the coordinator.
        expected: i32,
    },
    /// KIP-848: a commit or fetch by an older member epoch.
    #[error("member epoch {got} is stale (the member's epoch is {expected})")]
    StaleMemberEpoch {
        /// The epoch sent.
        got: i32,
        /// The member's epoch at the coordinator.
        expected: i32,
    },
    /// KIP-848: another member still holds the static instance id.
    #[error("instance id {0} is still held by a member that has not left")]
    UnreleasedInstanceId(String),
    /// KIP-848: an unknown server-side assignor.
    #[error("server assignor {0} is not supported (uniform, range)")]
    UnsupportedAssignor(String),
    /// KIP-848: a subscription regex that does not compile.
    #[error("invalid regular expression {0}")]
    InvalidRegularExpression(String),
    /// OffsetDelete of a partition the group still consumes.
    #[error("the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    /// Commit metadata longer than kept (its length in bytes).
    #[error("offset metadata of {0} bytes is too large")]
    OffsetMetadataTooLarge(usize),
    /// An idempotent producer's sequence skipped ahead.
    #[error("out of order sequence number: expected {expected}, got {got}")]
    OutOfOrderSequence {
        /// The next sequence the partition accepts.
        expected: i32,
        /// The batch's first sequence.
        got: i32,
    },
    /// An idempotent producer fenced by a newer epoch.
    #[error("producer epoch {got} is older than the current epoch {current}")]
    InvalidProducerEpoch {
        /// The batch's epoch.
        got: i16,
        /// The newest epoch the partition has seen.
        current: i16,
    },
    /// The storage engine failed (a write, a read, a bad address): unlike
    /// [`KelpError::StorageUnavailable`], not worth waiting out within the request.
    #[error("storage error: {0}")]
    Storage(String),
    /// The storage could not answer now (SeaweedMQ broker unreachable, leader moving, no
    /// leader yet): worth retrying until the request's deadline. Same wire code as
    /// [`KelpError::Storage`]; a produce that runs out of time on it answers
    /// REQUEST_TIMED_OUT instead ([`KelpError::timed_out_if_transient`]).
    #[error("storage unavailable: {0}")]
    StorageUnavailable(String),
    /// Refused by policy, e.g. an operation the storage engine cannot do.
    #[error("not allowed: {0}")]
    PolicyViolation(String),
    /// A SASL mechanism not in `--sasl-enabled-mechanisms` (the name asked for).
    #[error("unsupported SASL mechanism {0}")]
    UnsupportedSaslMechanism(String),
    /// A SASL request out of order (the message says which).
    #[error("illegal SASL state: {0}")]
    IllegalSaslState(String),
    /// Authentication failed; the message is what the client is told (never which part
    /// was wrong).
    #[error("{0}")]
    SaslAuthenticationFailed(String),
    /// A named resource (a user's SCRAM credential) that does not exist.
    #[error("{0}")]
    ResourceNotFound(String),
    /// A resource named twice in one request.
    #[error("{0}")]
    DuplicateResource(String),
    /// A SCRAM credential outside what the broker accepts.
    #[error("{0}")]
    UnacceptableCredential(String),
    /// ACL requests without `--authorizer acl`.
    #[error("no authorizer is configured (--authorizer acl)")]
    SecurityDisabled,
    /// The principal may not do this to the topic.
    #[error("not authorized to access the topic")]
    TopicAuthorizationFailed,
    /// The principal may not do this to the group.
    #[error("not authorized to access the group")]
    GroupAuthorizationFailed,
    /// The principal may not do this to the cluster.
    #[error("not authorized to do this on the cluster")]
    ClusterAuthorizationFailed,
    /// ElectLeaders on a partition already led by its preferred (its only) replica.
    #[error("leader election not needed for the partition")]
    ElectionNotNeeded,
    /// AlterPartitionReassignments cancelling a reassignment where none runs.
    #[error("no reassignment is in progress for the partition")]
    NoReassignmentInProgress,
    /// Share groups: acknowledged records the member does not hold (their lock expired, or
    /// another member has them now).
    #[error("the records are not acquired by the member")]
    InvalidRecordState,
    /// Share groups: the member has no share session here.
    #[error("no share session for the member")]
    ShareSessionNotFound,
    /// Share groups: the share session epoch sent is not the session's (sent, expected).
    #[error("share session epoch {0} is not the expected {1}")]
    InvalidShareSessionEpoch(i32, i32),
    /// Share groups: the broker's share sessions are all in use.
    #[error("the share session limit of {0} is reached")]
    ShareSessionLimitReached(usize),
    /// The principal may not use the transactional id.
    #[error("not authorized to use the transactional id")]
    TransactionalIdAuthorizationFailed,
    /// EndTxn or the like in a state that does not allow it.
    #[error("invalid transaction state: {0}")]
    InvalidTxnState(String),
    /// A producer id that is not the transactional id's.
    #[error("the producer id is not the transactional id's")]
    InvalidProducerIdMapping,
    /// A transaction timeout over the broker's maximum (the value sent, in ms).
    #[error("transaction timeout {0} ms exceeds the broker's maximum")]
    InvalidTransactionTimeout(i32),
    /// Another operation on the transactional id is under way.
    #[error("a concurrent operation on the transaction is under way")]
    ConcurrentTransactions,
    /// A newer producer with the same transactional id took over.
    #[error("the producer was fenced by a newer one with the same transactional id")]
    ProducerFenced,
    /// Offsets a transaction holds are not settled yet.
    #[error("the partition has offsets pending in a transaction")]
    UnstableOffsetCommit,
    /// A request version a group's protocol does not allow (Kafka's wording).
    #[error("{0}")]
    VersionNotForGroup(&'static str),
    /// An unknown transactional id.
    #[error("unknown transactional id")]
    TransactionalIdNotFound,
    /// A transactional write to a partition (or an offset commit for a group) its
    /// transaction did not add (KIP-890): the producer aborts the transaction.
    #[error("the transaction did not add this partition or group")]
    TransactionAbortable,
}

impl KelpError {
    /// The Kafka error code sent for this failure.
    pub fn code(&self) -> i16 {
        use KelpError::*;
        match self {
            UnknownTopicOrPartition => code::UNKNOWN_TOPIC_OR_PARTITION,
            UnknownTopicId => code::UNKNOWN_TOPIC_ID,
            OffsetOutOfRange { .. } => code::OFFSET_OUT_OF_RANGE,
            CorruptMessage(_) => code::CORRUPT_MESSAGE,
            InvalidRecord(_) => code::INVALID_RECORD,
            MessageTooLarge { .. } => code::MESSAGE_TOO_LARGE,
            InvalidRequiredAcks(_) => code::INVALID_REQUIRED_ACKS,
            InvalidTopic(_) => code::INVALID_TOPIC_EXCEPTION,
            TopicAlreadyExists => code::TOPIC_ALREADY_EXISTS,
            InvalidPartitions(_) | PartitionsNotIncreased(..) => code::INVALID_PARTITIONS,
            InvalidReplicaAssignment(_) => code::INVALID_REPLICA_ASSIGNMENT,
            InvalidReplicationFactor(_) => code::INVALID_REPLICATION_FACTOR,
            InvalidConfig(_) => code::INVALID_CONFIG,
            InvalidRequest(_) => code::INVALID_REQUEST,
            ShardUnavailable(_) => code::NOT_LEADER_OR_FOLLOWER,
            RequestTimedOut => code::REQUEST_TIMED_OUT,
            CoordinatorNotAvailable => code::COORDINATOR_NOT_AVAILABLE,
            NotCoordinator => code::NOT_COORDINATOR,
            CoordinatorLoadInProgress => code::COORDINATOR_LOAD_IN_PROGRESS,
            FencedLeaderEpoch { .. } => code::FENCED_LEADER_EPOCH,
            UnknownLeaderEpoch { .. } => code::UNKNOWN_LEADER_EPOCH,
            NotLeaderOrFollower => code::NOT_LEADER_OR_FOLLOWER,
            IllegalGeneration => code::ILLEGAL_GENERATION,
            InconsistentGroupProtocol => code::INCONSISTENT_GROUP_PROTOCOL,
            InvalidGroupId => code::INVALID_GROUP_ID,
            UnknownMemberId => code::UNKNOWN_MEMBER_ID,
            InvalidSessionTimeout(_) => code::INVALID_SESSION_TIMEOUT,
            RebalanceInProgress => code::REBALANCE_IN_PROGRESS,
            MemberIdRequired => code::MEMBER_ID_REQUIRED,
            FencedInstanceId => code::FENCED_INSTANCE_ID,
            NonEmptyGroup => code::NON_EMPTY_GROUP,
            GroupIdNotFound | GroupProtocolMismatch(..) => code::GROUP_ID_NOT_FOUND,
            GroupMaxSizeReached(_) => code::GROUP_MAX_SIZE_REACHED,
            FencedMemberEpoch { .. } => code::FENCED_MEMBER_EPOCH,
            StaleMemberEpoch { .. } => code::STALE_MEMBER_EPOCH,
            UnreleasedInstanceId(_) => code::UNRELEASED_INSTANCE_ID,
            UnsupportedAssignor(_) => code::UNSUPPORTED_ASSIGNOR,
            InvalidRegularExpression(_) => code::INVALID_REGULAR_EXPRESSION,
            GroupSubscribedToTopic => code::GROUP_SUBSCRIBED_TO_TOPIC,
            OffsetMetadataTooLarge(_) => code::OFFSET_METADATA_TOO_LARGE,
            OutOfOrderSequence { .. } => code::OUT_OF_ORDER_SEQUENCE_NUMBER,
            InvalidProducerEpoch { .. } => code::INVALID_PRODUCER_EPOCH,
            Storage(_) | StorageUnavailable(_) => code::KAFKA_STORAGE_ERROR,
            PolicyViolation(_) => code::POLICY_VIOLATION,
            UnsupportedSaslMechanism(_) => code::UNSUPPORTED_SASL_MECHANISM,
            IllegalSaslState(_) => code::ILLEGAL_SASL_STATE,
            SaslAuthenticationFailed(_) => code::SASL_AUTHENTICATION_FAILED,
            ResourceNotFound(_) => code::RESOURCE_NOT_FOUND,
            DuplicateResource(_) => code::DUPLICATE_RESOURCE,
            UnacceptableCredential(_) => code::UNACCEPTABLE_CREDENTIAL,
            SecurityDisabled => code::SECURITY_DISABLED,
            TopicAuthorizationFailed => code::TOPIC_AUTHORIZATION_FAILED,
            GroupAuthorizationFailed => code::GROUP_AUTHORIZATION_FAILED,
            ClusterAuthorizationFailed => code::CLUSTER_AUTHORIZATION_FAILED,
            ElectionNotNeeded => code::ELECTION_NOT_NEEDED,
            NoReassignmentInProgress => code::NO_REASSIGNMENT_IN_PROGRESS,
            InvalidRecordState => code::INVALID_RECORD_STATE,
            ShareSessionNotFound => code::SHARE_SESSION_NOT_FOUND,
            InvalidShareSessionEpoch(..) => code::INVALID_SHARE_SESSION_EPOCH,
            ShareSessionLimitReached(_) => code::SHARE_SESSION_LIMIT_REACHED,
            TransactionalIdAuthorizationFailed => code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            InvalidTxnState(_) => code::INVALID_TXN_STATE,
            InvalidProducerIdMapping => code::INVALID_PRODUCER_ID_MAPPING,
            InvalidTransactionTimeout(_) => code::INVALID_TRANSACTION_TIMEOUT,
            ConcurrentTransactions => code::CONCURRENT_TRANSACTIONS,
            // What Kafka clients take as "no transactions for this id": fatal, not retried.
            TransactionsNeedOneNode(_) => code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            ProducerFenced => code::PRODUCER_FENCED,
            UnstableOffsetCommit => code::UNSTABLE_OFFSET_COMMIT,
            VersionNotForGroup(_) => code::UNSUPPORTED_VERSION,
            TransactionAbortable => code::TRANSACTION_ABORTABLE,
            TransactionalIdNotFound => code::TRANSACTIONAL_ID_NOT_FOUND,
        }
    }

    /// Whether retrying shortly may succeed (the storage could not be reached).
    pub fn is_transient(&self) -> bool {
        matches!(self, KelpError::StorageUnavailable(_))
    }

    /// For a produce whose deadline passed while the storage was unreachable: Kafka's
    /// REQUEST_TIMED_OUT, which producers retry. Other errors stay as they are.
    pub fn timed_out_if_transient(self) -> KelpError {
        if self.is_transient() {
            KelpError::RequestTimedOut
        } else {
            self
        }
    }

    /// Error message for responses that carry one (None where Kafka sends null).
    pub fn message(&self) -> Option<String> {
        Some(self.to_string())
    }
}

fn partitions_not_increased(current: i32, requested: i32) -> String {
    if current == requested {
        format!("Topic already has {current} partitions.")
    } else {
        format!(
            "Topic currently has {current} partitions, which is higher than the requested {requested}."
        )
    }
}

/// Errors that end a connection rather than produce an error response.
#[derive(Debug, Error)]
pub enum ConnectionError {
    /// The socket failed or the peer went away.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// A length prefix outside what a request can be (length, largest allowed): reading on
    /// would trust a length the broker cannot afford.
    #[error("frame length {0} outside 10..={1}")]
    BadFrameLength(i64, usize),
    /// A frame that does not decode as its header says.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// An api key Kelp does not serve; Kafka closes the connection too.
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    /// A version of a served api Kelp does not serve (api key, version).
    #[error("unsupported version {1} of api key {0}")]
    UnsupportedVersion(i16, i16),
    /// A request a SASL listener may not serve before (re-)authentication, or after a failed
    /// one; Kafka closes the connection too.
    #[error("not authenticated: {0}")]
    Unauthenticated(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_storage_is_retriable_and_times_a_produce_out() {
        let down = KelpError::StorageUnavailable("leader unreachable".into());
        assert!(down.is_transient());
        // Fetch and ListOffsets answer it as KAFKA_STORAGE_ERROR ("leader unavailable")...
        assert_eq!(down.code(), code::KAFKA_STORAGE_ERROR);
        // ...a produce that ran out of time on it as REQUEST_TIMED_OUT.
        assert_eq!(down.timed_out_if_transient(), KelpError::RequestTimedOut);
        // Errors that retrying does not cure keep their code.
        let gone = KelpError::UnknownTopicOrPartition;
        assert!(!gone.is_transient());
        assert_eq!(gone.clone().timed_out_if_transient(), gone);
        let broken = KelpError::Storage("bad address".into());
        assert!(!broken.is_transient());
        assert_eq!(
            broken.timed_out_if_transient().code(),
            code::KAFKA_STORAGE_ERROR
        );
    }
}
