//! A partition's transaction state as a value engines that keep records store (SeaweedMQ has
//! no log of Kelp's to rebuild it from). Here, below the storage layers that store it and
//! the partition that keeps the state, so that each may name it. Pure data.

/// A partition's transactions as they stood below offset `through`, as engines that keep
/// records store them (`storage::PartitionStore::load_transactions`); `partition::txn`
/// makes it and takes it in.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TxnCheckpoint {
    /// Every batch below this offset was taken in.
    pub through: i64,
    /// Open transactions: (producer id, first offset).
    pub open: Vec<(i64, i64)>,
    /// Aborted transactions: (producer id, first offset, marker offset), in marker order.
    pub aborted: Vec<(i64, i64, i64)>,
}
