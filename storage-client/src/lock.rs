//! Leases on the SeaweedFS filer's distributed locks (`DistributedLock`,
//! `DistributedUnlock`, `FindLockOwner`), what SeaweedMQ's brokers and the Go gateway use to
//! elect a leader.
//!
//! A lock is a lease: granted for `ttl` to an owner (a free-form label), kept only by
//! renewing it before it expires with the token the last grant returned; each grant returns
//! a new token. A lock granted anew (free, expired, or released) gets a new generation,
//! which only grows: it is the epoch a holder can stamp its work with. The filer forwards a
//! request to the filer that hosts the lock's name. Locks live in the filers' memory: a
//! holder whose renewal is refused has lost the lock and must stop acting on it.

use std::time::Duration;

use crate::filer::FilerClient;
use crate::pb::filer_pb::{FindLockOwnerRequest, LockRequest, UnlockRequest};
use crate::{Error, Result};

/// The filer's text when another owner holds the lock.
const OWNED: &str = "lock already owned";

/// A lock this client holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The lock's name.
    pub name: String,
    /// The token to renew or release it with.
    pub token: String,
    /// The generation of this grant: greater than that of every earlier holder.
    pub generation: i64,
}

/// What [`acquire`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// The lock is this caller's for the ttl.
    Held(Lease),
    /// Someone else holds it (its owner label, when the filer named it).
    Busy(String),
}

fn ttl_seconds(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_secs().max(1)).unwrap_or(i64::MAX)
}

/// Takes the lock `name` for `ttl` (whole seconds, at least 1) as `owner`, unless someone else
/// holds it.
pub async fn acquire(
    client: &mut FilerClient,
    name: &str,
    owner: &str,
    ttl: Duration,
) -> Result<Acquired> {
    let r = client
        .distributed_lock(LockRequest {
            name: name.to_owned(),
            seconds_to_lock: ttl_seconds(ttl),
            renew_token: String::new(),
            is_moved: false,
            owner: owner.to_owned(),
        })
        .await?
        .into_inner();
    if r.error.contains(OWNED) {
        return Ok(Acquired::Busy(r.lock_owner));
    }
    if !r.error.is_empty() || r.renew_token.is_empty() {
        return Err(Error::Filer {
            path: format!("lock {name}"),
            message: if r.error.is_empty() {
                "no token granted".into()
            } else {
                r.error
            },
        });
    }
    Ok(Acquired::Held(Lease {
        name: name.to_owned(),
        token: r.renew_token,
        generation: r.generation,
    }))
}

/// Extends a held lock for another `ttl`; the lease's token is replaced. An error means the
/// lock was lost (expired and maybe taken, or the filer forgot it) or the filer did not
/// answer: either way the holder cannot count on it past its last expiry.
pub async fn renew(
    client: &mut FilerClient,
    lease: &mut Lease,
    owner: &str,
    ttl: Duration,
) -> Result<()> {
    let r = client
        .distributed_lock(LockRequest {
            name: lease.name.clone(),
            seconds_to_lock: ttl_seconds(ttl),
            renew_token: lease.token.clone(),
            is_moved: false,
            owner: owner.to_owned(),
        })
        .await?
        .into_inner();
    if !r.error.is_empty() || r.renew_token.is_empty() {
        return Err(Error::Filer {
            path: format!("lock {}", lease.name),
            message: format!("renewal refused: {}", r.error),
        });
    }
    lease.token = r.renew_token;
    Ok(())
}

/// Gives a held lock up at once.
pub async fn release(client: &mut FilerClient, lease: &Lease) -> Result<()> {
    let r = client
        .distributed_unlock(UnlockRequest {
            name: lease.name.clone(),
            renew_token: lease.token.clone(),
            is_moved: false,
        })
        .await?
        .into_inner();
    if r.error.is_empty() {
        Ok(())
    } else {
        Err(Error::Filer {
            path: format!("lock {}", lease.name),
            message: r.error,
        })
    }
}

/// The owner label of the lock `name`, or None when nobody holds it.
pub async fn owner(client: &mut FilerClient, name: &str) -> Result<Option<String>> {
    match client
        .find_lock_owner(FindLockOwnerRequest {
            name: name.to_owned(),
            is_moved: false,
        })
        .await
    {
        Ok(r) => Ok(Some(r.into_inner().owner).filter(|o| !o.is_empty())),
        Err(s) if s.code() == tonic::Code::NotFound => Ok(None),
        Err(s) => Err(s.into()),
    }
}
