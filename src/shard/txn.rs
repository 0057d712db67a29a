//! The transaction coordinator of the transactional ids this shard owns (the same hash as
//! groups, [`Shard::txn_owner`]): runs [`TxnRequest`]s against the ids' state
//! ([`crate::txn`]), stores every new state through the storage engine before acting on it
//! or answering, writes the commit and abort markers to the transaction's partitions (on
//! their owning shards, through the produce path) and settles the groups' pending offsets;
//! aborts transactions that outlive their timeout and finishes decided ones whose markers
//! could not all be written. One operation per id at a time: another one meanwhile is told
//! CONCURRENT_TRANSACTIONS and retries, as with Kafka's pending transitions.

use std::rc::Rc;
use std::time::Duration;

use futures::channel::oneshot;

use super::ops::ProduceItem;
use super::{Shard, ShardMsg};
use crate::cluster::routing;
use crate::error::KelpError;
use crate::group::coordinator::PendingOffset;
use crate::group::{GroupReply, GroupRequest};
use crate::record::control::{marker_batch, ControlType};
use crate::record::ValidatedBatches;
use crate::txn::{AddMode, EndPlan, InitPlan, TxnMeta, TxnState, OFFSETS_SPACE, SPACE};

/// The record key of the offsets producer `producer_id`'s transaction holds for `group`.
fn pending_key(group: &str, producer_id: i64) -> String {
    format!("{group}\n{producer_id}")
}

/// A request to the coordinator of a transactional id: plain owned data, so it can cross
/// cores.
#[derive(Debug, Clone)]
pub enum TxnRequest {
    /// InitProducerId with a transactional id; (producer id, epoch) a re-initialising
    /// client sends (KIP-360), else (-1, -1).
    Init {
        /// The transactional id.
        id: String,
        /// transaction.timeout.ms.
        timeout_ms: i32,
        /// What the client had.
        client: (i64, i16),
    },
    /// AddPartitionsToTxn and AddOffsetsToTxn.
    Add {
        /// The transactional id.
        id: String,
        /// The producer id the client has.
        producer_id: i64,
        /// Its epoch.
        epoch: i16,
        /// Partitions to add.
        partitions: Vec<(String, i32)>,
        /// Groups whose offsets the transaction commits.
        groups: Vec<String>,
        /// Who adds, and whether only to check.
        mode: AddMode,
    },
    /// EndTxn.
    End {
        /// The transactional id.
        id: String,
        /// The producer id the client has.
        producer_id: i64,
        /// Its epoch.
        epoch: i16,
        /// Commit (true) or abort.
        commit: bool,
        /// EndTxn v5+ (transactions v2): the epoch moves on with the transaction's end.
        v2: bool,
    },
    /// The coordinator's own: abort an expired transaction, or finish a decided one.
    Expire {
        /// The transactional id.
        id: String,
    },
    /// DescribeTransactions of one id.
    Describe {
        /// The transactional id.
        id: String,
    },
    /// ListTransactions: the ids this shard coordinates (sent to every shard).
    List,
}

impl TxnRequest {
    /// The transactional id it is about.
    pub fn id(&self) -> &str {
        match self {
            TxnRequest::Init { id, .. }
            | TxnRequest::Add { id, .. }
            | TxnRequest::End { id, .. }
            | TxnRequest::Expire { id }
            | TxnRequest::Describe { id } => id,
            TxnRequest::List => "",
        }
    }
}

/// What a coordinator answers.
#[derive(Debug, Clone)]
pub enum TxnAnswer {
    /// Init and End v5+: (producer id, epoch).
    Producer(i64, i16),
    /// Add, End (v0-4), Expire: done.
    Done,
    /// Add in [`AddMode::Verify`]: the partitions and groups the transaction has not added.
    Missing(Vec<(String, i32)>, Vec<String>),
    /// Describe: the id's state, if known.
    Meta(Option<TxnMeta>),
    /// List: every id of the shard with its state.
    List(Vec<(String, TxnMeta)>),
}

/// A coordinator's answer, or why the request failed.
pub type TxnReply = Result<TxnAnswer, KelpError>;

/// How often expired transactions are looked for.
const TXN_TICK: Duration = Duration::from_millis(500);

/// How often transactional ids unused for `--transactional-id-expiration-ms` are forgotten.
const ID_EXPIRY_EVERY: u32 = 120; // ticks: a minute

/// How long marker appends may take (each is a produce with acks=all).
const MARKER_TIMEOUT: Duration = Duration::from_secs(30);

use crate::clock::now_ms;

/// Releases a transactional id when its operation ends, however it ends.
struct Busy<'a> {
    shard: &'a Shard,
    id: String,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.shard.txn_busy.borrow_mut().remove(&self.id);
        // Those waiting for the id race for it again; one wins, the rest wait anew.
        if let Some(waiting) = self.shard.txn_waiters.borrow_mut().remove(&self.id) {
            for w in waiting {
                let _ = w.send(());
            }
        }
    }
}

impl Shard {
    /// Coordinator shard of a transactional id.
    pub fn txn_owner(&self, id: &str) -> usize {
        routing::group_owner(id, self.count)
    }

    /// Runs a request on the coordinator shard of its transactional id.
    pub async fn txn_call(&self, req: TxnRequest) -> TxnReply {
        let shard = self.txn_owner(req.id());
        self.txn_call_on(shard, req).await
    }

    /// Runs a request on shard `shard` (this one included).
    pub async fn txn_call_on(&self, shard: usize, req: TxnRequest) -> TxnReply {
        if shard == self.id {
            return self.serve_txn(req).await;
        }
        let (tx, rx) = oneshot::channel();
        if self
            .peers
            .send_to(shard, ShardMsg::Txn(req, tx))
            .await
            .is_err()
        {
            return Err(KelpError::CoordinatorNotAvailable);
        }
        rx.await.unwrap_or(Err(KelpError::CoordinatorNotAvailable))
    }

    /// Runs a request for an id this shard coordinates.
    pub async fn serve_txn(&self, req: TxnRequest) -> TxnReply {
        match &req {
            TxnRequest::Describe { id } => {
                return Ok(TxnAnswer::Meta(self.txns.borrow().get(id).cloned()));
            }
            TxnRequest::List => {
                let all = self.txns.borrow();
                return Ok(TxnAnswer::List(
                    all.iter().map(|(k, m)| (k.clone(), m.clone())).collect(),
                ));
            }
            _ => {}
        }
        let id = req.id().to_string();
        // What the broker adds or checks as a transaction writes waits for the operation
        // under way; clients are told to retry, as Kafka tells them.
        let wait = matches!(
            req,
            TxnRequest::Add {
                mode: AddMode::Implicit | AddMode::Verify,
                ..
            }
        );
        let _busy = self.claim_txn(id, wait).await?;
        match req {
            TxnRequest::Init {
                id,
                timeout_ms,
                client,
            } => self
                .init_txn(&id, timeout_ms, client)
                .await
                .map(|(p, e)| TxnAnswer::Producer(p, e)),
            TxnRequest::Add {
                id,
                producer_id,
                epoch,
                partitions,
                groups,
                mode,
            } => {
                let mut meta = self.txn_meta(&id)?;
                meta.check_producer(producer_id, epoch)?;
                if mode == AddMode::Verify {
                    let (p, g) = meta.missing(&partitions, &groups);
                    return Ok(TxnAnswer::Missing(p, g));
                }
                if meta.add(partitions, groups, now_ms()) {
                    self.store_txn(&id, &meta).await?;
                }
                Ok(TxnAnswer::Done)
            }
            TxnRequest::End {
                id,
                producer_id,
                epoch,
                commit,
                v2: true,
            } => self.end_txn_v2(&id, producer_id, epoch, commit).await,
            TxnRequest::End {
                id,
                producer_id,
                epoch,
                commit,
                v2: false,
            } => {
                let mut meta = self.txn_meta(&id)?;
                meta.check_producer(producer_id, epoch)?;
                if let Some(prepare) = meta.plan_end(commit)? {
                    self.decide(&id, &mut meta, prepare).await?;
                }
                Ok(TxnAnswer::Done)
            }
            TxnRequest::Expire { id } => {
                let mut meta = self.txn_meta(&id)?;
                if meta.expired(now_ms()) {
                    tracing::info!(transactional_id = %id, producer_id = meta.producer_id,
                        timeout_ms = meta.timeout_ms, "aborting a transaction past its timeout");
                    self.fence_and_abort(&id, &mut meta).await?;
                } else if meta.state.preparing() {
                    self.finish_txn(&id, &mut meta).await?;
                }
                Ok(TxnAnswer::Done)
            }
            TxnRequest::Describe { .. } | TxnRequest::List => Ok(TxnAnswer::Done),
        }
    }

    /// Takes the id for one operation; `wait`: until the one under way ends, else
    /// CONCURRENT_TRANSACTIONS.
    async fn claim_txn(&self, id: String, wait: bool) -> Result<Busy<'_>, KelpError> {
        loop {
            if self.txn_busy.borrow_mut().insert(id.clone()) {
                return Ok(Busy { shard: self, id });
            }
            if !wait {
                return Err(KelpError::ConcurrentTransactions);
            }
            let (tx, rx) = oneshot::channel();
            self.txn_waiters
                .borrow_mut()
                .entry(id.clone())
                .or_default()
                .push(tx);
            let _ = rx.await;
        }
    }

    /// EndTxn v5+ (transactions v2, KIP-890): the epoch moves on with every end, before the
    /// markers, so the markers fence the producer's late writes of this transaction and the
    /// next transaction starts at the new epoch, which the answer carries.
    async fn end_txn_v2(&self, id: &str, producer_id: i64, epoch: i16, commit: bool) -> TxnReply {
        let mut meta = self.txn_meta(id)?;
        let prepare = match meta.plan_end_v2(producer_id, epoch, commit)? {
            EndPlan::Retry => return Ok(TxnAnswer::Producer(meta.producer_id, meta.epoch)),
            EndPlan::Prepare(state) => Some(state),
            EndPlan::EmptyAbort => None,
        };
        let fresh = if meta.end_needs_new_id() {
            self.allocate_producer_id().await?
        } else {
            -1
        };
        meta.bump_for_end(fresh);
        match prepare {
            Some(state) => self.decide(id, &mut meta, state).await?,
            // Nothing to mark: straight to complete.
            None => {
                meta.state = TxnState::PrepareAbort;
                meta.complete(now_ms());
                self.store_txn(id, &meta).await?;
            }
        }
        let (pid, epoch) = meta.producer_once_complete();
        Ok(TxnAnswer::Producer(pid, epoch))
    }

    /// Stores the decision `state` for the open transaction, then writes its markers and
    /// settles its groups. Once stored the decision stands: a failure to write every marker
    /// leaves the transaction prepared for the timer to finish, and the client is answered
    /// all the same.
    async fn decide(&self, id: &str, meta: &mut TxnMeta, state: TxnState) -> Result<(), KelpError> {
        meta.state = state;
        meta.updated_ms = now_ms();
        self.store_txn(id, meta).await?;
        if let Err(e) = self.finish_txn(id, meta).await {
            tracing::warn!(transactional_id = %id, error = %e, "transaction markers not all written; retrying");
        }
        Ok(())
    }

    fn txn_meta(&self, id: &str) -> Result<TxnMeta, KelpError> {
        self.txns
            .borrow()
            .get(id)
            .cloned()
            .ok_or(KelpError::InvalidProducerIdMapping)
    }

    /// Stores `meta` durably, then makes it the id's state.
    async fn store_txn(&self, id: &str, meta: &TxnMeta) -> Result<(), KelpError> {
        let body = serde_json::to_vec(meta).map_err(|e| KelpError::Storage(e.to_string()))?;
        self.engine.put_record(SPACE, id, Some(body)).await?;
        self.txns.borrow_mut().insert(id.to_string(), meta.clone());
        Ok(())
    }

    async fn init_txn(
        &self,
        id: &str,
        timeout_ms: i32,
        client: (i64, i16),
    ) -> Result<(i64, i16), KelpError> {
        let max = self.config.transaction_max_timeout_ms;
        if timeout_ms <= 0 || i64::from(timeout_ms) > i64::from(max) {
            return Err(KelpError::InvalidTransactionTimeout(timeout_ms));
        }
        let existing = self.txns.borrow().get(id).cloned();
        let Some(mut meta) = existing else {
            let pid = self.allocate_producer_id().await?;
            let meta = TxnMeta::new(pid, timeout_ms, now_ms());
            self.store_txn(id, &meta).await?;
            tracing::debug!(transactional_id = %id, producer_id = pid, "new transactional producer");
            return Ok((pid, 0));
        };
        match meta.plan_init(client)? {
            InitPlan::AbortThenBump => self.fence_and_abort(id, &mut meta).await?,
            InitPlan::FinishThenBump => self.finish_txn(id, &mut meta).await?,
            InitPlan::Bump => {}
        }
        match meta.next_epoch() {
            Some(e) => meta.epoch = e,
            None => {
                meta.producer_id = self.allocate_producer_id().await?;
                meta.epoch = 0;
            }
        }
        meta.state = TxnState::Empty;
        meta.timeout_ms = timeout_ms;
        meta.updated_ms = now_ms();
        self.store_txn(id, &meta).await?;
        Ok((meta.producer_id, meta.epoch))
    }

    /// Aborts the open transaction with its markers at the next epoch, which fences the
    /// producer that ran it: its later writes and requests carry an older epoch.
    async fn fence_and_abort(&self, id: &str, meta: &mut TxnMeta) -> Result<(), KelpError> {
        // Epochs stop at LAST_EPOCH, so there is always one more for the markers.
        meta.epoch = meta.epoch.saturating_add(1);
        meta.state = TxnState::PrepareAbort;
        meta.updated_ms = now_ms();
        self.store_txn(id, meta).await?;
        self.finish_txn(id, meta).await
    }

    /// Writes the markers of a prepared transaction to its partitions, settles its groups'
    /// offsets, and stores it complete.
    async fn finish_txn(&self, id: &str, meta: &mut TxnMeta) -> Result<(), KelpError> {
        let commit = meta.state == TxnState::PrepareCommit;
        let kind = if commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        };
        let now = now_ms();
        let mut items = Vec::with_capacity(meta.partitions.len());
        for (topic, partition) in &meta.partitions {
            let marker = marker_batch(kind, meta.producer_id, meta.epoch, 0, now);
            items.push(ProduceItem {
                topic: topic.as_str().into(),
                partition: *partition,
                batches: ValidatedBatches::validate_broker(marker)?,
                acks: -1,
                timeout: MARKER_TIMEOUT,
                log_append_time: false,
            });
        }
        let targets: Vec<(String, i32)> = meta.partitions.iter().cloned().collect();
        for ((topic, partition), r) in targets.iter().zip(self.scatter_ordered(items, || {}).await)
        {
            match r {
                Ok(_) => {}
                // A partition deleted since has nothing left to mark.
                Err(KelpError::UnknownTopicOrPartition) => {}
                Err(e) => {
                    tracing::warn!(transactional_id = %id, %topic, partition, error = %e, "transaction marker not written");
                    return Err(e);
                }
            }
        }
        for group in meta.groups.clone() {
            let req = GroupRequest::TxnOutcome {
                group_id: group.clone(),
                producer_id: meta.producer_id,
                commit,
            };
            match self.group_call(req).await {
                GroupReply::Done(Ok(())) => {
                    self.engine
                        .put_record(OFFSETS_SPACE, &pending_key(&group, meta.producer_id), None)
                        .await?;
                }
                GroupReply::Done(Err(e)) => return Err(e),
                _ => return Err(KelpError::CoordinatorNotAvailable),
            }
        }
        meta.complete(now_ms());
        self.store_txn(id, meta).await?;
        tracing::debug!(transactional_id = %id, commit, "transaction complete");
        Ok(())
    }

    /// Stores the offsets a transaction holds for a group (TxnOffsetCommit), on the group's
    /// coordinator shard.
    pub(super) async fn store_pending_offsets(
        &self,
        group: &str,
        producer_id: i64,
        held: &[PendingOffset],
    ) -> Result<(), KelpError> {
        let body = serde_json::to_vec(held).map_err(|e| KelpError::Storage(e.to_string()))?;
        self.engine
            .put_record(OFFSETS_SPACE, &pending_key(group, producer_id), Some(body))
            .await
    }

    /// Reads the state of the transactional ids this shard coordinates, and the offsets
    /// open transactions hold for its groups (at start-up); a transaction found decided is
    /// finished by the timer, one found open times out as usual.
    pub async fn load_transactions(&self) -> anyhow::Result<()> {
        for (key, body) in self.engine.records(OFFSETS_SPACE).await? {
            let Some((group, pid)) = key
                .rsplit_once('\n')
                .and_then(|(g, p)| Some((g, p.parse::<i64>().ok()?)))
            else {
                continue;
            };
            if self.group_owner(group) != self.id {
                continue;
            }
            match serde_json::from_slice::<Vec<PendingOffset>>(&body) {
                Ok(held) => self.groups.restore_pending(group, pid, held),
                Err(e) => {
                    tracing::error!(%group, producer_id = pid, error = %e, "unreadable transactional offsets; ignored")
                }
            }
        }
        let records = self.engine.records(SPACE).await?;
        let mut txns = self.txns.borrow_mut();
        for (id, body) in records {
            if self.txn_owner(&id) != self.id {
                continue;
            }
            match serde_json::from_slice::<TxnMeta>(&body) {
                Ok(meta) => {
                    txns.insert(id, meta);
                }
                Err(e) => {
                    tracing::error!(transactional_id = %id, error = %e, "unreadable transaction record; ignored")
                }
            }
        }
        Ok(())
    }

    /// Forgets transactional ids unused for `--transactional-id-expiration-ms` (their
    /// records go too), so ids clients stop using do not pile up.
    pub async fn expire_txn_ids(&self, now: i64) {
        let limit = i64::try_from(self.config.transactional_id_expiration_ms).unwrap_or(i64::MAX);
        let idle: Vec<String> = self
            .txns
            .borrow()
            .iter()
            .filter(|(id, m)| m.idle_expired(now, limit) && !self.txn_busy.borrow().contains(*id))
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            let Ok(_busy) = self.claim_txn(id.clone(), false).await else {
                continue;
            };
            match self.engine.put_record(SPACE, &id, None).await {
                Ok(()) => {
                    self.txns.borrow_mut().remove(&id);
                    tracing::debug!(transactional_id = %id, "transactional id expired");
                }
                Err(e) => {
                    tracing::warn!(transactional_id = %id, error = %e, "transactional id not expired")
                }
            }
        }
    }

    /// Aborts expired transactions and finishes decided ones, forever; forgets idle ids
    /// every minute.
    pub async fn run_txn_timers(self: Rc<Self>) {
        let mut ticks = 0u32;
        loop {
            glommio::timer::sleep(TXN_TICK).await;
            let now = now_ms();
            ticks = ticks.wrapping_add(1);
            if ticks.is_multiple_of(ID_EXPIRY_EVERY) {
                self.expire_txn_ids(now).await;
            }
            let due: Vec<String> = self
                .txns
                .borrow()
                .iter()
                .filter(|(_, m)| m.expired(now) || m.state.preparing())
                .map(|(id, _)| id.clone())
                .collect();
            for id in due {
                if let Err(e) = self.serve_txn(TxnRequest::Expire { id: id.clone() }).await {
                    if e != KelpError::ConcurrentTransactions {
                        tracing::warn!(transactional_id = %id, error = %e, "transaction timer");
                    }
                }
            }
        }
    }
}
