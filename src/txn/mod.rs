//! The transaction coordinator's state (KIP-98): per transactional id, its producer id and
//! epoch, where its current transaction stands, and which partitions and groups it wrote to.
//! Pure: the checks and transitions Kafka's TransactionCoordinator makes, as functions of
//! that state; the shard that coordinates an id (`shard::txn`) stores each new state through
//! the storage engine before acting on it, and writes the markers. Calls nothing but `error`; [`checkpoint`] is the
//! partitions' side, as engines store it.

pub mod checkpoint;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::KelpError;

/// Where the transaction records live (one per transactional id, JSON).
pub const SPACE: &str = "transactions";

/// Where transactional offset commits wait for their transaction's end (one record per
/// group and producer).
pub const OFFSETS_SPACE: &str = "transaction-offsets";

/// Where a transactional id's transaction stands (Kafka's TransactionState).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnState {
    /// No transaction open.
    Empty,
    /// Partitions or groups were added: a transaction is open.
    Ongoing,
    /// EndTxn(commit) decided: markers are being written.
    PrepareCommit,
    /// EndTxn(abort) or a timeout decided: markers are being written.
    PrepareAbort,
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction aborted.
    CompleteAbort,
}

impl TxnState {
    /// Kafka's name, as DescribeTransactions and ListTransactions show it.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    /// Whether markers are being written (the outcome is decided, not yet everywhere).
    pub fn preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// One transactional id's state, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnMeta {
    /// Its producer id.
    pub producer_id: i64,
    /// Its current epoch: older ones are fenced.
    pub epoch: i16,
    /// The client's transaction.timeout.ms.
    pub timeout_ms: i32,
    /// Where the transaction stands.
    pub state: TxnState,
    /// Partitions the open (or preparing) transaction wrote to.
    pub partitions: BTreeSet<(String, i32)>,
    /// Groups whose offsets it committed (AddOffsetsToTxn).
    pub groups: BTreeSet<String>,
    /// When the open transaction started (ms since the epoch; -1: none open).
    pub started_ms: i64,
    /// When the state last changed (ms since the epoch).
    pub updated_ms: i64,
    /// The producer id before an EndTxn (transactions v2) used up the epochs and moved to a
    /// new one: a retry of that EndTxn still carries it.
    #[serde(default)]
    pub prev_producer_id: Option<i64>,
    /// The producer id the transaction being completed moves to (its epochs are used up).
    #[serde(default)]
    pub next_producer_id: Option<i64>,
}

/// What InitProducerId does with an existing id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitPlan {
    /// Bump the epoch (or, at the end of epochs, take a new producer id) and answer.
    Bump,
    /// Abort the open transaction first, with markers at the bumped epoch (which fences
    /// the old producer's writes), then answer with that epoch.
    AbortThenBump,
    /// Finish writing the markers of a decided transaction first.
    FinishThenBump,
}

/// What EndTxn v5+ (transactions v2, KIP-890) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndPlan {
    /// Prepare this outcome at the next epoch (markers follow).
    Prepare(TxnState),
    /// A retry of the EndTxn that completed the last transaction the same way: success,
    /// with the producer id and epoch it moved to.
    Retry,
    /// An abort with nothing open: only the epoch moves on.
    EmptyAbort,
}

/// How an add request treats the transaction (KIP-890).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddMode {
    /// A client's AddPartitionsToTxn (v0-3) or AddOffsetsToTxn: CONCURRENT_TRANSACTIONS
    /// while another operation on the id is under way (the client retries).
    Client,
    /// Added by the broker as the transaction writes (Produce v12+, TxnOffsetCommit v5+,
    /// AddPartitionsToTxn v4+): waits for the operation under way.
    Implicit,
    /// Only checks that they were added (older Produce and TxnOffsetCommit, KIP-890 part
    /// 1): waits likewise, changes nothing.
    Verify,
}

/// Epochs stop short of the maximum: Kafka bumps to a new producer id there.
pub const LAST_EPOCH: i16 = i16::MAX - 1;

impl TxnMeta {
    /// A new id's state.
    pub fn new(producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        TxnMeta {
            producer_id,
            epoch: 0,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
            started_ms: -1,
            updated_ms: now_ms,
            prev_producer_id: None,
            next_producer_id: None,
        }
    }

    /// InitProducerId for an id that exists: `client` is the (producer id, epoch) a client
    /// re-initialising sends (KIP-360), (-1, -1) from a new one.
    pub fn plan_init(&self, client: (i64, i16)) -> Result<InitPlan, KelpError> {
        if client.0 >= 0 && (client.0 != self.producer_id || client.1 != self.epoch) {
            return Err(KelpError::ProducerFenced);
        }
        Ok(match self.state {
            TxnState::Ongoing => InitPlan::AbortThenBump,
            s if s.preparing() => InitPlan::FinishThenBump,
            _ => InitPlan::Bump,
        })
    }

    /// Checks a request's producer id and epoch against the id's (AddPartitionsToTxn,
    /// AddOffsetsToTxn, EndTxn), and that no outcome is being written.
    pub fn check_producer(&self, producer_id: i64, epoch: i16) -> Result<(), KelpError> {
        if producer_id != self.producer_id {
            return Err(KelpError::InvalidProducerIdMapping);
        }
        if epoch != self.epoch {
            return Err(KelpError::ProducerFenced);
        }
        if self.state.preparing() {
            return Err(KelpError::ConcurrentTransactions);
        }
        Ok(())
    }

    /// Adds partitions and groups to the transaction (opening it if none is open); false
    /// when nothing changed, so nothing needs storing.
    pub fn add(
        &mut self,
        partitions: impl IntoIterator<Item = (String, i32)>,
        groups: impl IntoIterator<Item = String>,
        now_ms: i64,
    ) -> bool {
        let mut changed = self.state != TxnState::Ongoing;
        if changed {
            self.state = TxnState::Ongoing;
            self.started_ms = now_ms;
            self.partitions.clear();
            self.groups.clear();
        }
        for p in partitions {
            changed |= self.partitions.insert(p);
        }
        for g in groups {
            changed |= self.groups.insert(g);
        }
        if changed {
            self.updated_ms = now_ms;
        }
        changed
    }

    /// EndTxn: the state to prepare, or None when this is a retry of an EndTxn that already
    /// completed the same way (answered with success).
    pub fn plan_end(&self, commit: bool) -> Result<Option<TxnState>, KelpError> {
        match (self.state, commit) {
            (TxnState::Ongoing, true) => Ok(Some(TxnState::PrepareCommit)),
            (TxnState::Ongoing, false) => Ok(Some(TxnState::PrepareAbort)),
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(None),
            (s, _) => Err(KelpError::InvalidTxnState(format!(
                "EndTxn({}) in state {}",
                if commit { "commit" } else { "abort" },
                s.name()
            ))),
        }
    }

    /// EndTxn v5+ (transactions v2): the epoch moves on with every transaction's end, so a
    /// retry carries the epoch before (or, when the epochs ran out, the producer id before
    /// at the last epoch), and an abort with nothing open is allowed.
    pub fn plan_end_v2(
        &self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<EndPlan, KelpError> {
        let overflow_retry =
            self.prev_producer_id == Some(producer_id) && epoch == LAST_EPOCH && self.epoch == 0;
        if producer_id != self.producer_id && !overflow_retry {
            return Err(KelpError::InvalidProducerIdMapping);
        }
        let retry = overflow_retry || i32::from(self.epoch) == i32::from(epoch) + 1;
        let completed = match self.state {
            TxnState::CompleteCommit => Some(true),
            TxnState::CompleteAbort => Some(false),
            _ => None,
        };
        match self.state {
            s if s.preparing() && retry => Err(KelpError::ConcurrentTransactions),
            TxnState::Ongoing if epoch == self.epoch && !overflow_retry => {
                Ok(EndPlan::Prepare(if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                }))
            }
            _ if retry && completed == Some(commit) => Ok(EndPlan::Retry),
            _ if retry && completed.is_some() => Err(KelpError::InvalidTxnState(format!(
                "EndTxn({}) retried after the transaction {}",
                if commit { "commit" } else { "abort" },
                if commit { "aborted" } else { "committed" }
            ))),
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                if epoch == self.epoch && !overflow_retry =>
            {
                if commit {
                    Err(KelpError::InvalidTxnState(format!(
                        "EndTxn(commit) in state {}",
                        self.state.name()
                    )))
                } else {
                    Ok(EndPlan::EmptyAbort)
                }
            }
            _ => Err(KelpError::ProducerFenced),
        }
    }

    /// Moves to the next epoch as a transactions v2 EndTxn does; when the epochs are used
    /// up, the markers take the last one and the transaction moves to `fresh_id()` on
    /// completion.
    pub fn bump_for_end(&mut self, fresh_id: i64) {
        match self.next_epoch() {
            Some(e) => self.epoch = e,
            None => {
                self.epoch = i16::MAX;
                self.next_producer_id = Some(fresh_id);
            }
        }
    }

    /// The producer id and epoch the id has once its transaction is complete (now, if it
    /// is): what EndTxn v5 answers even while markers wait for the timer.
    pub fn producer_once_complete(&self) -> (i64, i16) {
        match self.next_producer_id {
            Some(next) => (next, 0),
            None => (self.producer_id, self.epoch),
        }
    }

    /// Whether an epoch bump at the end of this transaction needs a new producer id.
    pub fn end_needs_new_id(&self) -> bool {
        self.next_epoch().is_none()
    }

    /// Those of `partitions` and `groups` the open transaction has not added (all of them
    /// when none is open), for a verification.
    pub fn missing(
        &self,
        partitions: &[(String, i32)],
        groups: &[String],
    ) -> (Vec<(String, i32)>, Vec<String>) {
        let open = self.state == TxnState::Ongoing;
        (
            partitions
                .iter()
                .filter(|p| !open || !self.partitions.contains(*p))
                .cloned()
                .collect(),
            groups
                .iter()
                .filter(|g| !open || !self.groups.contains(*g))
                .cloned()
                .collect(),
        )
    }

    /// The state once the markers of a prepared transaction are written: partitions and
    /// groups are forgotten; a transaction that used up the epochs moves to its next
    /// producer id.
    pub fn complete(&mut self, now_ms: i64) {
        self.state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            _ => TxnState::CompleteAbort,
        };
        if let Some(next) = self.next_producer_id.take() {
            self.prev_producer_id = Some(self.producer_id);
            self.producer_id = next;
            self.epoch = 0;
        }
        self.partitions.clear();
        self.groups.clear();
        self.started_ms = -1;
        self.updated_ms = now_ms;
    }

    /// Whether the open transaction has outlived its timeout at `now_ms`.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.state == TxnState::Ongoing
            && self.started_ms >= 0
            && now_ms > self.started_ms.saturating_add(i64::from(self.timeout_ms))
    }

    /// Whether the id, with nothing open or being decided, was last used more than
    /// `expiration_ms` before `now_ms` (Kafka's transactional.id.expiration.ms).
    pub fn idle_expired(&self, now_ms: i64, expiration_ms: i64) -> bool {
        !matches!(self.state, TxnState::Ongoing)
            && !self.state.preparing()
            && now_ms.saturating_sub(self.updated_ms) > expiration_ms
    }

    /// The next epoch, or None when epochs are used up (a new producer id is needed).
    pub fn next_epoch(&self) -> Option<i16> {
        (self.epoch < LAST_EPOCH).then_some(self.epoch + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transactions_life() {
        let mut m = TxnMeta::new(7, 60_000, 1_000);
        assert_eq!(m.plan_init((-1, -1)), Ok(InitPlan::Bump));
        assert_eq!(m.plan_init((7, 0)), Ok(InitPlan::Bump));
        assert_eq!(m.plan_init((7, 3)), Err(KelpError::ProducerFenced));
        assert!(m.plan_end(true).is_err());
        assert_eq!(
            m.check_producer(8, 0),
            Err(KelpError::InvalidProducerIdMapping)
        );
        assert_eq!(m.check_producer(7, 1), Err(KelpError::ProducerFenced));
        assert!(m.add([("t".to_string(), 0)], [], 2_000));
        assert!(!m.add([("t".to_string(), 0)], [], 2_500));
        assert!(m.add([], ["g".to_string()], 3_000));
        assert_eq!((m.state, m.started_ms), (TxnState::Ongoing, 2_000));
        assert_eq!(m.plan_init((-1, -1)), Ok(InitPlan::AbortThenBump));
        assert!(!m.expired(62_000) && m.expired(62_001));
        assert_eq!(m.plan_end(true), Ok(Some(TxnState::PrepareCommit)));
        m.state = TxnState::PrepareCommit;
        assert_eq!(
            m.check_producer(7, 0),
            Err(KelpError::ConcurrentTransactions)
        );
        assert_eq!(m.plan_init((-1, -1)), Ok(InitPlan::FinishThenBump));
        m.complete(4_000);
        assert_eq!(m.state, TxnState::CompleteCommit);
        assert!(m.partitions.is_empty() && m.groups.is_empty());
        // A retried EndTxn(commit) succeeds; an abort now is refused.
        assert_eq!(m.plan_end(true), Ok(None));
        assert!(m.plan_end(false).is_err());
        // The next transaction opens afresh.
        assert!(m.add([("u".to_string(), 1)], [], 5_000));
        assert_eq!(m.partitions.len(), 1);
        assert!(!m.idle_expired(i64::MAX, 1), "a transaction is open");
        m.state = TxnState::CompleteAbort;
        m.updated_ms = 5_000;
        assert!(!m.idle_expired(6_000, 1_000) && m.idle_expired(6_001, 1_000));
        m.epoch = LAST_EPOCH;
        assert_eq!(m.next_epoch(), None);
        let json = serde_json::to_vec(&m).unwrap();
        assert_eq!(serde_json::from_slice::<TxnMeta>(&json).unwrap(), m);
    }

    #[test]
    fn transactions_v2_ends_and_epoch_overflow() {
        let mut m = TxnMeta::new(7, 60_000, 0);
        m.epoch = 3;
        assert_eq!(m.plan_end_v2(7, 3, false), Ok(EndPlan::EmptyAbort));
        assert!(m.plan_end_v2(7, 3, true).is_err());
        assert_eq!(m.plan_end_v2(7, 2, true), Err(KelpError::ProducerFenced));
        assert_eq!(
            m.plan_end_v2(8, 3, true),
            Err(KelpError::InvalidProducerIdMapping)
        );
        // The last epoch: the markers take i16::MAX, then a new producer id at epoch 0.
        m.epoch = LAST_EPOCH;
        m.add([("t".to_string(), 0)], [], 1);
        assert_eq!(
            m.plan_end_v2(7, LAST_EPOCH, true),
            Ok(EndPlan::Prepare(TxnState::PrepareCommit))
        );
        assert!(m.end_needs_new_id());
        m.bump_for_end(99);
        m.state = TxnState::PrepareCommit;
        assert_eq!(m.epoch, i16::MAX);
        assert_eq!(
            m.plan_end_v2(7, LAST_EPOCH, true),
            Err(KelpError::ConcurrentTransactions)
        );
        assert_eq!(m.producer_once_complete(), (99, 0));
        m.complete(2);
        assert_eq!(
            (m.producer_id, m.epoch, m.prev_producer_id),
            (99, 0, Some(7))
        );
        assert_eq!(m.producer_once_complete(), (99, 0));
        // A retry from the old producer id is recognised; the other outcome is not.
        assert_eq!(m.plan_end_v2(7, LAST_EPOCH, true), Ok(EndPlan::Retry));
        assert!(matches!(
            m.plan_end_v2(7, LAST_EPOCH, false),
            Err(KelpError::InvalidTxnState(_))
        ));
        assert_eq!(m.plan_end_v2(99, 0, false), Ok(EndPlan::EmptyAbort));
        let (p, g) = m.missing(&[("t".to_string(), 0)], &["g".to_string()]);
        assert_eq!((p.len(), g.len()), (1, 1), "nothing open: all missing");
        // Records from before these fields still read.
        let old = r#"{"producer_id":1,"epoch":0,"timeout_ms":1,"state":"Empty","partitions":[],"groups":[],"started_ms":-1,"updated_ms":0}"#;
        let m: TxnMeta = serde_json::from_str(old).unwrap();
        assert_eq!((m.prev_producer_id, m.next_producer_id), (None, None));
    }
}
