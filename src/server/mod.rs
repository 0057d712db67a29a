//! Process start-up: one pinned glommio executor per shard core, the channel mesh between
//! them, and on each core a SO_REUSEPORT listener whose connections that core serves.

pub mod budget;
pub mod connection;
pub mod malloc;
pub mod notify;
pub mod panic;
pub mod read_buffer;
pub mod shutdown;
pub mod tls;
pub mod wire;
pub mod writev;

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::net::TcpListener;
use glommio::{CpuSet, LocalExecutorBuilder, Placement, PoolPlacement};

use crate::auth::oauth::TokenValidator;
use crate::auth::principal::PrincipalRules;
use crate::auth::sasl::Sasl;
use crate::config::{Config, Listener};
use crate::metrics::{self, Registry};
use crate::shard::{Shard, ShardMsg};

/// Capacity of each shard-to-shard channel.
const MESH_CHANNEL_SIZE: usize = 1024;

/// The shard cores: the configured list, or every core this process may run on.
pub fn shard_cores(config: &Config) -> anyhow::Result<Vec<usize>> {
    let online = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cores = config
        .cores
        .clone()
        .map_or_else(|| (0..online).collect(), |c| c.0);
    if let Some(bad) = cores.iter().find(|&&c| c >= online) {
        bail!(
            "--cores names core {bad}, but only cores 0-{} are online",
            online - 1
        );
    }
    Ok(cores)
}

/// A shard's listener: SO_REUSEPORT so every shard binds the same address, and SO_REUSEADDR
/// (glommio's own bind omits it) so a restart can bind while the previous process's
/// connections still linger in FIN_WAIT/TIME_WAIT.
fn bind_listener(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    use std::os::unix::io::{FromRawFd, IntoRawFd};
    let sk = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sk.set_reuse_address(true)?;
    sk.set_reuse_port(true)?;
    sk.bind(&addr.into())?;
    sk.listen(1024)?;
    // SAFETY: the fd is a bound, listening TCP socket whose ownership moves to the listener.
    Ok(unsafe { TcpListener::from_raw_fd(sk.into_raw_fd()) })
}

/// How long start-up waits for a port still held by a previous process.
const PORT_WAIT: Duration = Duration::from_secs(10);

/// Binds the listen address once, without SO_REUSEPORT, to prove nobody else holds it. A
/// predecessor's io_uring teardown can keep its listener alive for a few seconds after exit
/// (a restart), so "address in use" is retried for [`PORT_WAIT`] before giving up.
fn probe_listen(addr: std::net::SocketAddr) -> anyhow::Result<std::net::TcpListener> {
    let deadline = std::time::Instant::now() + PORT_WAIT;
    let mut logged = false;
    loop {
        match std::net::TcpListener::bind(addr) {
            Ok(l) => return Ok(l),
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && std::time::Instant::now() < deadline =>
            {
                if !logged {
                    tracing::warn!(%addr, "address in use; waiting for it to be released");
                    logged = true;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e).with_context(|| format!("cannot listen on {addr}")),
        }
    }
}

/// Refreshes the shard's heartbeat every second, forever: `/health` counts a shard whose
/// heartbeat is older than `metrics::health::HEARTBEAT_STALE` as not serving (its executor
/// stopped running tasks).
async fn heartbeat(stats: Arc<metrics::ShardStats>) {
    loop {
        stats.beat();
        glommio::timer::sleep(metrics::health::HEARTBEAT_EVERY).await;
    }
}

/// Runs the broker until every shard exits (normally never).
pub fn run(mut config: Config) -> anyhow::Result<()> {
    // Before any thread exists, malloc's settings, then signal handling. glibc fixes its
    // arena limit when a second thread first allocates: tuned after the signal thread had
    // started, one arena was the signal thread's and the shard threads were dealt between
    // it and the main one, so a producer whose connection landed on the other shard left
    // its evicted frames' memory in one arena while the new frames grew the other (1 GB
    // more heap and ~250k page faults per GB: 1.5-1.9 instead of 0.8-1.0 CPU-s/GB, in about
    // a third of perf/steady.sh runs). A thread started before signal handling would not
    // block SIGTERM, and the kernel may hand the signal to it, which kills the process on
    // the spot (no drain, no clean ring teardown).
    let cores = shard_cores(&config)?;
    malloc::tune(cores.len());
    shutdown::install().context("installing signal handling")?;
    malloc::start_trimmer();
    // Fail clearly if the port is taken: SO_REUSEPORT alone would quietly share it with another
    // process. Port 0 picks a free port once, used by every shard.
    config
        .check_request_budget()
        .map_err(|e| anyhow::anyhow!(e))?;
    let probes = config
        .listeners()
        .map_err(anyhow::Error::msg)?
        .iter()
        .map(|l| probe_listen(l.bind))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let ports = probes
        .iter()
        .map(|p| p.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<Vec<_>>>()?;
    config.set_bound_ports(&ports);
    config
        .check_ports(cores.len())
        .map_err(anyhow::Error::msg)?;
    let listeners: Vec<Arc<Listener>> = config
        .listeners()
        .map_err(anyhow::Error::msg)?
        .into_iter()
        .map(Arc::new)
        .collect();
    let shard_probes = if config.advertise_shards {
        listeners
            .iter()
            .flat_map(|l| (0..cores.len()).map(|s| probe_listen(l.shard_bind(s))))
            .collect::<anyhow::Result<Vec<_>>>()?
    } else {
        Vec::new()
    };
    drop((probes, shard_probes));

    // Certificates are read once, here: a bad file stops the start with its name.
    let tls = tls::shared(&config)?;
    if config
        .sasl_bootstrap_users
        .as_ref()
        .is_some_and(|p| !p.is_file())
    {
        bail!("--sasl-bootstrap-users: no such file");
    }
    // The OAUTHBEARER key set, like the certificates, is read here and again on SIGHUP.
    let oauth = TokenValidator::from_args(
        &config.oauth,
        config
            .sasl_enabled_mechanisms
            .0
            .iter()
            .any(|m| m == "OAUTHBEARER"),
    )?
    .map(Arc::new);
    let config = Arc::new(config);
    {
        let (config, tls, oauth) = (config.clone(), tls.clone(), oauth.clone());
        shutdown::on_reload(move || {
            tls::reload(&config, &tls);
            if let Some(v) = &oauth {
                match v.reload() {
                    Ok(n) => tracing::info!(keys = n, "OAUTHBEARER key set reloaded"),
                    Err(e) => tracing::error!(error = %format!("{e:#}"),
                        "OAUTHBEARER key set reload failed; keeping the keys in use"),
                }
            }
        });
    }
    // The one place the storage engine is chosen; nothing after this asks which one runs.
    let crate::storage::Storage { cluster, engine } = crate::storage::select(&config, cores.len())?;
    let rules = Arc::new(
        PrincipalRules::parse(&config.ssl_principal_mapping_rules)
            .map_err(|e| anyhow::anyhow!("--ssl-principal-mapping-rules: {e}"))?,
    );
    let sasl = Arc::new(Sasl::new(
        cluster.credentials.clone(),
        oauth.clone(),
        &config.sasl_enabled_mechanisms.0,
    )?);
    let mesh = MeshBuilder::<ShardMsg, _>::full(cores.len(), MESH_CHANNEL_SIZE);
    let registry = Arc::new(Registry::default());
    let request_memory = budget::RequestMemory::new(config.queued_max_request_bytes);
    let gauge = request_memory.clone();
    registry.register_request_memory(Arc::new(move || {
        (gauge.used() as u64, gauge.limit() as u64)
    }));
    engine.register_metrics(&registry);
    registry.set_data_dir(config.data_dir.clone());
    registry.set_shutdown_probe(shutdown::requested);
    if let Some(addr) = config.metrics_addr {
        let bound = metrics::http::spawn(addr, registry.clone())
            .with_context(|| format!("cannot serve metrics on {addr}"))?;
        tracing::info!(%bound, "metrics at http://{bound}/metrics");
    }
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<usize>>();
    registry.expect_cores(&cores);

    let mut handles = Vec::with_capacity(cores.len());
    for &core in &cores {
        let memory = request_memory.clone();
        let (registry, config, cluster, mesh, ready, engine, tls, listeners, sasl, rules) = (
            registry.clone(),
            config.clone(),
            cluster.clone(),
            mesh.clone(),
            ready_tx.clone(),
            engine.clone(),
            tls.clone(),
            listeners.clone(),
            sasl.clone(),
            rules.clone(),
        );
        let pool = PoolPlacement::Custom(vec![
            CpuSet::online()
                .map_err(|e| anyhow::anyhow!("listing online cores: {e}"))?
                .filter(|c| c.cpu == core);
            usize::from(config.io_threads_per_core)
        ]);
        let h = LocalExecutorBuilder::new(Placement::Fixed(core))
            .name(&format!("kelp-shard-core{core}"))
            .blocking_thread_pool_placement(pool)
            .io_memory(config.io_memory)
            .ring_depth(config.ring_depth)
            .preempt_timer(Duration::from_millis(10))
            .spawn(move || async move {
                let (senders, receivers) = match mesh.join().await {
                    Ok(sr) => sr,
                    Err(e) => {
                        let _ = ready.send(Err(anyhow::anyhow!("joining the shard mesh: {e}")));
                        return;
                    }
                };
                let (me, count) = (senders.peer_id(), senders.nr_consumers().max(1));
                let offsets = match engine.offset_store(me, count).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                let shard = Rc::new(Shard::new(
                    config.clone(),
                    cluster,
                    senders,
                    core,
                    offsets,
                    engine.clone(),
                ));
                registry.register(shard.stats.clone());
                if let Err(e) = shard.recover_partitions().await {
                    let _ = ready.send(Err(e));
                    return;
                }
                if let Err(e) = shard.load_transactions().await {
                    let _ = ready.send(Err(e.context("reading the transactions")));
                    return;
                }
                // Credentials are read (and the bootstrap users made) once, by the first
                // shard; every shard waits for them before accepting a connection.
                if shard.id == 0 {
                    if let Err(e) = shard.load_credentials().await {
                        let _ = ready.send(Err(e));
                        return;
                    }
                }
                shard.cluster.credentials.wait_loaded().await;
                // Every listener's shared port, and with --advertise-shards its port for this
                // shard.
                let mut sockets = Vec::new();
                for l in &listeners {
                    let mut addrs = vec![l.bind];
                    if config.advertise_shards {
                        addrs.push(l.shard_bind(shard.id));
                    }
                    for addr in addrs {
                        match bind_listener(addr) {
                            Ok(s) => sockets.push((s, l.clone())),
                            Err(e) => {
                                let _ = ready.send(Err(anyhow::anyhow!(
                                    "shard {} bind {addr} (listener {}): {e}",
                                    shard.id,
                                    l.name
                                )));
                                return;
                            }
                        }
                    }
                }
                let _ = ready.send(Ok(shard.id));
                shard
                    .stats
                    .serving
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                glommio::spawn_local(heartbeat(shard.stats.clone())).detach();
                glommio::spawn_local(shard.clone().serve_peers(receivers)).detach();
                glommio::spawn_local(shard.clone().run_group_timers()).detach();
                glommio::spawn_local(shard.clone().run_txn_timers()).detach();
                let background = engine.background();
                if let Some(every) = background.retention_every {
                    glommio::spawn_local(shard.clone().run_retention(every)).detach();
                }
                if let Some(every) = background.flush_every {
                    glommio::spawn_local(shard.clone().run_flush(every)).detach();
                }
                if let Some(every) = background.clean_every {
                    // A tenth of the core's shares while requests want it: the cleaner's
                    // CPU budget.
                    let tq = glommio::executor().create_task_queue(
                        glommio::Shares::Static(100),
                        glommio::Latency::NotImportant,
                        "log-cleaner",
                    );
                    match glommio::spawn_local_into(shard.clone().run_cleaner(every), tq) {
                        Ok(task) => {
                            task.detach();
                        }
                        Err(e) => tracing::error!(error = %e, "log cleaner not started"),
                    }
                }
                if let (Some(every), 0) = (background.records_every, shard.id) {
                    glommio::spawn_local(shard.clone().run_records_refresh(every)).detach();
                }
                let accept = futures::future::join_all(sockets.into_iter().map(|(socket, l)| {
                    connection::accept_loop(
                        shard.clone(),
                        socket,
                        memory.clone(),
                        l,
                        tls.clone(),
                        sasl.clone(),
                        rules.clone(),
                    )
                }));
                futures::future::select(std::pin::pin!(accept), std::pin::pin!(shutdown::wait()))
                    .await;
                registry
                    .shutting_down
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                // Listener dropped with the accept loop; now end the connections and give
                // their tasks a moment to unwind before the executor (and its ring) goes away.
                connection::close_all();
                glommio::timer::sleep(Duration::from_millis(100)).await;
                shard.close_stores().await;
                tracing::debug!(shard = shard.id, "shard stopped");
            })
            .map_err(|e| anyhow::anyhow!("starting the executor on core {core}: {e}"))?;
        handles.push(h);
    }
    drop(ready_tx);
    for _ in &cores {
        match ready_rx.recv() {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => bail!("a shard died during start-up"),
        }
    }
    let serving = listeners
        .iter()
        .map(|l| format!("{}://{} ({})", l.name, l.bind, l.protocol.name()))
        .collect::<Vec<_>>()
        .join(",");
    tracing::info!(
        listeners = %serving,
        advertised = %cluster
            .nodes
            .all()
            .iter()
            .map(|n| format!("{}={}:{}", n.id, n.host, n.port))
            .collect::<Vec<_>>()
            .join(","),
        shards = cores.len(),
        cores = ?cores,
        storage = ?config.storage,
        "kelp ready"
    );
    // Every shard reported ready above, so clients can connect: now the service manager may
    // start what depends on Kelp.
    notify::ready(&format!(
        "serving {serving} on {} shards (cores {cores:?})",
        cores.len()
    ));
    for h in handles {
        if let Err(e) = h.join() {
            tracing::error!(error = %e, "shard exited with an error");
        }
    }
    engine.shutdown(Duration::from_secs(10));
    Ok(())
}
