//! DescribeUserScramCredentials (key 50, v0): which SCRAM mechanisms (and iteration counts)
//! each user has; never the keys. A named user without credentials is RESOURCE_NOT_FOUND, a
//! user named twice DUPLICATE_RESOURCE.

use std::collections::HashMap;

use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::Operation;
use crate::error::{ConnectionError, KelpError};
use crate::protocol::Response;

/// Handles a DescribeUserScramCredentials request.
pub fn handle(
    ctx: &RequestContext,
    req: DescribeUserScramCredentialsRequest,
) -> Result<Response, ConnectionError> {
    let all = ctx.shard.cluster.credentials.describe();
    let found = |user: &str| -> DescribeUserScramCredentialsResult {
        let mut r = DescribeUserScramCredentialsResult::default().with_user(sb(user));
        match all.get(user) {
            Some(infos) => {
                r.credential_infos = infos
                    .iter()
                    .map(|(m, i)| {
                        CredentialInfo::default()
                            .with_mechanism(m.kafka_type())
                            .with_iterations(*i)
                    })
                    .collect();
            }
            None => {
                let e = KelpError::ResourceNotFound(format!(
                    "Attempt to describe a user credential that does not exist: {user}"
                ));
                r.error_code = e.code();
                r.error_message = e.message().map(sb);
            }
        }
        r
    };
    let mut resp = DescribeUserScramCredentialsResponse::default();
    if !ctx.cluster_allowed(Operation::Describe) {
        let e = KelpError::ClusterAuthorizationFailed;
        resp.error_code = e.code();
        resp.error_message = e.message().map(sb);
        return encoded(Response::encode(&ctx.header, &resp));
    }
    resp.results = match req.users.filter(|u| !u.is_empty()) {
        None => all.keys().map(|u| found(u)).collect(),
        Some(users) => {
            let mut seen: HashMap<&str, usize> = HashMap::new();
            for u in &users {
                *seen.entry(u.name.as_str()).or_default() += 1;
            }
            let mut out = Vec::new();
            for (u, n) in &seen {
                if *n > 1 {
                    let e = KelpError::DuplicateResource(format!(
                        "Cannot describe SCRAM credentials for the same user twice in a single request: {u}"
                    ));
                    out.push(
                        DescribeUserScramCredentialsResult::default()
                            .with_user(sb(*u))
                            .with_error_code(e.code())
                            .with_error_message(e.message().map(sb)),
                    );
                } else {
                    out.push(found(u));
                }
            }
            out.sort_by(|a, b| a.user.as_str().cmp(b.user.as_str()));
            out
        }
    };
    encoded(Response::encode(&ctx.header, &resp))
}
