//! Test support: a one-shard broker on the local engine, started (or recovered from what its
//! data directory holds) as `server::run` starts one, for the shard tests that need the real
//! log underneath (fault rollback, metrics gauges).

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use clap::Parser;
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::LocalExecutorBuilder;

use super::ops::{ColdBudget, ReadItem, ReadResult};
use super::{Shard, ShardMsg};
use crate::config::Config;

/// A data directory of its own under the temp dir (named after the test and its thread),
/// removed when dropped.
pub(super) struct DataDir(pub(super) PathBuf);

impl DataDir {
    pub(super) fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!(
            "kelp-shard-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        DataDir(d)
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A read of partition 0 of `topic` from `offset`, with 1 MiB limits, as a Fetch makes it.
pub(super) async fn read_at(shard: &Shard, topic: &str, offset: i64) -> ReadResult {
    let item = ReadItem {
        topic: topic.into(),
        partition: 0,
        offset,
        max_bytes: 1 << 20,
        response_max: 1 << 20,
        committed: false,
    };
    shard.read(item, Rc::new(ColdBudget::new(1 << 20))).await
}

/// Runs `body` on a one-shard local-engine broker over `data_dir` with these extra `flags`,
/// on an executor thread of its own, and waits for it.
pub(super) fn with_local_shard<F, Fut>(data_dir: &Path, flags: &[&str], body: F)
where
    F: FnOnce(Rc<Shard>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let dir = data_dir.display().to_string();
    let args = ["kelp", "--storage", "local", "--data-dir", &dir]
        .into_iter()
        .chain(flags.iter().copied());
    let config = Arc::new(Config::parse_from(args));
    LocalExecutorBuilder::default()
        .spawn(move || async move {
            let storage = crate::storage::select(&config, 1).expect("storage");
            let mesh = MeshBuilder::<ShardMsg, _>::full(1, 16);
            let (senders, _receivers) = mesh.join().await.expect("mesh");
            let offsets = storage.engine.offset_store(0, 1).await.expect("offsets");
            let shard = Rc::new(Shard::new(
                config,
                storage.cluster,
                senders,
                0,
                offsets,
                storage.engine,
            ));
            shard.recover_partitions().await.expect("recovery");
            body(shard).await;
        })
        .expect("executor")
        .join()
        .expect("shard thread");
}
