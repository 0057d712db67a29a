//! DeleteTopics (key 20, v1-v6): by name, or by topic id from v6.

use kafka_protocol::messages::delete_topics_response::{
    DeletableTopicResult, DeleteTopicsResponse,
};
use kafka_protocol::messages::DeleteTopicsRequest;

use super::{encoded, sb, topic_name, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;

/// Handles a DeleteTopics request.
pub async fn handle(
    ctx: &RequestContext,
    req: DeleteTopicsRequest,
) -> Result<Response, ConnectionError> {
    let cluster = ctx.shard.cluster.clone();
    // v6 names topics by name or id; earlier versions by name only.
    let targets: Vec<(Option<String>, uuid::Uuid)> = if ctx.header.api_version >= 6 {
        req.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        req.topic_names
            .iter()
            .map(|n| (Some(n.0.to_string()), uuid::Uuid::nil()))
            .collect()
    };
    let mut resp = DeleteTopicsResponse::default();
    for (name, id) in targets {
        let resolved = match &name {
            Some(n) => Ok(n.clone()),
            None => cluster
                .snapshot()
                .by_id
                .get(&id)
                .map(|m| m.name.clone())
                .ok_or(KelpError::UnknownTopicId),
        };
        let outcome = match resolved {
            Ok(n) if !ctx.allowed(Operation::Delete, ResourceType::Topic, &n) => {
                Err(KelpError::TopicAuthorizationFailed)
            }
            Ok(n) => ctx.shard.delete_topic(&n).await,
            Err(e) => Err(e),
        };
        let mut r = DeletableTopicResult::default();
        match outcome {
            Ok(meta) => {
                ctx.shard.broadcast_drop_topic(&meta.name).await;
                r.name = Some(topic_name(meta.name.clone()));
                r.topic_id = meta.id;
                r.error_code = code::NONE;
            }
            Err(e) => {
                r.name = name.map(topic_name);
                r.topic_id = id;
                r.error_code = e.code();
                r.error_message = Some(sb(e.to_string()));
            }
        }
        resp.responses.push(r);
    }
    encoded(Response::encode(&ctx.header, &resp))
}
