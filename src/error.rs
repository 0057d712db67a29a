//! Typed broker errors and their single mapping to Kafka error codes.
//!
//! Every handler reports failures as [`KelpError`]; [`KelpError::code`] is the one place a
//! failure becomes a wire error code. The [`code`] module names the codes Kelp uses.

use thiserror::Error;

/// Kafka protocol error codes used by Kelp (see the Kafka protocol guide, "Error Codes").
pub mod code {
    pub const NONE: i16 = 0;
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const ILLEGAL_GENERATION: i16 = 22;
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    pub const INVALID_GROUP_ID: i16 = 24;
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    pub const INVALID_SESSION_TIMEOUT: i16 = 26;
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const NON_EMPTY_GROUP: i16 = 68;
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    pub const FENCED_INSTANCE_ID: i16 = 82;
    pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
    pub const CORRUPT_MESSAGE: i16 = 2;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const INVALID_FETCH_SIZE: i16 = 4;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const RECORD_LIST_TOO_LARGE: i16 = 18;
    pub const INVALID_REQUIRED_ACKS: i16 = 21;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const INVALID_PARTITIONS: i16 = 37;
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    pub const INVALID_REQUEST: i16 = 42;
    pub const INVALID_CONFIG: i16 = 40;
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    pub const POLICY_VIOLATION: i16 = 44;
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub const INVALID_RECORD: i16 = 87;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
}

/// A broker-side failure, typed so each maps to exactly one Kafka error code.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum KelpError {
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("unknown topic id")]
    UnknownTopicId,
    #[error("offset {offset} out of range [{start}, {end}]")]
    OffsetOutOfRange { offset: i64, start: i64, end: i64 },
    #[error("corrupt record batch: {0}")]
    CorruptMessage(&'static str),
    #[error("invalid record batch: {0}")]
    InvalidRecord(&'static str),
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge { size: usize, max: usize },
    #[error("invalid required acks {0}")]
    InvalidRequiredAcks(i16),
    #[error("invalid topic name: {0}")]
    InvalidTopic(String),
    #[error("topic already exists")]
    TopicAlreadyExists,
    #[error("invalid partition count {0}")]
    InvalidPartitions(i32),
    #[error("replication factor {0} exceeds the 1 available broker")]
    InvalidReplicationFactor(i16),
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("transactions are not supported")]
    TransactionsUnsupported,
    #[error("shard {0} is unavailable")]
    ShardUnavailable(usize),
    #[error("request timed out")]
    RequestTimedOut,
    #[error("the group coordinator is not available")]
    CoordinatorNotAvailable,
    #[error("this shard is not the coordinator of the group")]
    NotCoordinator,
    #[error("the generation id is not the group's current generation")]
    IllegalGeneration,
    #[error("no protocol is supported by every member, or the protocol type differs")]
    InconsistentGroupProtocol,
    #[error("invalid group id")]
    InvalidGroupId,
    #[error("unknown member id")]
    UnknownMemberId,
    #[error("session timeout {0} ms outside the broker's allowed range")]
    InvalidSessionTimeout(i32),
    #[error("the group is rebalancing")]
    RebalanceInProgress,
    #[error("a member id is required: rejoin with the id given")]
    MemberIdRequired,
    #[error("a newer member with the same group.instance.id has joined")]
    FencedInstanceId,
    #[error("the group is not empty")]
    NonEmptyGroup,
    #[error("group not found")]
    GroupIdNotFound,
    #[error("the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    #[error("offset metadata of {0} bytes is too large")]
    OffsetMetadataTooLarge(usize),
    #[error("out of order sequence number: expected {expected}, got {got}")]
    OutOfOrderSequence { expected: i32, got: i32 },
    #[error("producer epoch {got} is older than the current epoch {current}")]
    InvalidProducerEpoch { got: i16, current: i16 },
    #[error("storage error: {0}")]
    Storage(String),
    /// The storage could not answer now (SeaweedMQ broker unreachable, leader moving, no
    /// leader yet): worth retrying until the request's deadline. Same wire code as
    /// [`KelpError::Storage`]; a produce that runs out of time on it answers
    /// REQUEST_TIMED_OUT instead ([`KelpError::timed_out_if_transient`]).
    #[error("storage unavailable: {0}")]
    StorageUnavailable(String),
    #[error("not allowed: {0}")]
    PolicyViolation(String),
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
            InvalidPartitions(_) => code::INVALID_PARTITIONS,
            InvalidReplicationFactor(_) => code::INVALID_REPLICATION_FACTOR,
            InvalidConfig(_) => code::INVALID_CONFIG,
            InvalidRequest(_) => code::INVALID_REQUEST,
            TransactionsUnsupported => code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            ShardUnavailable(_) => code::NOT_LEADER_OR_FOLLOWER,
            RequestTimedOut => code::REQUEST_TIMED_OUT,
            CoordinatorNotAvailable => code::COORDINATOR_NOT_AVAILABLE,
            NotCoordinator => code::NOT_COORDINATOR,
            IllegalGeneration => code::ILLEGAL_GENERATION,
            InconsistentGroupProtocol => code::INCONSISTENT_GROUP_PROTOCOL,
            InvalidGroupId => code::INVALID_GROUP_ID,
            UnknownMemberId => code::UNKNOWN_MEMBER_ID,
            InvalidSessionTimeout(_) => code::INVALID_SESSION_TIMEOUT,
            RebalanceInProgress => code::REBALANCE_IN_PROGRESS,
            MemberIdRequired => code::MEMBER_ID_REQUIRED,
            FencedInstanceId => code::FENCED_INSTANCE_ID,
            NonEmptyGroup => code::NON_EMPTY_GROUP,
            GroupIdNotFound => code::GROUP_ID_NOT_FOUND,
            GroupSubscribedToTopic => code::GROUP_SUBSCRIBED_TO_TOPIC,
            OffsetMetadataTooLarge(_) => code::OFFSET_METADATA_TOO_LARGE,
            OutOfOrderSequence { .. } => code::OUT_OF_ORDER_SEQUENCE_NUMBER,
            InvalidProducerEpoch { .. } => code::INVALID_PRODUCER_EPOCH,
            Storage(_) | StorageUnavailable(_) => code::KAFKA_STORAGE_ERROR,
            PolicyViolation(_) => code::POLICY_VIOLATION,
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

/// Errors that end a connection rather than produce an error response.
#[derive(Debug, Error)]
pub enum ConnectionError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame length {0} outside 10..={1}")]
    BadFrameLength(i64, usize),
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    #[error("unsupported version {1} of api key {0}")]
    UnsupportedVersion(i16, i16),
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
