//! ConsumerGroupDescribe (key 69, v0-v1, KIP-848): epochs, assignor and members (with their
//! current and target assignments) of consumer groups, each asked of its coordinator shard.
//! A classic group with members answers GROUP_ID_NOT_FOUND, as Kafka does, so admin clients
//! fall back to DescribeGroups.

use std::collections::BTreeMap;

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse};
use uuid::Uuid;

use super::{encoded, sb, topic_name, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::group::consumer;
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;

/// Member type of a member speaking the consumer protocol (v1).
const CONSUMER_MEMBER: i8 = 1;

/// Handles a ConsumerGroupDescribe request.
pub async fn handle(
    ctx: &RequestContext,
    req: ConsumerGroupDescribeRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = ConsumerGroupDescribeResponse::default();
    for gid in req.group_ids {
        let name = gid.0.to_string();
        let mut d = DescribedGroup::default();
        d.group_id = gid;
        d.authorized_operations = ctx.operations_if(
            req.include_authorized_operations,
            ResourceType::Group,
            &name,
        );
        let out = if !ctx.allowed(Operation::Describe, ResourceType::Group, &name) {
            Err(KelpError::GroupAuthorizationFailed)
        } else {
            match ctx
                .shard
                .group_call(GroupRequest::ConsumerDescribe(name))
                .await
            {
                GroupReply::ConsumerDescribe(r) => r,
                _ => Err(KelpError::CoordinatorNotAvailable),
            }
        };
        match out {
            Ok(desc) => {
                d.error_code = code::NONE;
                d.group_state = sb(desc.state);
                d.group_epoch = desc.epoch;
                d.assignment_epoch = desc.assignment_epoch;
                d.assignor_name = sb(desc.assignor);
                let names = &desc.topic_names;
                d.members = desc
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut out = Member::default();
                        out.member_id = sb(m.member_id);
                        out.instance_id = m.instance_id.map(sb);
                        out.rack_id = m.rack_id.map(sb);
                        out.member_epoch = m.member_epoch;
                        out.client_id = sb(m.client_id);
                        out.client_host = sb(m.client_host);
                        out.subscribed_topic_names =
                            m.topic_names.into_iter().map(topic_name).collect();
                        out.subscribed_topic_regex = m.topic_regex.map(sb);
                        out.assignment = assignment(m.assignment, names);
                        out.target_assignment = assignment(m.target, names);
                        out.member_type = CONSUMER_MEMBER;
                        out
                    })
                    .collect();
            }
            Err(e) => {
                d.error_code = e.code();
                d.error_message = e.message().map(sb);
                d.group_state = sb("Dead");
            }
        }
        resp.groups.push(d);
    }
    encoded(Response::encode(&ctx.header, &resp))
}

fn assignment(a: consumer::Assignment, names: &BTreeMap<Uuid, String>) -> Assignment {
    let mut out = Assignment::default();
    out.topic_partitions = a
        .into_iter()
        .map(|(id, ps)| {
            let mut tp = TopicPartitions::default();
            tp.topic_id = id;
            tp.topic_name = topic_name(names.get(&id).cloned().unwrap_or_default());
            tp.partitions = ps.into_iter().collect();
            tp
        })
        .collect();
    out
}
