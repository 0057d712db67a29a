//! The memory engine (`--storage memory`): nothing behind the cache. Appends are stored the
//! moment they are cached, acks=all asks nothing more, and records evicted from the cache are
//! gone (the log start moves past them). The benchmark mode, and the test double of the
//! in-process tests.

use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use futures::future::{ready, LocalBoxFuture};

use super::{Batch, BatchOffsets, Durability, Engine, PartitionStore};
use crate::cluster::TopicMeta;
use crate::error::KelpError;
use crate::group::{InMemoryOffsetStore, OffsetStore};

/// The memory engine.
#[derive(Debug, Default)]
pub struct MemoryEngine {
    /// The cluster-wide records, for this process's life.
    records: std::sync::Mutex<std::collections::BTreeMap<(String, String), Vec<u8>>>,
}

/// A partition with no storage behind its cache.
#[derive(Debug, Default)]
pub struct MemoryStore;

impl PartitionStore for MemoryStore {
    fn append(
        &self,
        batches: &[Batch],
        _durability: Durability,
        _deadline: Instant,
    ) -> LocalBoxFuture<'_, Vec<BatchOffsets>> {
        let out = batches
            .iter()
            .map(|(h, _)| Ok((h.base_offset, h.last_offset())))
            .collect();
        Box::pin(ready(out))
    }

    fn persist(&self, _through: i64) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        Box::pin(ready(Ok(())))
    }

    fn read(
        &self,
        _offset: i64,
        _max_bytes: usize,
        _end: i64,
    ) -> LocalBoxFuture<'_, Result<Vec<Bytes>, KelpError>> {
        Box::pin(ready(Ok(Vec::new())))
    }

    fn find_timestamp(
        &self,
        _ts: i64,
        _from: i64,
        _end: i64,
    ) -> LocalBoxFuture<'_, Result<Option<(i64, i64)>, KelpError>> {
        Box::pin(ready(Ok(None)))
    }

    fn truncate_prefix(&self, _offset: i64) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        Box::pin(ready(Ok(())))
    }

    fn keeps_evicted(&self) -> bool {
        false
    }
}

impl Engine for MemoryEngine {
    fn describe_log_dir(
        &self,
        partitions: Vec<(String, i32)>,
    ) -> LocalBoxFuture<'_, super::LogDirInfo> {
        // Only the batch cache holds records: no directory, no size to tell.
        Box::pin(futures::future::ready(super::LogDirInfo::elsewhere(
            "memory",
            partitions.len(),
        )))
    }

    fn open(&self, _topic: &str, _partition: i32, _meta: &TopicMeta) -> Rc<dyn PartitionStore> {
        Rc::new(MemoryStore)
    }

    fn offset_store(
        &self,
        _shard: usize,
        _shards: usize,
    ) -> LocalBoxFuture<'_, anyhow::Result<Rc<dyn OffsetStore>>> {
        let store: Rc<dyn OffsetStore> = Rc::new(InMemoryOffsetStore::default());
        Box::pin(ready(Ok(store)))
    }

    fn pipelines_produce(&self) -> bool {
        true
    }

    fn records<'a>(
        &'a self,
        space: &'a str,
    ) -> LocalBoxFuture<'a, Result<crate::storage::Records, KelpError>> {
        let all = self
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let found = all
            .iter()
            .filter(|((s, _), _)| s == space)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        Box::pin(ready(Ok(found)))
    }

    fn put_record<'a>(
        &'a self,
        space: &'a str,
        key: &'a str,
        value: Option<Vec<u8>>,
    ) -> LocalBoxFuture<'a, Result<(), KelpError>> {
        let mut all = self
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let k = (space.to_string(), key.to_string());
        match value {
            Some(v) => all.insert(k, v),
            None => all.remove(&k),
        };
        Box::pin(ready(Ok(())))
    }
}
