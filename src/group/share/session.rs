//! Share sessions (KIP-932): the partitions a share group member fetches from this broker,
//! and the epoch its next ShareFetch or ShareAcknowledge must carry, as Kafka's
//! ShareSessionCache keeps them. Keyed by (group, member); epoch 0 opens a session (a new one
//! replaces the old), -1 closes it after its acknowledgements, any other must be the
//! session's and moves it on (wrapping to 1). A session belongs to the connection that
//! opened it: when that goes, so does the session, and the member's acquired records are
//! released by the caller. At most `limit` sessions (Kafka's group.share.max.share.sessions).

use std::collections::{BTreeSet, HashMap};

use uuid::Uuid;

use crate::error::KelpError;

/// A partition of a session: topic id and partition index.
pub type SessionPartition = (Uuid, i32);

/// What a ShareFetch may do, given its session epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchContext {
    /// Epoch 0: a new session; the answer lists every one of its partitions.
    Full(BTreeSet<SessionPartition>),
    /// The session's epoch: fetch from all its partitions (the answer lists those with
    /// records or errors).
    Incremental(BTreeSet<SessionPartition>),
    /// Epoch -1: acknowledgements only, then the session is gone (its partitions, for the
    /// caller to release the member's records on).
    Final(BTreeSet<SessionPartition>),
}

/// Who a request comes from: the member of a group, over a connection.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    /// The share group.
    pub group: &'a str,
    /// The member (its client-chosen id).
    pub member: &'a str,
    /// The connection it came over (its session's, when it opens one).
    pub connection: u64,
    /// The broker (node id) it was sent to: a member has a session per broker, and with
    /// --advertise-shards each shard is a broker of its own.
    pub broker: i32,
}

#[derive(Debug, Clone)]
struct Session {
    epoch: i32,
    partitions: BTreeSet<SessionPartition>,
    connection: u64,
}

/// Every share session of this broker (one shard's share of them).
#[derive(Debug, Default)]
pub struct ShareSessions {
    sessions: HashMap<SessionKey, Session>,
    limit: usize,
}

/// (group, member, broker).
type SessionKey = (String, String, i32);

fn next_epoch(e: i32) -> i32 {
    if e == i32::MAX {
        1
    } else {
        e + 1
    }
}

impl ShareSessions {
    /// No sessions yet; at most `limit`.
    pub fn new(limit: usize) -> Self {
        ShareSessions {
            sessions: HashMap::new(),
            limit,
        }
    }

    /// Sessions held.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The session a ShareFetch of `who` at `epoch` works in, after adding `added` and
    /// dropping `forgotten` partitions. `acks`: whether it carries acknowledgements (not
    /// allowed when opening a session).
    pub fn fetch(
        &mut self,
        who: Requester<'_>,
        epoch: i32,
        added: &[SessionPartition],
        forgotten: &[SessionPartition],
        acks: bool,
    ) -> Result<FetchContext, KelpError> {
        let key = (who.group.to_string(), who.member.to_string(), who.broker);
        let connection = who.connection;
        match epoch {
            0 => {
                if acks {
                    return Err(KelpError::InvalidRequest(
                        "Acknowledge data present on initial fetch request".into(),
                    ));
                }
                if !self.sessions.contains_key(&key) && self.sessions.len() >= self.limit {
                    return Err(KelpError::ShareSessionLimitReached(self.limit));
                }
                let partitions: BTreeSet<SessionPartition> = added.iter().copied().collect();
                self.sessions.insert(
                    key,
                    Session {
                        epoch: 1,
                        partitions: partitions.clone(),
                        connection,
                    },
                );
                Ok(FetchContext::Full(partitions))
            }
            -1 => {
                let s = self
                    .sessions
                    .remove(&key)
                    .ok_or(KelpError::ShareSessionNotFound)?;
                Ok(FetchContext::Final(s.partitions))
            }
            n => {
                let s = self.step(&key, n)?;
                s.partitions.extend(added.iter().copied());
                for p in forgotten {
                    s.partitions.remove(p);
                }
                Ok(FetchContext::Incremental(s.partitions.clone()))
            }
        }
    }

    /// Checks a ShareAcknowledge of `who` at `epoch`: epoch 0 is refused (acknowledging
    /// needs a session), -1 closes the session (its partitions are returned, for releasing
    /// the member's records after the acknowledgements), any other must be the session's
    /// and moves it on.
    pub fn acknowledge(
        &mut self,
        who: Requester<'_>,
        epoch: i32,
    ) -> Result<Option<BTreeSet<SessionPartition>>, KelpError> {
        let key = (who.group.to_string(), who.member.to_string(), who.broker);
        match epoch {
            0 => Err(KelpError::InvalidShareSessionEpoch(0, -1)),
            -1 => self
                .sessions
                .remove(&key)
                .map(|s| Some(s.partitions))
                .ok_or(KelpError::ShareSessionNotFound),
            n => self.step(&key, n).map(|_| None),
        }
    }

    /// The session of `key` at epoch `n`, moved on to its next epoch.
    fn step(&mut self, key: &SessionKey, n: i32) -> Result<&mut Session, KelpError> {
        let s = self
            .sessions
            .get_mut(key)
            .ok_or(KelpError::ShareSessionNotFound)?;
        if n != s.epoch {
            return Err(KelpError::InvalidShareSessionEpoch(n, s.epoch));
        }
        s.epoch = next_epoch(s.epoch);
        Ok(s)
    }

    /// The groups with at least one session.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.sessions.keys().map(|(g, _, _)| g.as_str())
    }

    /// Drops the sessions `connection` opened: (group, member, partitions) of each, for the
    /// caller to release the members' records.
    pub fn connection_closed(
        &mut self,
        connection: u64,
    ) -> Vec<(String, String, BTreeSet<SessionPartition>)> {
        let gone: Vec<SessionKey> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.connection == connection)
            .map(|(k, _)| k.clone())
            .collect();
        gone.into_iter()
            .filter_map(|k| {
                let s = self.sessions.remove(&k)?;
                Some((k.0, k.1, s.partitions))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::code;

    fn r<'a>(group: &'a str, member: &'a str, connection: u64) -> Requester<'a> {
        Requester {
            group,
            member,
            connection,
            broker: 0,
        }
    }

    #[test]
    fn sessions_open_move_on_add_forget_and_close() {
        let (t, u) = (Uuid::new_v4(), Uuid::new_v4());
        let mut s = ShareSessions::new(10);
        let open = s
            .fetch(r("g", "m", 7), 0, &[(t, 0), (t, 1)], &[], false)
            .unwrap();
        assert_eq!(open, FetchContext::Full([(t, 0), (t, 1)].into()));
        let inc = s
            .fetch(r("g", "m", 7), 1, &[(u, 0)], &[(t, 0)], true)
            .unwrap();
        assert_eq!(inc, FetchContext::Incremental([(t, 1), (u, 0)].into()));
        // Acknowledgements share the counter.
        assert_eq!(s.acknowledge(r("g", "m", 0), 2).unwrap(), None);
        let stale = s.fetch(r("g", "m", 7), 2, &[], &[], false).unwrap_err();
        assert_eq!(stale.code(), code::INVALID_SHARE_SESSION_EPOCH);
        assert!(s.fetch(r("g", "m", 7), 3, &[], &[], false).is_ok());
        let last = s.fetch(r("g", "m", 7), -1, &[], &[], true).unwrap();
        assert_eq!(last, FetchContext::Final([(t, 1), (u, 0)].into()));
        let gone = s.fetch(r("g", "m", 7), 5, &[], &[], false).unwrap_err();
        assert_eq!(gone.code(), code::SHARE_SESSION_NOT_FOUND);
    }

    #[test]
    fn opening_with_acks_a_full_cache_and_acknowledging_without_a_session_are_refused() {
        let t = Uuid::new_v4();
        let mut s = ShareSessions::new(1);
        let e = s
            .fetch(r("g", "a", 1), 0, &[(t, 0)], &[], true)
            .unwrap_err();
        assert_eq!(e.code(), code::INVALID_REQUEST);
        s.fetch(r("g", "a", 1), 0, &[(t, 0)], &[], false).unwrap();
        let full = s
            .fetch(r("g", "b", 1), 0, &[(t, 0)], &[], false)
            .unwrap_err();
        assert_eq!(full.code(), code::SHARE_SESSION_LIMIT_REACHED);
        // The same member opening again replaces its own session.
        assert!(s.fetch(r("g", "a", 2), 0, &[], &[], false).is_ok());
        assert_eq!(
            s.acknowledge(r("g", "a", 0), 0).unwrap_err().code(),
            code::INVALID_SHARE_SESSION_EPOCH
        );
        assert_eq!(
            s.acknowledge(r("g", "b", 0), 1).unwrap_err().code(),
            code::SHARE_SESSION_NOT_FOUND
        );
        assert_eq!(
            s.acknowledge(r("g", "a", 0), -1).unwrap(),
            Some(BTreeSet::new())
        );
        assert!(s.is_empty());
    }

    #[test]
    fn a_closed_connection_takes_its_sessions_and_the_epoch_wraps_to_one() {
        let t = Uuid::new_v4();
        let mut s = ShareSessions::new(10);
        s.fetch(r("g", "a", 1), 0, &[(t, 0)], &[], false).unwrap();
        s.fetch(r("g", "b", 2), 0, &[(t, 1)], &[], false).unwrap();
        let gone = s.connection_closed(1);
        assert_eq!(gone, [("g".into(), "a".into(), [(t, 0)].into())]);
        assert_eq!(s.len(), 1);
        assert_eq!(next_epoch(i32::MAX), 1);
    }
}
