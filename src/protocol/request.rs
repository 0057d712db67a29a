//! From a request frame to a typed request: the one decode path every client request takes
//! (header, version check, shape check, decode), shared by the broker's dispatch and the
//! `request_decode` fuzz target so that what is fuzzed is what clients reach.
//!
//! Owns the mapping from api key to request type. Produce goes through the hand-written
//! zero-copy decoder; every other request first passes [`shape`] and only then
//! the kafka-protocol crate, whose array decoders allocate by the count they read.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, DescribeProducersRequest,
    DescribeTransactionsRequest, EndTxnRequest, ListTransactionsRequest, TxnOffsetCommitRequest,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiVersionsRequest, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest, DescribeClusterRequest,
    DescribeConfigsRequest, DescribeGroupsRequest, DescribeTopicPartitionsRequest, FetchRequest,
    FindCoordinatorRequest, HeartbeatRequest, IncrementalAlterConfigsRequest,
    InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest,
    ListOffsetsRequest, MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, OffsetForLeaderEpochRequest, SyncGroupRequest,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest, DescribeLogDirsRequest, ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest, ListConfigResourcesRequest, ShareAcknowledgeRequest,
    ShareFetchRequest, ShareGroupDescribeRequest, ShareGroupHeartbeatRequest,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest,
    DescribeClientQuotasRequest, DescribeUserScramCredentialsRequest, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::Decodable;

use super::produce_request::{self, ProduceRequest};
use super::versions::key;
use super::{shape, RequestHeader};
use crate::error::ConnectionError;

macro_rules! requests {
    ($($variant:ident($ty:ident) = $key:ident,)*) => {
        /// A decoded request of any API Kelp implements.
        #[derive(Debug)]
        pub enum Request {
            /// Produce, decoded by Kelp itself so record batches stay slices of the frame.
            Produce(ProduceRequest),
            /// DescribeShareGroupOffsets: v1 (Kafka 4.2) asks as v0 does; the crate knows v0.
            DescribeShareGroupOffsets(DescribeShareGroupOffsetsRequest),
            $(
                #[doc = concat!(stringify!($variant), ", decoded by kafka-protocol after the shape check.")]
                $variant($ty),
            )*
        }

        /// Decodes the body of a request whose header is `header`; `body` is the frame after
        /// the header. Malformed bodies are connection errors, as in Kafka.
        pub fn decode_body(header: &RequestHeader, body: BytesMut) -> Result<Request, ConnectionError> {
            if !header.version_supported() {
                return Err(ConnectionError::UnsupportedVersion(header.api_key, header.api_version));
            }
            match header.api_key {
                key::PRODUCE => produce_request::decode(body, header.api_version)
                    .map(Request::Produce)
                    .map_err(|e| ConnectionError::Malformed(format!("Produce: {e}"))),
                key::DESCRIBE_SHARE_GROUP_OFFSETS => checked_at(header, body.freeze(), 0)
                    .map(Request::DescribeShareGroupOffsets),
                $(key::$key => checked::<$ty>(header, body.freeze()).map(Request::$variant),)*
                other => Err(ConnectionError::UnknownApiKey(other)),
            }
        }
    };
}

requests! {
    Fetch(FetchRequest) = FETCH,
    ListOffsets(ListOffsetsRequest) = LIST_OFFSETS,
    Metadata(MetadataRequest) = METADATA,
    OffsetCommit(OffsetCommitRequest) = OFFSET_COMMIT,
    OffsetFetch(OffsetFetchRequest) = OFFSET_FETCH,
    FindCoordinator(FindCoordinatorRequest) = FIND_COORDINATOR,
    JoinGroup(JoinGroupRequest) = JOIN_GROUP,
    Heartbeat(HeartbeatRequest) = HEARTBEAT,
    LeaveGroup(LeaveGroupRequest) = LEAVE_GROUP,
    SyncGroup(SyncGroupRequest) = SYNC_GROUP,
    DescribeGroups(DescribeGroupsRequest) = DESCRIBE_GROUPS,
    ListGroups(ListGroupsRequest) = LIST_GROUPS,
    ApiVersions(ApiVersionsRequest) = API_VERSIONS,
    CreateTopics(CreateTopicsRequest) = CREATE_TOPICS,
    DeleteTopics(DeleteTopicsRequest) = DELETE_TOPICS,
    DeleteRecords(DeleteRecordsRequest) = DELETE_RECORDS,
    InitProducerId(InitProducerIdRequest) = INIT_PRODUCER_ID,
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest) = OFFSET_FOR_LEADER_EPOCH,
    DescribeConfigs(DescribeConfigsRequest) = DESCRIBE_CONFIGS,
    DeleteGroups(DeleteGroupsRequest) = DELETE_GROUPS,
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest) = INCREMENTAL_ALTER_CONFIGS,
    OffsetDelete(OffsetDeleteRequest) = OFFSET_DELETE,
    DescribeCluster(DescribeClusterRequest) = DESCRIBE_CLUSTER,
    CreatePartitions(CreatePartitionsRequest) = CREATE_PARTITIONS,
    AlterConfigs(AlterConfigsRequest) = ALTER_CONFIGS,
    DescribeTopicPartitions(DescribeTopicPartitionsRequest) = DESCRIBE_TOPIC_PARTITIONS,
    SaslHandshake(SaslHandshakeRequest) = SASL_HANDSHAKE,
    SaslAuthenticate(SaslAuthenticateRequest) = SASL_AUTHENTICATE,
    DescribeAcls(DescribeAclsRequest) = DESCRIBE_ACLS,
    CreateAcls(CreateAclsRequest) = CREATE_ACLS,
    DeleteAcls(DeleteAclsRequest) = DELETE_ACLS,
    DescribeClientQuotas(DescribeClientQuotasRequest) = DESCRIBE_CLIENT_QUOTAS,
    DescribeUserScramCredentials(DescribeUserScramCredentialsRequest) = DESCRIBE_USER_SCRAM_CREDENTIALS,
    AlterUserScramCredentials(AlterUserScramCredentialsRequest) = ALTER_USER_SCRAM_CREDENTIALS,
    AddPartitionsToTxn(AddPartitionsToTxnRequest) = ADD_PARTITIONS_TO_TXN,
    AddOffsetsToTxn(AddOffsetsToTxnRequest) = ADD_OFFSETS_TO_TXN,
    EndTxn(EndTxnRequest) = END_TXN,
    TxnOffsetCommit(TxnOffsetCommitRequest) = TXN_OFFSET_COMMIT,
    DescribeTransactions(DescribeTransactionsRequest) = DESCRIBE_TRANSACTIONS,
    DescribeProducers(DescribeProducersRequest) = DESCRIBE_PRODUCERS,
    ListTransactions(ListTransactionsRequest) = LIST_TRANSACTIONS,
    DescribeLogDirs(DescribeLogDirsRequest) = DESCRIBE_LOG_DIRS,
    ElectLeaders(ElectLeadersRequest) = ELECT_LEADERS,
    AlterPartitionReassignments(AlterPartitionReassignmentsRequest) = ALTER_PARTITION_REASSIGNMENTS,
    ListPartitionReassignments(ListPartitionReassignmentsRequest) = LIST_PARTITION_REASSIGNMENTS,
    ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest) = CONSUMER_GROUP_HEARTBEAT,
    ConsumerGroupDescribe(ConsumerGroupDescribeRequest) = CONSUMER_GROUP_DESCRIBE,
    ListConfigResources(ListConfigResourcesRequest) = LIST_CONFIG_RESOURCES,
    ShareGroupHeartbeat(ShareGroupHeartbeatRequest) = SHARE_GROUP_HEARTBEAT,
    ShareGroupDescribe(ShareGroupDescribeRequest) = SHARE_GROUP_DESCRIBE,
    ShareFetch(ShareFetchRequest) = SHARE_FETCH,
    ShareAcknowledge(ShareAcknowledgeRequest) = SHARE_ACKNOWLEDGE,
    AlterShareGroupOffsets(AlterShareGroupOffsetsRequest) = ALTER_SHARE_GROUP_OFFSETS,
    DeleteShareGroupOffsets(DeleteShareGroupOffsetsRequest) = DELETE_SHARE_GROUP_OFFSETS,
}

/// Parses a whole request frame (without its length prefix), as a connection does.
pub fn decode_frame(mut frame: BytesMut) -> Result<(RequestHeader, Request), ConnectionError> {
    let header = RequestHeader::parse(&frame)?;
    let _ = frame.split_to(header.body_offset);
    let req = decode_body(&header, frame)?;
    Ok((header, req))
}

/// Shape check, then the crate's decode: by then every count it allocates by fits the body.
fn checked<M: Decodable>(header: &RequestHeader, body: Bytes) -> Result<M, ConnectionError> {
    checked_at(header, body, header.api_version)
}

/// [`checked`] at version `v`, for a request whose newer version reads as an older one.
fn checked_at<M: Decodable>(
    header: &RequestHeader,
    body: Bytes,
    v: i16,
) -> Result<M, ConnectionError> {
    let name = header.support().name;
    let shape = shape::request(header.api_key).ok_or_else(|| {
        // Unreachable while the shape tests pass: every crate-decoded API has a schema.
        ConnectionError::Malformed(format!("{name} v{v}: no request shape"))
    })?;
    shape
        .check(v, &body)
        .map_err(|e| ConnectionError::Malformed(e.to_string()))?;
    let mut b = body;
    M::decode(&mut b, v).map_err(|e| ConnectionError::Malformed(format!("{name} v{v}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frame of issue 13: Metadata v1 whose topic count is 0x7fffffff in a 21-byte frame.
    const ISSUE_13: &str = "000000110003000100000001000372656c7fffffff";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn issue_13_frame_is_malformed_not_an_allocation() {
        let frame = unhex(ISSUE_13);
        let err = decode_frame(BytesMut::from(&frame[4..])).unwrap_err();
        match err {
            ConnectionError::Malformed(m) => assert!(m.contains("Topics"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unsupported_versions_and_keys_are_refused() {
        // Metadata v13 is past what Kelp advertises.
        let f = [0, 3, 0, 13, 0, 0, 0, 1, 0xff, 0xff, 0, 1, 0];
        assert!(matches!(
            decode_frame(BytesMut::from(&f[..])),
            Err(ConnectionError::UnsupportedVersion(3, 13))
        ));
    }
}
