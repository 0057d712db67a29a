//! The transaction state of SeaweedMQ partitions, which keep records rather than Kelp's log:
//! `/topics/kafka/.meta/kelp/txn/<topic>/<partition>` holds a partition's open and aborted
//! transactions through an offset (`{"topic_id":..,"saved":true,"through":N,"open":[..],
//! "aborted":[..]}`), tied to the topic incarnation. The partition's leader writes it before
//! the partition's first transactional write and after markers; a new leader (a restart,
//! another node) reads it and takes in the records after it. No file: no transaction ever
//! wrote to the partition. Runs on the forwarder thread.

use serde::{Deserialize, Serialize};

use kelp_storage_client::filer;

use super::client::{storage, Forwarder};
use crate::error::KelpError;
use crate::txn::checkpoint::TxnCheckpoint;

/// Filer directory of the transaction state files.
pub const ROOT: &str = "/topics/kafka/.meta/kelp/txn";

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    /// False for a missing file (the default).
    #[serde(default)]
    saved: bool,
    #[serde(flatten)]
    checkpoint: TxnCheckpoint,
}

fn dir(topic: &str) -> String {
    format!("{ROOT}/{topic}")
}

impl Forwarder {
    /// The partition's saved transaction state, if any.
    pub(super) async fn load_txns(
        &self,
        topic: &str,
        k: i32,
    ) -> Result<Option<TxnCheckpoint>, KelpError> {
        let info = self
            .lookup_topic(topic)
            .await?
            .ok_or(KelpError::UnknownTopicOrPartition)?;
        let stored: Stored = self
            .read_tied(&dir(topic), &k.to_string(), info.id, "transaction state")
            .await?;
        Ok(stored.saved.then_some(stored.checkpoint))
    }

    /// Saves the partition's transaction state.
    pub(super) async fn save_txns(
        &self,
        topic: &str,
        k: i32,
        checkpoint: TxnCheckpoint,
    ) -> Result<(), KelpError> {
        let info = self
            .lookup_topic(topic)
            .await?
            .ok_or(KelpError::UnknownTopicOrPartition)?;
        let stored = Stored {
            saved: true,
            checkpoint,
        };
        self.write_tied(
            &dir(topic),
            &k.to_string(),
            stored,
            info.id,
            "transaction state",
        )
        .await
    }

    /// Forgets a deleted topic's transaction state files.
    pub(super) async fn drop_txns(&self, topic: &str) -> Result<(), KelpError> {
        let mut f = self.filer_client()?;
        filer::delete(&mut f, ROOT, topic, true)
            .await
            .map_err(|e| storage("deleting transaction state", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_told_from_an_empty_state() {
        let id = uuid::Uuid::from_u128(7);
        let cp = TxnCheckpoint {
            through: 40,
            open: vec![(9, 31)],
            aborted: vec![(8, 2, 10)],
        };
        let body = super::super::tied::encode(
            Stored {
                saved: true,
                checkpoint: cp.clone(),
            },
            id,
        )
        .unwrap();
        let back: Stored = super::super::tied::decode(&body, id, "t").unwrap();
        assert!(back.saved);
        assert_eq!(back.checkpoint, cp);
        assert!(!Stored::default().saved);
    }
}
