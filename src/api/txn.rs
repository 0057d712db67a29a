//! What the transactional APIs share: the check on a transactional id (transactions run on
//! this cluster, the principal may use it), Kafka's error codes for older request
//! versions, and the admission of transactional writes (KIP-890): Produce v12+ and
//! TxnOffsetCommit v5+ (transactions v2) add their partition or group to the transaction,
//! older versions are checked against what the client added.

use super::RequestContext;
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, KelpError};
use crate::shard::txn::{TxnAnswer, TxnRequest};
use crate::txn::AddMode;

/// Checks that transactions run on this cluster now and that the principal may `op` the
/// transactional id.
pub fn check_id(ctx: &RequestContext, id: &str, op: Operation) -> Result<(), KelpError> {
    if let Some(e) = ctx.shard.cluster.transactions_refused() {
        tracing::warn!(transactional_id = %id, error = %e, "transactional request refused");
        return Err(e);
    }
    if !ctx.allowed(op, ResourceType::TransactionalId, id) {
        return Err(KelpError::TransactionalIdAuthorizationFailed);
    }
    Ok(())
}

/// The code for `e` in a response of `version`: clients before KIP-588 know a fenced
/// producer as INVALID_PRODUCER_EPOCH, so versions below `fenced_since` get that.
pub fn code_for(e: &KelpError, version: i16, fenced_since: i16) -> i16 {
    match e {
        KelpError::ProducerFenced if version < fenced_since => code::INVALID_PRODUCER_EPOCH,
        e => e.code(),
    }
}

/// Adds `partitions` and `groups` to the transaction of `id` (`implicit`: transactions v2)
/// or checks that the client added them; answers those it had not added (with `implicit`,
/// none), or why the transaction refuses the write.
pub async fn admit(
    ctx: &RequestContext,
    id: &str,
    producer: (i64, i16),
    partitions: Vec<(String, i32)>,
    groups: Vec<String>,
    implicit: bool,
) -> Result<(Vec<(String, i32)>, Vec<String>), KelpError> {
    let req = TxnRequest::Add {
        id: id.to_string(),
        producer_id: producer.0,
        epoch: producer.1,
        partitions,
        groups,
        mode: if implicit {
            AddMode::Implicit
        } else {
            AddMode::Verify
        },
    };
    match ctx.shard.txn_call(req).await? {
        TxnAnswer::Missing(p, g) => Ok((p, g)),
        _ => Ok((Vec::new(), Vec::new())),
    }
}

/// The code a Produce of `version` answers for a refused transactional write, as Kafka
/// maps its coordinator's answers: clients before v11 know no TRANSACTION_ABORTABLE, a
/// coordinator out of reach is retriable, and a fenced producer is an old epoch.
pub fn produce_code(e: &KelpError, version: i16) -> i16 {
    match e {
        KelpError::TransactionAbortable if version <= 10 => code::INVALID_TXN_STATE,
        KelpError::ProducerFenced => code::INVALID_PRODUCER_EPOCH,
        KelpError::CoordinatorNotAvailable | KelpError::NotCoordinator => code::NOT_ENOUGH_REPLICAS,
        KelpError::ConcurrentTransactions if version < 12 => code::NOT_ENOUGH_REPLICAS,
        e => e.code(),
    }
}
