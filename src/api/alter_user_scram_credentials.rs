//! AlterUserScramCredentials (key 51, v0): set users' SCRAM credentials from the salted
//! password the client computed (the password never reaches the broker) or delete them,
//! durably on the storage engine, per user: one user's failure leaves the others' changes.
//! Kafka's checks: a known mechanism, 4096-16384 iterations, a salt and a salted password of
//! the hash's length, no user both set and deleted (or twice for one mechanism), and a
//! deletion only of a credential that exists.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::Operation;
use crate::auth::credentials::Change;
use crate::auth::scram::{Credential, Mechanism, MAX_ITERATIONS, MIN_ITERATIONS};
use crate::error::{ConnectionError, KelpError};
use crate::protocol::Response;

/// One user's changes, or why they are refused.
type Planned = BTreeMap<String, Result<Vec<Change>, KelpError>>;

/// Checks the request and groups its changes by user.
fn plan(
    req: &AlterUserScramCredentialsRequest,
    exists: impl Fn(&str, Mechanism) -> bool,
) -> Planned {
    let mut out: Planned = BTreeMap::new();
    let mut seen: BTreeSet<(String, i8)> = BTreeSet::new();
    let fail = |out: &mut Planned, user: &str, e: KelpError| {
        out.insert(user.to_string(), Err(e));
    };
    let entries = req
        .deletions
        .iter()
        .map(|d| (d.name.as_str(), d.mechanism, None))
        .chain(req.upsertions.iter().map(|u| {
            (
                u.name.as_str(),
                u.mechanism,
                Some((u.iterations, &u.salt, &u.salted_password)),
            )
        }));
    for (user, mech, upsert) in entries {
        if matches!(out.get(user), Some(Err(_))) {
            continue;
        }
        if user.is_empty() {
            fail(
                &mut out,
                user,
                KelpError::UnacceptableCredential("Username must not be empty".into()),
            );
            continue;
        }
        let Some(m) = Mechanism::from_kafka_type(mech) else {
            fail(
                &mut out,
                user,
                KelpError::UnsupportedSaslMechanism(format!("Unknown SCRAM mechanism type {mech}")),
            );
            continue;
        };
        if !seen.insert((user.to_string(), mech)) {
            fail(
                &mut out,
                user,
                KelpError::DuplicateResource(format!(
                    "A user credential cannot be altered twice in the same request: {user} {}",
                    m.name()
                )),
            );
            continue;
        }
        let credential = match upsert {
            None if !exists(user, m) => {
                fail(
                    &mut out,
                    user,
                    KelpError::ResourceNotFound(format!(
                        "Attempt to delete a user credential that does not exist: {user} {}",
                        m.name()
                    )),
                );
                continue;
            }
            None => None,
            Some((iterations, salt, salted)) => {
                if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
                    fail(&mut out, user, KelpError::UnacceptableCredential(format!(
                        "Iterations {iterations} must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}"
                    )));
                    continue;
                }
                if salt.is_empty() || salted.len() != m.key_len() {
                    fail(
                        &mut out,
                        user,
                        KelpError::UnacceptableCredential(format!(
                            "A {} credential needs a salt and a salted password of {} bytes",
                            m.name(),
                            m.key_len()
                        )),
                    );
                    continue;
                }
                Some(Credential::from_salted(
                    m,
                    salt.to_vec(),
                    iterations,
                    salted,
                ))
            }
        };
        if let Ok(changes) = out
            .entry(user.to_string())
            .or_insert_with(|| Ok(Vec::new()))
        {
            changes.push(Change {
                user: user.to_string(),
                mechanism: m,
                credential,
            });
        }
    }
    out
}

/// Handles an AlterUserScramCredentials request.
pub async fn handle(
    ctx: &RequestContext,
    req: AlterUserScramCredentialsRequest,
) -> Result<Response, ConnectionError> {
    let creds = &ctx.shard.cluster.credentials;
    let mut planned = plan(&req, |u, m| creds.get(u, m).is_some());
    if !ctx.cluster_allowed(Operation::Alter) {
        for v in planned.values_mut() {
            *v = Err(KelpError::ClusterAuthorizationFailed);
        }
    }
    let mut resp = AlterUserScramCredentialsResponse::default();
    for (user, changes) in planned {
        let outcome = match changes {
            Ok(changes) => ctx.shard.alter_credentials(&user, &changes).await,
            Err(e) => Err(e),
        };
        let mut r = AlterUserScramCredentialsResult::default().with_user(sb(user.as_str()));
        if let Err(e) = outcome {
            tracing::info!(%user, error = %e, "SCRAM credential change refused");
            r.error_code = e.code();
            r.error_message = e.message().map(sb);
        } else {
            tracing::info!(%user, principal = %ctx.session.principal(), "SCRAM credentials altered");
        }
        resp.results.push(r);
    }
    encoded(Response::encode(&ctx.header, &resp))
}
