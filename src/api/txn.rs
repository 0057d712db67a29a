//! What the transactional APIs share: the checks on a transactional id (the engine keeps
//! transactions, the principal may write the id) and Kafka's error code for a fenced producer
//! in older request versions.

use super::RequestContext;
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, KelpError};

/// Checks that transactions run on this storage engine and that the principal may `op`
/// the transactional id.
pub fn check_id(ctx: &RequestContext, id: &str, op: Operation) -> Result<(), KelpError> {
    if !ctx.shard.engine.supports_transactions() {
        return Err(KelpError::TransactionsUnsupported);
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
