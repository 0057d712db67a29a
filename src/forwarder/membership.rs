//! Kelp nodes over one SeaweedMQ: who is alive, kept on SeaweedFS itself (no consensus of
//! Kelp's own). Each node of cluster `<cluster id>` (`--cluster-id`) writes its record to
//! `/topics/kafka/.meta/kelp/clusters/<cluster id>/nodes/<node id>`
//! (`{"node_id":N,"host":"…","port":P,"brokers":[…],"owns":[…]}`) and holds the filer lease
//! `kelp/<cluster id>/node/<node id>`
//! ([`LEASE_TTL`], renewed every second); a node is live while its lease is held.
//! Every node reads the live set every second into `cluster::members`, so a node
//! killed without a goodbye drops out within the lease's ttl, and one stopped cleanly at once
//! (it releases its lease). Two live nodes cannot share a node id: a node whose id is held
//! from another address refuses to start; a node restarted at the same address after a
//! kill waits out its earlier lease. Runs on the forwarder thread.

use std::rc::Rc;
use std::time::{Duration, Instant};

use kelp_storage_client::filer;
use kelp_storage_client::lock::{self, Acquired, Lease};
use serde::{Deserialize, Serialize};

use super::client::{storage, unavailable, Forwarder};
use crate::cluster::members::LiveNode;
use crate::cluster::nodes::Node;
use crate::error::KelpError;

/// Filer directory of the clusters' node records (`<cluster id>/nodes/<node id>`).
pub const CLUSTERS: &str = "/topics/kafka/.meta/kelp/clusters";
/// How long a node stays live without renewing its lease.
pub const LEASE_TTL: Duration = Duration::from_secs(4);
/// How often a node renews its lease (three tries within the ttl).
const RENEW_EVERY: Duration = Duration::from_secs(1);
/// How often a node reads the live set.
const VIEW_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Record {
    node_id: i32,
    host: String,
    port: i32,
    /// The brokers it shows clients (one per shard with `--advertise-shards`).
    #[serde(default)]
    brokers: Vec<Node>,
    /// The partitions it holds: (topic, partition, leader epoch).
    #[serde(default)]
    owns: Vec<(String, i32, i32)>,
    /// The mq broker on its host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    colocated: Option<String>,
}

fn lock_name(cluster: &str, node_id: i32) -> String {
    format!("kelp/{cluster}/node/{node_id}")
}

/// This node as the forwarder registers it.
#[derive(Debug, Clone)]
pub struct Me {
    /// Its node id (`--node-id`).
    pub node_id: i32,
    /// Its advertised host.
    pub host: String,
    /// Its advertised port.
    pub port: i32,
    /// The mq broker on its host (`--seaweedmq-colocated-broker`).
    pub colocated: Option<String>,
}

impl Me {
    /// The lease owner label: the address, then what tells this process from an earlier one
    /// at the same address.
    fn owner(&self, since_ms: i64) -> String {
        format!(
            "{} pid {} since {since_ms}",
            self.address(),
            std::process::id()
        )
    }

    fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl Forwarder {
    /// The filer directory of this cluster's node records.
    fn nodes_dir(&self) -> String {
        format!("{CLUSTERS}/{}/nodes", self.cluster.cluster_id)
    }

    /// Registers this node and takes its lease (start-up). Waits up to the lease's ttl for an
    /// earlier incarnation at the same address; fails when another address holds the id.
    pub(super) async fn join(&self, me: &Me) -> Result<(Lease, String), KelpError> {
        let since_ms = crate::clock::now_ms();
        let owner = me.owner(since_ms);
        let mut f = self.filer_client()?;
        self.write_owns(&[]).await?;
        let until = Instant::now() + LEASE_TTL + Duration::from_secs(2);
        let mut waited = false;
        loop {
            match lock::acquire(&mut f, &lock_name(&self.cluster.cluster_id, me.node_id), &owner, LEASE_TTL).await {
                Ok(Acquired::Held(lease)) => {
                    tracing::info!(node_id = me.node_id, address = %me.address(), generation = lease.generation, "joined the Kelp nodes over SeaweedMQ");
                    return Ok((lease, owner));
                }
                Ok(Acquired::Busy(by))
                    if by.starts_with(&format!("{} ", me.address())) && Instant::now() < until =>
                {
                    if !waited {
                        tracing::info!(node_id = me.node_id, holder = %by, "waiting for this node's earlier lease to expire");
                        waited = true;
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Ok(Acquired::Busy(by)) => {
                    return Err(storage(
                        "node registration",
                        format!("node id {} is held by a live node ({by}): give each Kelp its own --node-id", me.node_id),
                    ))
                }
                Err(e) => return Err(unavailable("node lease", e)),
            }
        }
    }

    /// Writes this node's record: its addresses and the partitions it holds.
    pub(super) async fn write_owns(&self, owns: &[(String, i32, i32)]) -> Result<(), KelpError> {
        let me = &self.s.me;
        let body = serde_json::to_vec(&Record {
            node_id: me.node_id,
            host: me.host.clone(),
            port: me.port,
            brokers: self.cluster.nodes.all().to_vec(),
            owns: owns.to_vec(),
            colocated: me.colocated.clone(),
        })
        .map_err(|e| storage("encoding the node record", e))?;
        let mut f = self.filer_client()?;
        filer::write_file(&mut f, &self.nodes_dir(), &me.node_id.to_string(), body)
            .await
            .map_err(|e| storage("writing the node record", e))
    }

    /// Reads the live set once into `cluster::members`.
    pub(super) async fn view(&self) -> Result<(), KelpError> {
        let nodes = self.live_nodes().await?;
        self.stats
            .live_nodes
            .store(nodes.len() as i64, std::sync::atomic::Ordering::Relaxed);
        let before = self.cluster.members.version();
        self.cluster.members.set(nodes);
        if self.cluster.members.version() != before {
            // A node joined or left: placement moves now, not at the next ownership round.
            self.placement_moved.notify_one();
        }
        Ok(())
    }

    /// Keeps this node's lease and the view of live nodes, until the forwarder stops.
    pub(super) async fn keep_membership(self: Rc<Self>, me: Me, mut lease: Lease, owner: String) {
        let mut renew = tokio::time::interval(RENEW_EVERY);
        let mut view = tokio::time::interval(VIEW_EVERY);
        loop {
            tokio::select! {
                _ = renew.tick() => {
                    if self.leaving.get() {
                        return;
                    }
                    if let Err(e) = self.renew_lease(&me, &mut lease, &owner).await {
                        tracing::error!(node_id = me.node_id, error = %e, "node lease not renewed");
                    }
                    *self.lease.borrow_mut() = Some(lease.clone());
                }
                _ = view.tick() => if let Err(e) = self.view().await {
                    tracing::debug!(error = %e, "live nodes not read");
                },
            }
        }
    }

    /// Renews the lease; a lost one (expired while the filer could not be reached, or the
    /// filer forgot it) is taken again when free.
    async fn renew_lease(&self, me: &Me, lease: &mut Lease, owner: &str) -> Result<(), KelpError> {
        let mut f = self.filer_client()?;
        match lock::renew(&mut f, lease, owner, LEASE_TTL).await {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::warn!(node_id = me.node_id, error = %e, "node lease lost; taking it again");
                match lock::acquire(
                    &mut f,
                    &lock_name(&self.cluster.cluster_id, me.node_id),
                    owner,
                    LEASE_TTL,
                )
                .await
                {
                    Ok(Acquired::Held(l)) => {
                        *lease = l;
                        Ok(())
                    }
                    Ok(Acquired::Busy(by)) => Err(storage("node lease", format!("taken by {by}"))),
                    Err(e) => Err(unavailable("node lease", e)),
                }
            }
        }
    }

    /// The nodes whose lease is held now, by node id.
    async fn live_nodes(&self) -> Result<Vec<LiveNode>, KelpError> {
        let mut f = self.filer_client()?;
        let mut out = Vec::new();
        for e in filer::list(&mut f, &self.nodes_dir())
            .await
            .map_err(|e| storage("listing nodes", e))?
        {
            let Ok(r) = serde_json::from_slice::<Record>(&e.content) else {
                continue;
            };
            let live = lock::owner(&mut f, &lock_name(&self.cluster.cluster_id, r.node_id))
                .await
                .map_err(|e| storage("node lease owner", e))?
                .is_some();
            if live {
                out.push(LiveNode {
                    node_id: r.node_id,
                    host: r.host,
                    port: r.port,
                    brokers: r.brokers,
                    owns: r.owns.into_iter().map(|(t, k, e)| ((t, k), e)).collect(),
                    colocated: r.colocated,
                });
            }
        }
        out.sort_by_key(|n| n.node_id);
        Ok(out)
    }

    /// Gives every partition lease up (clean stop), once: the other nodes take the
    /// partitions while this one is still live.
    pub(super) async fn hand_over(&self) {
        if self.leaving.replace(true) {
            return;
        }
        self.stop_owning.notify_one();
        if tokio::time::timeout(Duration::from_secs(5), self.owning_stopped.notified())
            .await
            .is_err()
        {
            tracing::warn!("partition leases not all released; they expire");
        }
    }

    /// Gives the lease up (clean stop): the other nodes see this one leave at once.
    pub(super) async fn leave(&self) {
        self.hand_over().await;
        let Some(lease) = self.lease.borrow_mut().take() else {
            return;
        };
        match self.filer_client() {
            Ok(mut f) => {
                if let Err(e) = lock::release(&mut f, &lease).await {
                    tracing::debug!(error = %e, "node lease not released; it expires");
                }
            }
            Err(e) => tracing::debug!(error = %e, "node lease not released; it expires"),
        }
    }
}
