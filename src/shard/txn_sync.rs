//! The shard's side of keeping a partition's transaction state in step with a store that
//! learns its offsets (`partition::txn_sync`): the waits for the store's checkpoint and the
//! records after it before a read_committed read or offset lookup, the checkpoint saved
//! before a partition's first transactional write (so a new leader knows to look), and
//! saved again after each marker (so it reads little). Other stores need none of it, and
//! every step here is then a no-op. Calls `partition/` and the partition's store.

use std::time::Instant;

use super::Shard;
use crate::error::KelpError;
use crate::partition::txn_sync::TxnStep;

/// Bytes of records read back per step while catching up.
const READ_BYTES: usize = 1 << 20;

impl Shard {
    /// Brings a partition's transaction state up to its high watermark, as far as the store
    /// answers before `deadline`; short of it the last stable offset stays behind (read_committed
    /// readers wait), which is no error.
    pub(super) async fn catch_up_txns(
        &self,
        topic: &str,
        partition: i32,
        deadline: Instant,
    ) -> Result<(), KelpError> {
        loop {
            match self.with_partition(topic, partition, |p| p.txn_step())? {
                TxnStep::Current => return Ok(()),
                TxnStep::Sync => {
                    self.sync_offsets(topic, partition, None, deadline).await?;
                    // Synced, or it cannot be now (appends pending): load either way.
                    if self.with_partition(topic, partition, |p| p.needs_sync(None))? {
                        return Ok(());
                    }
                }
                TxnStep::Load(store) => {
                    let checkpoint = crate::deadline::until(store.load_transactions(), deadline)
                        .await
                        .ok_or(KelpError::RequestTimedOut)??;
                    self.with_partition(topic, partition, |p| p.txn_loaded(checkpoint))?;
                }
                TxnStep::Read { store, from, end } => {
                    let batches =
                        crate::deadline::until(store.read(from, READ_BYTES, end), deadline)
                            .await
                            .ok_or(KelpError::RequestTimedOut)??;
                    if !self.with_partition(topic, partition, |p| p.txn_replayed(from, &batches))? {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Before a transaction's first write to a partition not tracked yet
    /// (`Partition::txn_tracked`, checked by the caller): the store keeps the partition's
    /// transaction state from now on, so whoever leads it next reads the records after it.
    pub(super) async fn track_txns(
        &self,
        topic: &str,
        partition: i32,
        deadline: Instant,
    ) -> Result<(), KelpError> {
        self.catch_up_txns(topic, partition, deadline).await?;
        let (tracked, checkpoint, store) = self.with_partition(topic, partition, |p| {
            (p.txn_tracked(), p.txn_checkpoint(), p.store().clone())
        })?;
        if tracked {
            return Ok(());
        }
        // Not known yet: the store did not answer in time.
        let checkpoint = checkpoint.ok_or(KelpError::RequestTimedOut)?;
        crate::deadline::until(store.save_transactions(checkpoint), deadline)
            .await
            .ok_or(KelpError::RequestTimedOut)??;
        self.with_partition(topic, partition, |p| p.set_txn_tracked())
    }

    /// After a marker: the store's checkpoint moves up (at most once a second), in the
    /// background (a failure only means the next leader reads more records).
    pub(super) fn save_txns(&self, topic: &str, partition: i32) {
        let Ok(Some((store, checkpoint))) = self.with_partition(topic, partition, |p| {
            p.txn_checkpoint_due(Instant::now())
                .map(|c| (p.store().clone(), c))
        }) else {
            return;
        };
        let (topic, through) = (topic.to_string(), checkpoint.through);
        glommio::spawn_local(async move {
            if let Err(e) = store.save_transactions(checkpoint).await {
                tracing::debug!(%topic, partition, through, error = %e, "transaction state not saved");
            }
        })
        .detach();
    }
}
