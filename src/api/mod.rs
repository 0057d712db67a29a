//! Request handlers, one file per Kafka API, sharing a request context.
//!
//! [`dispatch`] turns one request frame into at most one response. Handlers read the shared
//! metadata snapshot through the shard and run partition work through [`Shard::scatter`].

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_share_group_offsets;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_share_group_offsets;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_share_group_offsets;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_config_resources;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod share_acknowledge;
pub mod share_fetch;
pub mod share_group_describe;
pub mod share_group_heartbeat;
pub mod sync_group;
pub mod txn;
pub mod txn_offset_commit;

#[cfg(test)]
mod tests;

use std::cell::Cell;
use std::rc::Rc;

use bytes::BytesMut;
use futures::channel::oneshot;
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use crate::auth::acl::{self, Operation, ResourceType};
use crate::auth::Session;
use crate::error::{ConnectionError, KelpError};
use crate::protocol::request::{self, Request};
use crate::protocol::versions::key;
use crate::protocol::{RequestHeader, Response};
use crate::shard::Shard;

/// What a handler sees of the request it serves.
pub struct RequestContext {
    /// The shard whose connection received the request; it routes partition and group work
    /// to the owners.
    pub shard: Rc<Shard>,
    /// The request header (api key, version, correlation id, client id).
    pub header: RequestHeader,
    /// The connection: the client's address and the listener it came in on.
    pub session: Rc<Session>,
    /// Fired by [`RequestContext::started`].
    started: Cell<Option<oneshot::Sender<()>>>,
}

impl RequestContext {
    /// Tells the connection that this request's order-sensitive part is done (its appends
    /// are queued in order), so it may start the next request before this one is answered.
    /// The connection starts the next request of a handler that never calls this only once
    /// that handler has finished.
    pub fn started(&self) {
        if let Some(tx) = self.started.take() {
            let _ = tx.send(());
        }
    }

    /// The client's IP, as ACL hosts name it.
    pub fn client_ip(&self) -> &str {
        let peer: &str = &self.session.peer;
        let ip = match peer.rsplit_once(':') {
            Some((ip, _)) => ip,
            None => peer,
        };
        ip.trim_start_matches('[').trim_end_matches(']')
    }

    /// Whether this request's principal may do `op` on `name` of `resource_type` (always,
    /// without `--authorizer acl`).
    pub fn allowed(&self, op: Operation, resource_type: ResourceType, name: &str) -> bool {
        match &self.shard.cluster.authorizer {
            None => true,
            Some(a) => {
                let ok = a.authorize(
                    &self.session.principal(),
                    self.client_ip(),
                    op,
                    resource_type,
                    name,
                );
                if !ok {
                    tracing::debug!(principal = %self.session.principal(), ?op, ?resource_type,
                        %name, api = self.header.api_key, "denied by the ACLs");
                }
                ok
            }
        }
    }

    /// Whether this request's principal may do `op` on the cluster.
    pub fn cluster_allowed(&self, op: Operation) -> bool {
        self.allowed(op, ResourceType::Cluster, acl::CLUSTER_NAME)
    }

    /// Whether this request's principal may do `op` on some resource of `resource_type`.
    pub fn allowed_any(&self, op: Operation, resource_type: ResourceType) -> bool {
        match &self.shard.cluster.authorizer {
            None => true,
            Some(a) => a.authorize_any(
                &self.session.principal(),
                self.client_ip(),
                op,
                resource_type,
            ),
        }
    }

    /// Kafka's authorized-operations bit set of `name` of `resource_type` for this request's
    /// principal (bit `1 << operation code` per operation it may do), for Metadata,
    /// DescribeCluster and DescribeGroups clients that ask for it.
    pub fn authorized_operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        self.operations_if(true, resource_type, name)
    }

    /// [`Self::authorized_operations`] when the client `asked` for them, else Kafka's "not
    /// asked for", i32::MIN.
    pub fn operations_if(&self, asked: bool, resource_type: ResourceType, name: &str) -> i32 {
        if !asked {
            return i32::MIN;
        }
        use Operation::*;
        let ops: &[Operation] = match resource_type {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Delete,
                Alter,
                Describe,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete],
            ResourceType::Cluster => &[
                Create,
                Alter,
                Describe,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                CreateTokens,
                DescribeTokens,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
        };
        ops.iter()
            .filter(|op| self.allowed(**op, resource_type, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }

    /// Whether this request may administer ACLs with `op` on the cluster (ALTER to change
    /// them, DESCRIBE to list them): SECURITY_DISABLED without an authorizer, as Kafka.
    pub fn acl_admin(&self, op: Operation) -> Result<(), KelpError> {
        if self.shard.cluster.authorizer.is_none() {
            Err(KelpError::SecurityDisabled)
        } else if !self.cluster_allowed(op) {
            Err(KelpError::ClusterAuthorizationFailed)
        } else {
            Ok(())
        }
    }

    /// Whether this request's principal may create topic `name` (CREATE on the cluster or
    /// on the topic), for explicit and automatic creation alike.
    pub fn may_create_topic(&self, name: &str) -> bool {
        self.cluster_allowed(Operation::Create)
            || self.allowed(Operation::Create, ResourceType::Topic, name)
    }

    /// The client host as Kafka reports it in DescribeGroups ("/" + ip).
    pub fn client_host(&self) -> String {
        format!("/{}", self.client_ip())
    }
}

/// Handles one request frame (header included). `Ok(None)`: no response is sent (acks=0).
/// `started` fires (or is dropped) once the next request of the connection may start.
pub async fn dispatch(
    shard: Rc<Shard>,
    header: RequestHeader,
    session: Rc<Session>,
    mut frame: BytesMut,
    started: oneshot::Sender<()>,
) -> Result<Option<Response>, ConnectionError> {
    // The header was parsed by the connection; the body follows it.
    let _ = frame.split_to(header.body_offset);
    shard.stats.count_api(header.api_key);
    let ctx = RequestContext {
        shard,
        header,
        session,
        started: Cell::new(Some(started)),
    };
    // A SASL listener serves nothing but the handshake before authentication (and after it
    // ran out); Kafka closes such connections too.
    ctx.session
        .admit(ctx.header.api_key, std::time::Instant::now())
        .map_err(ConnectionError::Unauthenticated)?;
    // KIP-511: an ApiVersions request of a version Kelp does not know is still answered.
    if !ctx.header.version_supported() && ctx.header.api_key == key::API_VERSIONS {
        return api_versions::unsupported(&ctx).map(Some);
    }
    // The version check, shape check and decode every request shares with the fuzz target;
    // Kafka closes the connection on versions it does not know and on malformed bodies.
    let req = request::decode_body(&ctx.header, frame)?;
    match req {
        Request::Produce(r) => produce::handle(&ctx, r).await,
        Request::Fetch(r) => fetch::handle(&ctx, r).await.map(Some),
        Request::ListOffsets(r) => list_offsets::handle(&ctx, r).await.map(Some),
        Request::Metadata(r) => metadata::handle(&ctx, r).await.map(Some),
        Request::ApiVersions(r) => api_versions::handle(&ctx, r).map(Some),
        Request::CreateTopics(r) => create_topics::handle(&ctx, r).await.map(Some),
        Request::DeleteTopics(r) => delete_topics::handle(&ctx, r).await.map(Some),
        Request::InitProducerId(r) => init_producer_id::handle(&ctx, r).await.map(Some),
        Request::AddPartitionsToTxn(r) => add_partitions_to_txn::handle(&ctx, r).await.map(Some),
        Request::AddOffsetsToTxn(r) => add_offsets_to_txn::handle(&ctx, r).await.map(Some),
        Request::EndTxn(r) => end_txn::handle(&ctx, r).await.map(Some),
        Request::DescribeTransactions(r) => describe_transactions::handle(&ctx, r).await.map(Some),
        Request::ListTransactions(r) => list_transactions::handle(&ctx, r).await.map(Some),
        Request::DescribeProducers(r) => describe_producers::handle(&ctx, r).await.map(Some),
        Request::TxnOffsetCommit(r) => txn_offset_commit::handle(&ctx, r).await.map(Some),
        Request::OffsetForLeaderEpoch(r) => {
            offset_for_leader_epoch::handle(&ctx, r).await.map(Some)
        }
        Request::DescribeConfigs(r) => describe_configs::handle(&ctx, r).map(Some),
        Request::DescribeCluster(r) => describe_cluster::handle(&ctx, r).map(Some),
        Request::DescribeLogDirs(r) => describe_log_dirs::handle(&ctx, r).await.map(Some),
        Request::ConsumerGroupHeartbeat(r) => {
            consumer_group_heartbeat::handle(&ctx, r).await.map(Some)
        }
        Request::ConsumerGroupDescribe(r) => {
            consumer_group_describe::handle(&ctx, r).await.map(Some)
        }
        Request::ShareGroupHeartbeat(r) => share_group_heartbeat::handle(&ctx, r).await.map(Some),
        Request::ShareGroupDescribe(r) => share_group_describe::handle(&ctx, r).await.map(Some),
        Request::ShareFetch(r) => share_fetch::handle(&ctx, r).await.map(Some),
        Request::ShareAcknowledge(r) => share_acknowledge::handle(&ctx, r).await.map(Some),
        Request::ListConfigResources(r) => list_config_resources::handle(&ctx, r).map(Some),
        Request::AlterShareGroupOffsets(r) => {
            alter_share_group_offsets::handle(&ctx, r).await.map(Some)
        }
        Request::DeleteShareGroupOffsets(r) => {
            delete_share_group_offsets::handle(&ctx, r).await.map(Some)
        }
        Request::DescribeShareGroupOffsets(r) => describe_share_group_offsets::handle(&ctx, r)
            .await
            .map(Some),
        Request::ElectLeaders(r) => elect_leaders::handle(&ctx, r).map(Some),
        Request::AlterPartitionReassignments(r) => {
            alter_partition_reassignments::handle(&ctx, r).map(Some)
        }
        Request::ListPartitionReassignments(r) => {
            list_partition_reassignments::handle(&ctx, r).map(Some)
        }
        Request::CreatePartitions(r) => create_partitions::handle(&ctx, r).await.map(Some),
        Request::AlterConfigs(r) => alter_configs::handle(&ctx, r).await.map(Some),
        Request::DescribeTopicPartitions(r) => describe_topic_partitions::handle(&ctx, r).map(Some),
        Request::DeleteRecords(r) => delete_records::handle(&ctx, r).await.map(Some),
        Request::IncrementalAlterConfigs(r) => {
            incremental_alter_configs::handle(&ctx, r).await.map(Some)
        }
        Request::FindCoordinator(r) => find_coordinator::handle(&ctx, r).map(Some),
        Request::JoinGroup(r) => join_group::handle(&ctx, r).await.map(Some),
        Request::SyncGroup(r) => sync_group::handle(&ctx, r).await.map(Some),
        Request::Heartbeat(r) => heartbeat::handle(&ctx, r).await.map(Some),
        Request::LeaveGroup(r) => leave_group::handle(&ctx, r).await.map(Some),
        Request::DescribeGroups(r) => describe_groups::handle(&ctx, r).await.map(Some),
        Request::ListGroups(r) => list_groups::handle(&ctx, r).await.map(Some),
        Request::DeleteGroups(r) => delete_groups::handle(&ctx, r).await.map(Some),
        Request::OffsetCommit(r) => offset_commit::handle(&ctx, r).await.map(Some),
        Request::OffsetFetch(r) => offset_fetch::handle(&ctx, r).await.map(Some),
        Request::OffsetDelete(r) => offset_delete::handle(&ctx, r).await.map(Some),
        Request::SaslHandshake(r) => sasl_handshake::handle(&ctx, r).map(Some),
        Request::SaslAuthenticate(r) => sasl_authenticate::handle(&ctx, r).map(Some),
        Request::DescribeAcls(r) => describe_acls::handle(&ctx, r).map(Some),
        Request::CreateAcls(r) => create_acls::handle(&ctx, r).await.map(Some),
        Request::DeleteAcls(r) => delete_acls::handle(&ctx, r).await.map(Some),
        Request::DescribeClientQuotas(r) => describe_client_quotas::handle(&ctx, r).map(Some),
        Request::DescribeUserScramCredentials(r) => {
            describe_user_scram_credentials::handle(&ctx, r).map(Some)
        }
        Request::AlterUserScramCredentials(r) => alter_user_scram_credentials::handle(&ctx, r)
            .await
            .map(Some),
    }
}

/// Maps an encoding failure of our own response (a bug, not bad input) to a connection error.
pub(crate) fn encoded(r: Result<Response, KelpError>) -> Result<Response, ConnectionError> {
    r.map_err(|e| ConnectionError::Malformed(e.to_string()))
}

/// Whether the node the client reached leads `(topic, partition)`: with
/// `--advertise-shards` that is the connection's own shard node.
pub(crate) fn led_here(ctx: &RequestContext, topic: &str, partition: i32) -> bool {
    let c = &ctx.shard.cluster;
    let mine = c.nodes.all();
    let me = if mine.len() > 1 {
        mine.get(ctx.shard.id)
    } else {
        mine.first()
    };
    me.is_some_and(|n| c.leader(topic, partition).0.id == n.id)
}

/// `StrBytes` from an owned string.
pub(crate) fn sb(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// `TopicName` from a string.
pub(crate) fn topic_name(s: impl Into<String>) -> TopicName {
    TopicName(sb(s))
}

/// Error code and message of one resource's outcome (admin requests answer per topic or
/// resource); a refusal is logged at debug, naming `what` was refused for `name`.
pub(crate) fn outcome_fields(
    what: &str,
    name: &str,
    outcome: Result<(), KelpError>,
) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (crate::error::code::NONE, None),
        Err(e) => {
            tracing::debug!(resource = %name, error = %e, "{what} refused");
            (e.code(), e.message().map(sb))
        }
    }
}

/// Error code of a result.
pub(crate) fn code_of<T>(r: &Result<T, KelpError>) -> i16 {
    match r {
        Ok(_) => crate::error::code::NONE,
        Err(e) => e.code(),
    }
}
