//! The APIs and versions Kelp implements, advertised verbatim by ApiVersions.

/// One implemented API: key, version range, first flexible (KIP-482) version.
#[derive(Debug, Clone, Copy)]
pub struct ApiSupport {
    /// The api key ([`key`]).
    pub key: i16,
    /// Kafka's name for it, for logs.
    pub name: &'static str,
    /// Oldest version served.
    pub min: i16,
    /// Newest version served.
    pub max: i16,
    /// From this version on, headers and bodies use compact, tagged (flexible) encoding.
    pub first_flexible: i16,
}

/// API keys Kelp handles.
pub mod key {
    /// Produce: append record batches.
    pub const PRODUCE: i16 = 0;
    /// Fetch: read record batches, long-polling.
    pub const FETCH: i16 = 1;
    /// ListOffsets: earliest, latest or by-timestamp offsets.
    pub const LIST_OFFSETS: i16 = 2;
    /// Metadata: brokers, topics, partition leaders.
    pub const METADATA: i16 = 3;
    /// OffsetCommit: store a group's consumed offsets.
    pub const OFFSET_COMMIT: i16 = 8;
    /// OffsetFetch: read a group's committed offsets.
    pub const OFFSET_FETCH: i16 = 9;
    /// FindCoordinator: which node serves a group.
    pub const FIND_COORDINATOR: i16 = 10;
    /// JoinGroup: enter a group's rebalance.
    pub const JOIN_GROUP: i16 = 11;
    /// Heartbeat: keep a group membership alive.
    pub const HEARTBEAT: i16 = 12;
    /// LeaveGroup: leave a group without waiting for the session timeout.
    pub const LEAVE_GROUP: i16 = 13;
    /// SyncGroup: hand out (leader) or collect the assignment.
    pub const SYNC_GROUP: i16 = 14;
    /// DescribeGroups: a group's state and members.
    pub const DESCRIBE_GROUPS: i16 = 15;
    /// ListGroups: every group.
    pub const LIST_GROUPS: i16 = 16;
    /// ApiVersions: what this broker serves; the first request of most clients.
    pub const API_VERSIONS: i16 = 18;
    /// CreateTopics.
    pub const CREATE_TOPICS: i16 = 19;
    /// DeleteTopics.
    pub const DELETE_TOPICS: i16 = 20;
    /// InitProducerId: a producer id and epoch for an idempotent producer.
    pub const INIT_PRODUCER_ID: i16 = 22;
    /// OffsetForLeaderEpoch: where a leader epoch ended (consumers' truncation check).
    pub const OFFSET_FOR_LEADER_EPOCH: i16 = 23;
    /// DescribeConfigs: topic and broker configs.
    pub const DESCRIBE_CONFIGS: i16 = 32;
    /// DeleteGroups: drop empty groups and their offsets.
    pub const DELETE_GROUPS: i16 = 42;
    /// OffsetDelete: drop a group's offsets for some partitions.
    pub const OFFSET_DELETE: i16 = 47;
    /// DescribeCluster: brokers and the controller (admin clients).
    pub const DESCRIBE_CLUSTER: i16 = 60;
    /// DeleteRecords: move a partition's log start forward.
    pub const DELETE_RECORDS: i16 = 21;
    /// IncrementalAlterConfigs: change topic configs.
    pub const INCREMENTAL_ALTER_CONFIGS: i16 = 44;
    /// SaslHandshake: choose the SASL mechanism of a SASL listener's connection.
    pub const SASL_HANDSHAKE: i16 = 17;
    /// SaslAuthenticate: one SASL message each way.
    pub const SASL_AUTHENTICATE: i16 = 36;
    /// DescribeUserScramCredentials: which users have which SCRAM credentials.
    pub const DESCRIBE_USER_SCRAM_CREDENTIALS: i16 = 50;
    /// DescribeAcls: the ACL bindings passing a filter.
    pub const DESCRIBE_ACLS: i16 = 29;
    /// CreateAcls: add ACL bindings.
    pub const CREATE_ACLS: i16 = 30;
    /// DeleteAcls: remove the ACL bindings passing filters.
    pub const DELETE_ACLS: i16 = 31;
    /// DescribeClientQuotas: the client quotas (Kelp sets none).
    pub const DESCRIBE_CLIENT_QUOTAS: i16 = 48;
    /// AlterUserScramCredentials: set or delete users' SCRAM credentials.
    pub const ALTER_USER_SCRAM_CREDENTIALS: i16 = 51;
    /// AddPartitionsToTxn (KIP-98).
    pub const ADD_PARTITIONS_TO_TXN: i16 = 24;
    /// AddOffsetsToTxn.
    pub const ADD_OFFSETS_TO_TXN: i16 = 25;
    /// EndTxn.
    pub const END_TXN: i16 = 26;
    /// TxnOffsetCommit.
    pub const TXN_OFFSET_COMMIT: i16 = 28;
    /// DescribeProducers (KIP-664).
    pub const DESCRIBE_PRODUCERS: i16 = 61;
    /// DescribeTransactions (KIP-664).
    pub const DESCRIBE_TRANSACTIONS: i16 = 65;
    /// ListTransactions (KIP-664).
    pub const LIST_TRANSACTIONS: i16 = 66;
    /// AlterConfigs: replace a topic's config overrides (the form before key 44).
    pub const ALTER_CONFIGS: i16 = 33;
    /// CreatePartitions: raise topics' partition counts.
    pub const CREATE_PARTITIONS: i16 = 37;
    /// DescribeTopicPartitions (KIP-966): partitions and leaders, paged.
    pub const DESCRIBE_TOPIC_PARTITIONS: i16 = 75;
    /// DescribeLogDirs: log directories and partition sizes.
    pub const DESCRIBE_LOG_DIRS: i16 = 35;
    /// ElectLeaders: preferred or unclean leader election.
    pub const ELECT_LEADERS: i16 = 43;
    /// AlterPartitionReassignments: move partitions' replicas.
    pub const ALTER_PARTITION_REASSIGNMENTS: i16 = 45;
    /// ListPartitionReassignments: replica moves in progress.
    pub const LIST_PARTITION_REASSIGNMENTS: i16 = 46;
    /// ConsumerGroupHeartbeat (KIP-848): members of consumer groups join, beat and leave.
    pub const CONSUMER_GROUP_HEARTBEAT: i16 = 68;
    /// ConsumerGroupDescribe (KIP-848): consumer groups' epochs, members and assignments.
    pub const CONSUMER_GROUP_DESCRIBE: i16 = 69;
    /// ListConfigResources (KIP-1142; ListClientMetricsResources before): resources with configs.
    pub const LIST_CONFIG_RESOURCES: i16 = 74;
    /// ShareGroupHeartbeat (KIP-932): share group members join, beat and leave.
    pub const SHARE_GROUP_HEARTBEAT: i16 = 76;
    /// ShareGroupDescribe (KIP-932): share groups' members and assignments.
    pub const SHARE_GROUP_DESCRIBE: i16 = 77;
    /// ShareFetch (KIP-932): acquire records of a share group, acknowledging others.
    pub const SHARE_FETCH: i16 = 78;
    /// ShareAcknowledge (KIP-932): acknowledge acquired records.
    pub const SHARE_ACKNOWLEDGE: i16 = 79;
    /// DescribeShareGroupOffsets (KIP-932): share groups' start offsets.
    pub const DESCRIBE_SHARE_GROUP_OFFSETS: i16 = 90;
    /// AlterShareGroupOffsets (KIP-932): reset share groups' start offsets.
    pub const ALTER_SHARE_GROUP_OFFSETS: i16 = 91;
    /// DeleteShareGroupOffsets (KIP-932): drop share groups' state of topics.
    pub const DELETE_SHARE_GROUP_OFFSETS: i16 = 92;
}

/// APIs whose newest versions ask exactly what an older one asks: Kelp decodes them as
/// (key, that older version), the newest the kafka-protocol crate and the request shapes
/// know, and encodes their responses itself. DescribeShareGroupOffsets v1 (Kafka 4.2) only
/// adds Lag to the response.
pub const READ_AS_OLDER: &[(i16, i16)] = &[(key::DESCRIBE_SHARE_GROUP_OFFSETS, 0)];

/// The newest version of `a` the crate decodes (see [`READ_AS_OLDER`]).
pub fn crate_max(a: &ApiSupport) -> i16 {
    READ_AS_OLDER
        .iter()
        .find(|(k, _)| *k == a.key)
        .map_or(a.max, |&(_, v)| v)
}

/// Everything ApiVersions advertises, in api key order. Minimums follow Kafka 4 (KIP-896
/// removed older versions) where the codec crate lacks older ones (OffsetCommit, OffsetFetch).
/// OffsetDelete has no flexible version: its threshold is past its only version.
pub const SUPPORTED: &[ApiSupport] = &[
    ApiSupport {
        key: key::PRODUCE,
        name: "Produce",
        min: 3,
        max: 12,
        first_flexible: 9,
    },
    ApiSupport {
        key: key::FETCH,
        name: "Fetch",
        min: 4,
        max: 16,
        first_flexible: 12,
    },
    ApiSupport {
        key: key::LIST_OFFSETS,
        name: "ListOffsets",
        min: 1,
        max: 8,
        first_flexible: 6,
    },
    ApiSupport {
        key: key::METADATA,
        name: "Metadata",
        min: 0,
        max: 12,
        first_flexible: 9,
    },
    ApiSupport {
        key: key::OFFSET_COMMIT,
        name: "OffsetCommit",
        min: 2,
        max: 9,
        first_flexible: 8,
    },
    ApiSupport {
        key: key::OFFSET_FETCH,
        name: "OffsetFetch",
        min: 1,
        max: 9,
        first_flexible: 6,
    },
    ApiSupport {
        key: key::FIND_COORDINATOR,
        name: "FindCoordinator",
        min: 0,
        max: 6,
        first_flexible: 3,
    },
    ApiSupport {
        key: key::JOIN_GROUP,
        name: "JoinGroup",
        min: 0,
        max: 9,
        first_flexible: 6,
    },
    ApiSupport {
        key: key::HEARTBEAT,
        name: "Heartbeat",
        min: 0,
        max: 4,
        first_flexible: 4,
    },
    ApiSupport {
        key: key::LEAVE_GROUP,
        name: "LeaveGroup",
        min: 0,
        max: 5,
        first_flexible: 4,
    },
    ApiSupport {
        key: key::SYNC_GROUP,
        name: "SyncGroup",
        min: 0,
        max: 5,
        first_flexible: 4,
    },
    ApiSupport {
        key: key::DESCRIBE_GROUPS,
        name: "DescribeGroups",
        min: 0,
        max: 5,
        first_flexible: 5,
    },
    ApiSupport {
        key: key::LIST_GROUPS,
        name: "ListGroups",
        min: 0,
        max: 5,
        first_flexible: 3,
    },
    ApiSupport {
        key: key::API_VERSIONS,
        name: "ApiVersions",
        min: 0,
        max: 4,
        first_flexible: 3,
    },
    ApiSupport {
        key: key::CREATE_TOPICS,
        name: "CreateTopics",
        min: 2,
        max: 7,
        first_flexible: 5,
    },
    ApiSupport {
        key: key::DELETE_TOPICS,
        name: "DeleteTopics",
        min: 1,
        max: 6,
        first_flexible: 4,
    },
    ApiSupport {
        key: key::INIT_PRODUCER_ID,
        name: "InitProducerId",
        min: 0,
        max: 4,
        first_flexible: 2,
    },
    // Transactions v1 (KIP-98): the client versions. AddPartitionsToTxn v4+ is the brokers'
    // batched form and, with EndTxn v5 and TxnOffsetCommit v5, transactions v2 (KIP-890);
    // Kafka 4 clients use v1 with a broker that does not advertise transaction.version 2.
    ApiSupport {
        key: key::ADD_PARTITIONS_TO_TXN,
        name: "AddPartitionsToTxn",
        min: 0,
        max: 5,
        first_flexible: 3,
    },
    ApiSupport {
        key: key::ADD_OFFSETS_TO_TXN,
        name: "AddOffsetsToTxn",
        min: 0,
        max: 3,
        first_flexible: 3,
    },
    ApiSupport {
        key: key::END_TXN,
        name: "EndTxn",
        min: 0,
        max: 5,
        first_flexible: 3,
    },
    ApiSupport {
        key: key::TXN_OFFSET_COMMIT,
        name: "TxnOffsetCommit",
        min: 0,
        max: 5,
        first_flexible: 3,
    },
    ApiSupport {
        key: key::OFFSET_FOR_LEADER_EPOCH,
        name: "OffsetForLeaderEpoch",
        min: 2,
        max: 4,
        first_flexible: 4,
    },
    ApiSupport {
        key: key::DESCRIBE_CONFIGS,
        name: "DescribeConfigs",
        min: 1,
        max: 4,
        first_flexible: 4,
    },
    ApiSupport {
        key: key::DELETE_GROUPS,
        name: "DeleteGroups",
        min: 0,
        max: 2,
        first_flexible: 2,
    },
    ApiSupport {
        key: key::OFFSET_DELETE,
        name: "OffsetDelete",
        min: 0,
        max: 0,
        first_flexible: 1,
    },
    ApiSupport {
        key: key::DESCRIBE_CLUSTER,
        name: "DescribeCluster",
        min: 0,
        max: 1,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::DELETE_RECORDS,
        name: "DeleteRecords",
        min: 0,
        max: 2,
        first_flexible: 2,
    },
    ApiSupport {
        key: key::INCREMENTAL_ALTER_CONFIGS,
        name: "IncrementalAlterConfigs",
        min: 0,
        max: 1,
        first_flexible: 1,
    },
    // v0 (raw SASL tokens after the handshake) left with Kafka 4 (KIP-896).
    ApiSupport {
        key: key::SASL_HANDSHAKE,
        name: "SaslHandshake",
        min: 1,
        max: 1,
        first_flexible: 2,
    },
    ApiSupport {
        key: key::SASL_AUTHENTICATE,
        name: "SaslAuthenticate",
        min: 0,
        max: 2,
        first_flexible: 2,
    },
    // v0 of the three ACL APIs left with Kafka 4 (KIP-896).
    ApiSupport {
        key: key::DESCRIBE_ACLS,
        name: "DescribeAcls",
        min: 1,
        max: 3,
        first_flexible: 2,
    },
    ApiSupport {
        key: key::CREATE_ACLS,
        name: "CreateAcls",
        min: 1,
        max: 3,
        first_flexible: 2,
    },
    ApiSupport {
        key: key::DELETE_ACLS,
        name: "DeleteAcls",
        min: 1,
        max: 3,
        first_flexible: 2,
    },
    ApiSupport {
        key: key::DESCRIBE_CLIENT_QUOTAS,
        name: "DescribeClientQuotas",
        min: 0,
        max: 1,
        first_flexible: 1,
    },
    ApiSupport {
        key: key::DESCRIBE_PRODUCERS,
        name: "DescribeProducers",
        min: 0,
        max: 0,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::DESCRIBE_TRANSACTIONS,
        name: "DescribeTransactions",
        min: 0,
        max: 0,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::LIST_TRANSACTIONS,
        name: "ListTransactions",
        min: 0,
        max: 1,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::ALTER_CONFIGS,
        name: "AlterConfigs",
        min: 0,
        max: 2,
        first_flexible: 2,
    },
    ApiSupport {
        key: key::CREATE_PARTITIONS,
        name: "CreatePartitions",
        min: 0,
        max: 3,
        first_flexible: 2,
    },
    ApiSupport {
        key: key::DESCRIBE_TOPIC_PARTITIONS,
        name: "DescribeTopicPartitions",
        min: 0,
        max: 0,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::DESCRIBE_USER_SCRAM_CREDENTIALS,
        name: "DescribeUserScramCredentials",
        min: 0,
        max: 0,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::ALTER_USER_SCRAM_CREDENTIALS,
        name: "AlterUserScramCredentials",
        min: 0,
        max: 0,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::DESCRIBE_LOG_DIRS,
        name: "DescribeLogDirs",
        min: 1,
        max: 4,
        first_flexible: 2,
    },
    ApiSupport {
        key: key::ELECT_LEADERS,
        name: "ElectLeaders",
        min: 0,
        max: 2,
        first_flexible: 2,
    },
    ApiSupport {
        key: key::ALTER_PARTITION_REASSIGNMENTS,
        name: "AlterPartitionReassignments",
        min: 0,
        max: 1,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::LIST_PARTITION_REASSIGNMENTS,
        name: "ListPartitionReassignments",
        min: 0,
        max: 0,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::CONSUMER_GROUP_HEARTBEAT,
        name: "ConsumerGroupHeartbeat",
        min: 0,
        max: 1,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::CONSUMER_GROUP_DESCRIBE,
        name: "ConsumerGroupDescribe",
        min: 0,
        max: 1,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::LIST_CONFIG_RESOURCES,
        name: "ListConfigResources",
        min: 0,
        max: 1,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::SHARE_GROUP_HEARTBEAT,
        name: "ShareGroupHeartbeat",
        min: 1,
        max: 1,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::SHARE_GROUP_DESCRIBE,
        name: "ShareGroupDescribe",
        min: 1,
        max: 1,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::SHARE_FETCH,
        name: "ShareFetch",
        min: 1,
        max: 1,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::SHARE_ACKNOWLEDGE,
        name: "ShareAcknowledge",
        min: 1,
        max: 1,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::DESCRIBE_SHARE_GROUP_OFFSETS,
        name: "DescribeShareGroupOffsets",
        min: 0,
        max: 1,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::ALTER_SHARE_GROUP_OFFSETS,
        name: "AlterShareGroupOffsets",
        min: 0,
        max: 0,
        first_flexible: 0,
    },
    ApiSupport {
        key: key::DELETE_SHARE_GROUP_OFFSETS,
        name: "DeleteShareGroupOffsets",
        min: 0,
        max: 0,
        first_flexible: 0,
    },
];

/// The support entry of an api key, if Kelp implements it.
pub fn lookup(api_key: i16) -> Option<&'static ApiSupport> {
    SUPPORTED.iter().find(|a| a.key == api_key)
}

impl ApiSupport {
    /// Whether `version` is within the advertised range.
    pub fn supports(&self, version: i16) -> bool {
        (self.min..=self.max).contains(&version)
    }

    /// Whether requests and responses of `version` use flexible encoding.
    pub fn is_flexible(&self, version: i16) -> bool {
        version >= self.first_flexible
    }

    /// Response header version: v1 (with tagged fields) for flexible versions, except
    /// ApiVersions, whose response header is always v0 so any client can read it.
    pub fn response_header_version(&self, version: i16) -> i16 {
        if self.key != key::API_VERSIONS && self.is_flexible(version) {
            1
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ApiKey;

    #[test]
    fn metrics_name_every_api_as_this_table_does() {
        for a in SUPPORTED {
            assert_eq!(
                crate::metrics::errors::api_name(a.key),
                a.name,
                "key {}",
                a.key
            );
        }
    }

    #[test]
    fn advertised_ranges_are_within_the_codec_crate() {
        for a in SUPPORTED {
            let k = ApiKey::try_from(a.key).unwrap();
            let r = k.valid_versions();
            let max = crate_max(a);
            assert!(a.min >= r.min && max <= r.max, "{} {:?}", a.name, r);
            // Our flexible threshold must agree with the crate's header version choice.
            assert_eq!(
                k.request_header_version(max) == 2,
                a.is_flexible(max),
                "{}",
                a.name
            );
            assert_eq!(
                k.request_header_version(a.min) == 2,
                a.is_flexible(a.min),
                "{}",
                a.name
            );
        }
    }
}
