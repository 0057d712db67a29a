//! Request handlers, one file per Kafka API, sharing a request context.
//!
//! [`dispatch`] turns one request frame into at most one response. Handlers read the shared
//! metadata snapshot through the shard and run partition work through [`Shard::scatter`].

pub mod api_versions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod produce;
pub mod sync_group;

use std::cell::Cell;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use futures::channel::oneshot;
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::{Decodable, StrBytes};

use crate::error::{ConnectionError, KelpError};
use crate::protocol::versions::key;
use crate::protocol::{RequestHeader, Response};
use crate::shard::Shard;

/// What a handler sees of the request it serves.
pub struct RequestContext {
    pub shard: Rc<Shard>,
    pub header: RequestHeader,
    /// The client's address ("ip:port"), as the connection saw it.
    pub peer: Rc<str>,
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

    /// The client host as Kafka reports it in DescribeGroups ("/" + ip).
    pub fn client_host(&self) -> String {
        let ip = match self.peer.rsplit_once(':') {
            Some((ip, _)) => ip,
            None => &self.peer,
        };
        format!("/{}", ip.trim_start_matches('[').trim_end_matches(']'))
    }

    /// Decodes a `kafka-protocol` request body; malformed bodies end the connection, as in Kafka.
    pub fn decode<M: Decodable>(&self, body: Bytes) -> Result<M, ConnectionError> {
        let mut b = body;
        M::decode(&mut b, self.header.api_version).map_err(|e| {
            ConnectionError::Malformed(format!(
                "{} v{}: {e}",
                self.header.support().name,
                self.header.api_version
            ))
        })
    }
}

/// Handles one request frame (header included). `Ok(None)`: no response is sent (acks=0).
/// `started` fires (or is dropped) once the next request of the connection may start.
pub async fn dispatch(
    shard: Rc<Shard>,
    header: RequestHeader,
    peer: Rc<str>,
    mut frame: BytesMut,
    started: oneshot::Sender<()>,
) -> Result<Option<Response>, ConnectionError> {
    let _ = frame.split_to(header.body_offset);
    let ctx = RequestContext {
        shard,
        header,
        peer,
        started: Cell::new(Some(started)),
    };
    if !ctx.header.version_supported() {
        if ctx.header.api_key == key::API_VERSIONS {
            return api_versions::unsupported(&ctx).map(Some);
        }
        // Kafka closes the connection on versions it does not know.
        return Err(ConnectionError::UnsupportedVersion(
            ctx.header.api_key,
            ctx.header.api_version,
        ));
    }
    let resp: Result<Option<Response>, ConnectionError> = match ctx.header.api_key {
        key::PRODUCE => produce::handle(&ctx, frame).await,
        key::FETCH => fetch::handle(&ctx, frame.freeze()).await.map(Some),
        key::LIST_OFFSETS => list_offsets::handle(&ctx, frame.freeze()).await.map(Some),
        key::METADATA => metadata::handle(&ctx, frame.freeze()).await.map(Some),
        key::API_VERSIONS => api_versions::handle(&ctx, frame.freeze()).map(Some),
        key::CREATE_TOPICS => create_topics::handle(&ctx, frame.freeze()).await.map(Some),
        key::DELETE_TOPICS => delete_topics::handle(&ctx, frame.freeze()).await.map(Some),
        key::INIT_PRODUCER_ID => init_producer_id::handle(&ctx, frame.freeze()).map(Some),
        key::DESCRIBE_CONFIGS => describe_configs::handle(&ctx, frame.freeze()).map(Some),
        key::DESCRIBE_CLUSTER => describe_cluster::handle(&ctx, frame.freeze()).map(Some),
        key::DELETE_RECORDS => delete_records::handle(&ctx, frame.freeze()).await.map(Some),
        key::INCREMENTAL_ALTER_CONFIGS => {
            incremental_alter_configs::handle(&ctx, frame.freeze()).map(Some)
        }
        key::FIND_COORDINATOR => find_coordinator::handle(&ctx, frame.freeze()).map(Some),
        key::JOIN_GROUP => join_group::handle(&ctx, frame.freeze()).await.map(Some),
        key::SYNC_GROUP => sync_group::handle(&ctx, frame.freeze()).await.map(Some),
        key::HEARTBEAT => heartbeat::handle(&ctx, frame.freeze()).await.map(Some),
        key::LEAVE_GROUP => leave_group::handle(&ctx, frame.freeze()).await.map(Some),
        key::DESCRIBE_GROUPS => describe_groups::handle(&ctx, frame.freeze())
            .await
            .map(Some),
        key::LIST_GROUPS => list_groups::handle(&ctx, frame.freeze()).await.map(Some),
        key::DELETE_GROUPS => delete_groups::handle(&ctx, frame.freeze()).await.map(Some),
        key::OFFSET_COMMIT => offset_commit::handle(&ctx, frame.freeze()).await.map(Some),
        key::OFFSET_FETCH => offset_fetch::handle(&ctx, frame.freeze()).await.map(Some),
        key::OFFSET_DELETE => offset_delete::handle(&ctx, frame.freeze()).await.map(Some),
        other => Err(ConnectionError::UnknownApiKey(other)),
    };
    resp
}

/// Maps an encoding failure of our own response (a bug, not bad input) to a connection error.
pub(crate) fn encoded(r: Result<Response, KelpError>) -> Result<Response, ConnectionError> {
    r.map_err(|e| ConnectionError::Malformed(e.to_string()))
}

/// `StrBytes` from an owned string.
pub(crate) fn sb(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// `TopicName` from a string.
pub(crate) fn topic_name(s: impl Into<String>) -> TopicName {
    TopicName(sb(s))
}

/// Error code of a result.
pub(crate) fn code_of<T>(r: &Result<T, KelpError>) -> i16 {
    match r {
        Ok(_) => crate::error::code::NONE,
        Err(e) => e.code(),
    }
}
