//! The per-core cache budget, enforced to the byte whatever shape the appends have.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use clap::Parser;
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::LocalExecutorBuilder;

use super::ops::ProduceItem;
use super::{Shard, ShardMsg};
use crate::cluster::Cluster;
use crate::config::Config;
use crate::group::InMemoryOffsetStore;
use crate::record::build::simple_batch;
use crate::record::ValidatedBatches;

const BUDGET: usize = 64 * 1024;

/// `batches` uncompressed batches of 10 records x 100 B in one buffer, as one request's
/// records for a partition.
fn records(batches: usize) -> ValidatedBatches {
    let mut buf = BytesMut::new();
    for _ in 0..batches {
        buf.extend_from_slice(&simple_batch(10, 100, 0));
    }
    ValidatedBatches::validate(buf, 1 << 20).expect("valid batches")
}

#[test]
fn appends_of_many_batches_stay_within_the_budget() {
    let budget = BUDGET.to_string();
    let config = Arc::new(Config::parse_from([
        "kelp",
        "--storage",
        "memory",
        "--cache-bytes-per-core",
        &budget,
    ]));
    let cluster = Arc::new(Cluster::new(&config, 1));
    cluster
        .create_topic("t", 3, 1, BTreeMap::new(), false)
        .expect("topic");
    LocalExecutorBuilder::default()
        .spawn(move || async move {
            let mesh = MeshBuilder::<ShardMsg, _>::full(1, 16);
            let (senders, _receivers) = mesh.join().await.expect("mesh");
            let shard = Rc::new(Shard::new(
                config,
                cluster,
                senders,
                0,
                Rc::new(InMemoryOffsetStore::default()),
                Arc::new(crate::storage::memory::MemoryEngine::default()),
            ));
            let mut high = 0;
            for round in 0..200 {
                let items = (0..3)
                    .map(|p| ProduceItem {
                        topic: "t".into(),
                        partition: p,
                        // Several batches per append: one eviction entry used to free only
                        // one of them, so the cache grew past its budget without bound.
                        batches: records(1 + (round + p as usize) % 12),
                        acks: 1,
                        timeout: Duration::from_secs(5),
                        log_append_time: false,
                    })
                    .collect();
                for out in shard.scatter(items).await {
                    out.expect("append");
                }
                let held = shard.cached_bytes();
                let real: usize = (0..3)
                    .map(|p| {
                        shard
                            .with_partition("t", p, |p| p.cached_bytes())
                            .expect("p")
                    })
                    .sum();
                assert_eq!(held, real, "round {round}: accounted vs held");
                assert_eq!(
                    shard.stats.cache_bytes.load(Ordering::Relaxed) as usize,
                    held,
                    "round {round}: metric vs held"
                );
                assert!(held <= BUDGET, "round {round}: {held} > {BUDGET}");
                high = high.max(held);
            }
            // The budget is used, not just respected by evicting everything.
            assert!(high > BUDGET / 2, "cache never filled: {high}");
        })
        .expect("executor")
        .join()
        .expect("join");
}
