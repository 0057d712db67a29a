//! Two shards on two executors joined by the channel mesh, as `server::run` builds them:
//! cross-core calls must complete on real wake-ups alone (there is no re-poll behind them).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::LocalExecutorBuilder;

use super::ops::{ReadItem, WaitItem};
use super::{Shard, ShardMsg};
use crate::cluster::Cluster;
use crate::config::Config;
use crate::group::InMemoryOffsetStore;

/// Longest a single cross-core round trip may take before it counts as a lost wake-up; a
/// loaded 2-core machine answers in microseconds, so this only trips on a hang.
const STALL: Duration = Duration::from_secs(10);

#[test]
fn cross_core_calls_complete_without_repolling() {
    let config = Arc::new(Config::parse_from(["kelp", "--storage", "memory"]));
    let cluster = Arc::new(Cluster::new(&config, 2));
    cluster
        .create_topic("t", 8, 1, BTreeMap::new(), false)
        .expect("topic");
    let mesh = MeshBuilder::<ShardMsg, _>::full(2, 1024);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Result<u64, String>>();
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (config, cluster, mesh, done) = (
                config.clone(),
                cluster.clone(),
                mesh.clone(),
                done_tx.clone(),
            );
            LocalExecutorBuilder::default()
                .spawn(move || async move {
                    let (senders, receivers) = mesh.join().await.expect("mesh");
                    let me = senders.peer_id();
                    let shard = Rc::new(Shard::new(
                        config,
                        cluster,
                        senders,
                        me,
                        Rc::new(InMemoryOffsetStore::default()),
                        Arc::new(crate::storage::memory::MemoryEngine::default()),
                    ));
                    let peers = glommio::spawn_local(shard.clone().serve_peers(receivers));
                    if me == 0 {
                        let _ = done.send(drive(&shard).await);
                        // Closing our senders ends the peer's link, and its serve_peers.
                        drop(shard);
                    }
                    peers.await;
                })
                .expect("executor")
        })
        .collect();
    let outcome = done_rx
        .recv_timeout(Duration::from_secs(300))
        .expect("the driving shard never finished");
    let calls = outcome.unwrap_or_else(|e| panic!("{e}"));
    assert!(calls >= 20_000, "only {calls} calls made");
    drop(handles);
}

/// Runs reads, waits and group calls against partitions and groups of the other shard,
/// with idle gaps between bursts so both executors go to sleep in between.
async fn drive(shard: &Rc<Shard>) -> Result<u64, String> {
    let remote: Vec<i32> = (0..8).filter(|&p| shard.owner("t", p) == 1).collect();
    if remote.is_empty() {
        return Err("no partition of topic t on shard 1".into());
    }
    let mut calls = 0u64;
    for round in 0..200 {
        for i in 0..100 {
            let p = remote[i % remote.len()];
            let read = shard.scatter(vec![ReadItem {
                topic: "t".into(),
                partition: p,
                offset: 0,
                max_bytes: 1024,
                response_max: 1024,
                committed: false,
            }]);
            let out = crate::deadline::until(read, Instant::now() + STALL)
                .await
                .ok_or(format!("read {calls} on round {round} never answered"))?;
            if out.len() != 1 || out[0].is_err() {
                return Err(format!("read answered {:?}", out.len()));
            }
            calls += 1;
        }
        // A long-poll on the other shard that times out: its answer crosses cores after a
        // timer, not right after the request.
        let wait = shard.wait_any(
            vec![WaitItem {
                topic: "t".into(),
                partition: remote[0],
                offset: 0,
            }],
            Instant::now() + Duration::from_millis(2),
        );
        crate::deadline::until(wait, Instant::now() + STALL)
            .await
            .ok_or(format!("wait on round {round} never answered"))?;
        calls += 1;
        if round % 20 == 0 {
            glommio::timer::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(calls)
}
