//! ShareGroupDescribe (key 77, v1, KIP-932): share groups' state, members and assignments,
//! each from its coordinator shard. DESCRIBE on the group is needed; an assigned topic the
//! caller may not describe makes the whole group TOPIC_AUTHORIZATION_FAILED, as Kafka.

use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{ConnectionError, KelpError};
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;

/// Handles a ShareGroupDescribe request.
pub async fn handle(
    ctx: &RequestContext,
    req: ShareGroupDescribeRequest,
) -> Result<Response, ConnectionError> {
    let snap = ctx.shard.cluster.snapshot();
    let mut resp = ShareGroupDescribeResponse::default();
    for id in req.group_ids {
        let name = id.0.to_string();
        let mut g = DescribedGroup::default();
        g.group_id = id.clone();
        g.authorized_operations = i32::MIN;
        let described = if !ctx.allowed(Operation::Describe, ResourceType::Group, &name) {
            Err(KelpError::GroupAuthorizationFailed)
        } else {
            match ctx
                .shard
                .group_call(GroupRequest::ShareDescribe(name.clone()))
                .await
            {
                GroupReply::ShareDescribe(r) => r,
                _ => Err(KelpError::CoordinatorNotAvailable),
            }
        };
        match described {
            Ok(d) => {
                g.group_state = sb(d.state.to_string());
                g.group_epoch = d.epoch;
                g.assignment_epoch = d.epoch;
                g.assignor_name = sb("simple".to_string());
                let mut denied = false;
                for dm in d.members {
                    let mut m = Member::default();
                    m.member_id = sb(dm.id);
                    m.member_epoch = dm.epoch;
                    m.rack_id = dm.rack.map(sb);
                    m.client_id = sb(dm.client_id);
                    m.client_host = sb(dm.client_host);
                    m.subscribed_topic_names =
                        dm.topics.into_iter().map(|t| TopicName(sb(t))).collect();
                    let mut a = Assignment::default();
                    for (topic_id, parts) in dm.assigned {
                        let topic = snap.by_id.get(&topic_id).map(|t| t.name.clone());
                        let topic = topic.unwrap_or_default();
                        denied |= !ctx.allowed(Operation::Describe, ResourceType::Topic, &topic);
                        let mut tp = TopicPartitions::default();
                        tp.topic_id = topic_id;
                        tp.topic_name = TopicName(sb(topic));
                        tp.partitions = parts.into_iter().collect();
                        a.topic_partitions.push(tp);
                    }
                    m.assignment = a;
                    g.members.push(m);
                }
                if denied {
                    let e = KelpError::TopicAuthorizationFailed;
                    g = DescribedGroup::default();
                    g.group_id = id;
                    g.error_code = e.code();
                    g.authorized_operations = i32::MIN;
                } else if req.include_authorized_operations {
                    g.authorized_operations = ctx.authorized_operations(ResourceType::Group, &name);
                }
            }
            Err(e) => {
                g.error_code = e.code();
                g.error_message = match e {
                    KelpError::GroupIdNotFound => Some(sb(format!("Group {name} not found."))),
                    e => e.message().map(sb),
                };
                g.group_state = sb("Dead".to_string());
            }
        }
        resp.groups.push(g);
    }
    encoded(Response::encode(&ctx.header, &resp))
}
