//! `smqctl`: reads and writes SeaweedMQ directly, for Kelp's end-to-end tests.
//!
//! Every command prints machine-readable JSON lines on stdout; any error goes to stderr with
//! a non-zero exit status. `--master` is the master's HTTP address (`host:port`, gRPC at
//! port + 10000, or `host:port.grpcPort`).

use std::io::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use clap::{Parser, Subcommand};
use serde_json::json;

use kelp_storage_client::broker::{self, BrokerClient, KAFKA_NAMESPACE};
use kelp_storage_client::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use kelp_storage_client::pb::messaging_pb::{
    BrokerPartitionAssignment, ConfigureTopicRequest, FetchMessageRequest,
    GetTopicConfigurationRequest, ListTopicsRequest,
};
use kelp_storage_client::pb::schema_pb::Topic;
use kelp_storage_client::{addr, discovery, errors, filer, group_offsets, ring, Error, Result};

/// How long control-plane calls are retried while the cluster is still starting.
const RETRY_BUDGET: Duration = Duration::from_secs(20);

/// How long `fetch` waits for data below the high-water mark to become readable.
const FETCH_STALL_BUDGET: Duration = Duration::from_secs(10);

/// Messages asked for per FetchMessage call.
const FETCH_BATCH: i64 = 1000;

#[derive(Parser)]
#[command(
    name = "smqctl",
    about = "Read and write SeaweedMQ directly (JSON lines on stdout)"
)]
struct Cli {
    /// Master HTTP address: host:port (gRPC = port+10000) or host:port.grpcPort.
    #[arg(long)]
    master: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create topic kafka/TOPIC with PARTITIONS partitions if absent (ConfigureTopic);
    /// prints {"name":..,"partitions":N}. Changing the count of an existing topic starts a
    /// new generation whose offsets restart at 0.
    Create {
        /// Kafka topic name.
        #[arg(long)]
        topic: String,
        /// Number of partitions.
        #[arg(long)]
        partitions: i32,
    },
    /// List topics of namespace "kafka": {"name":..,"partitions":N} per line.
    Topics,
    /// Print the partition assignments of a topic, one line per Kafka partition:
    /// {"partition":k,"leader":..,"follower":..,"range_start":..,"range_stop":..,"unix_time_ns":..}.
    Lookup {
        /// Kafka topic name.
        #[arg(long)]
        topic: String,
    },
    /// Fetch messages of one partition from its leader.
    Fetch {
        /// Kafka topic name.
        #[arg(long)]
        topic: String,
        /// Kafka partition index.
        #[arg(long)]
        partition: i32,
        /// First offset to read.
        #[arg(long, default_value_t = 0)]
        offset: i64,
        /// Stop after this many messages (default: read to the high-water mark).
        #[arg(long)]
        max: Option<i64>,
    },
    /// Print {"earliest":..,"high_water_mark":..} of one partition.
    Range {
        /// Kafka topic name.
        #[arg(long)]
        topic: String,
        /// Kafka partition index.
        #[arg(long)]
        partition: i32,
    },
    /// Print a consumer group's committed offset stored on the filer.
    ReadOffset {
        /// Consumer group id.
        #[arg(long)]
        group: String,
        /// Kafka topic name.
        #[arg(long)]
        topic: String,
        /// Kafka partition index.
        #[arg(long)]
        partition: i32,
    },
    /// Publish COUNT messages key=value=PREFIX-i on one stream to the partition leader.
    Publish {
        /// Kafka topic name.
        #[arg(long)]
        topic: String,
        /// Kafka partition index.
        #[arg(long)]
        partition: i32,
        /// Number of messages.
        #[arg(long)]
        count: usize,
        /// Key/value prefix.
        #[arg(long)]
        prefix: String,
    },
}

/// Prints one JSON line on stdout. Exits quietly when stdout is closed (e.g. `| head`).
fn emit(v: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{v}").and_then(|()| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("smqctl: cannot write to stdout: {e}");
            std::process::exit(1);
        }
        std::process::exit(0);
    }
}

/// A broker client connected to any broker the master lists.
async fn any_broker(master: &str) -> Result<BrokerClient> {
    let endpoints = broker::retry(RETRY_BUDGET, || async {
        let eps = discovery::broker_endpoints(master).await?;
        if eps.is_empty() {
            return Err(Error::Status(Box::new(tonic::Status::unavailable(
                "no broker registered at the master yet",
            ))));
        }
        Ok(eps)
    })
    .await?;
    let mut last = None;
    for ep in &endpoints {
        match discovery::connect(ep).await {
            Ok(ch) => return Ok(BrokerClient::new(ch)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::NotFound("broker".into())))
}

/// The assignment of Kafka partition `k` of `topic` and a client connected to its leader.
async fn leader(
    master: &str,
    topic: &Topic,
    k: i32,
) -> Result<(BrokerPartitionAssignment, BrokerClient)> {
    let control = any_broker(master).await?;
    let a = broker::retry(RETRY_BUDGET, || {
        let mut c = control.clone();
        async move { broker::lookup_partition(&mut c, topic, k).await }
    })
    .await?;
    let ch = discovery::connect(&addr::grpc_endpoint(&a.leader_broker)).await?;
    Ok((a, BrokerClient::new(ch)))
}

fn partition_of(
    a: &BrokerPartitionAssignment,
) -> Result<kelp_storage_client::pb::schema_pb::Partition> {
    a.partition
        .ok_or_else(|| Error::Protocol("assignment without partition".into()))
}

async fn create(master: &str, topic: &str, partitions: i32) -> Result<()> {
    let control = any_broker(master).await?;
    let t = broker::kafka_topic(topic);
    let resp = broker::retry(RETRY_BUDGET, || {
        let mut c = control.clone();
        let t = t.clone();
        async move {
            let req = ConfigureTopicRequest {
                topic: Some(t),
                partition_count: partitions,
                ..Default::default()
            };
            Ok(c.configure_topic(req).await?.into_inner())
        }
    })
    .await?;
    emit(&json!({"name": topic, "partitions": resp.broker_partition_assignments.len()}));
    Ok(())
}

async fn lookup(master: &str, topic: &str) -> Result<()> {
    let control = any_broker(master).await?;
    let t = broker::kafka_topic(topic);
    let all = broker::retry(RETRY_BUDGET, || {
        let mut c = control.clone();
        let t = t.clone();
        async move { broker::lookup(&mut c, &t).await }
    })
    .await?;
    let n = i32::try_from(all.len()).unwrap_or(0);
    for k in 0..n {
        let a = ring::find_assignment(&all, k).ok_or_else(|| {
            Error::Protocol(format!("no assignment matches Kafka partition {k} of {n}"))
        })?;
        let p = partition_of(a)?;
        emit(&json!({
            "partition": k,
            "leader": a.leader_broker,
            "follower": a.follower_broker,
            "range_start": p.range_start,
            "range_stop": p.range_stop,
            "unix_time_ns": p.unix_time_ns,
        }));
    }
    Ok(())
}

async fn topics(master: &str) -> Result<()> {
    let control = any_broker(master).await?;
    let listed = broker::retry(RETRY_BUDGET, || {
        let mut c = control.clone();
        async move {
            Ok(c.list_topics(ListTopicsRequest {})
                .await?
                .into_inner()
                .topics)
        }
    })
    .await?;
    let mut names: Vec<String> = listed
        .into_iter()
        .filter(|t| t.namespace == KAFKA_NAMESPACE)
        .map(|t| t.name)
        .collect();
    names.sort();
    names.dedup();
    for name in names {
        let mut c = control.clone();
        let conf = c
            .get_topic_configuration(GetTopicConfigurationRequest {
                topic: Some(broker::kafka_topic(&name)),
            })
            .await?
            .into_inner();
        let n = if conf.partition_count > 0 {
            conf.partition_count as usize
        } else {
            conf.broker_partition_assignments.len()
        };
        emit(&json!({"name": name, "partitions": n}));
    }
    Ok(())
}

async fn fetch(master: &str, topic: &str, k: i32, offset: i64, max: Option<i64>) -> Result<()> {
    let topic = broker::kafka_topic(topic);
    let (a, mut client) = leader(master, &topic, k).await?;
    let partition = partition_of(&a)?;
    // A leader that is not the balancer serves only partitions it has loaded.
    broker::load_partition(&mut client, &topic, &partition).await?;
    // FetchMessage's own high_water_mark is not trustworthy for a partition the broker has
    // reloaded (weed 4.48 reports 0 until the next publish); the offset manager's is.
    let mut hwm = broker::range_info(&mut client, &topic, &partition)
        .await?
        .high_water_mark;
    let mut next = offset;
    let mut printed = 0i64;
    let mut stalled_since: Option<Instant> = None;
    while next < hwm && max.is_none_or(|m| printed < m) {
        let want = max.map_or(FETCH_BATCH, |m| (m - printed).min(FETCH_BATCH));
        let resp = client
            .fetch_message(FetchMessageRequest {
                topic: Some(topic.clone()),
                partition: Some(partition),
                start_offset: next,
                max_bytes: 0,
                max_messages: i32::try_from(want).unwrap_or(i32::MAX),
                ..Default::default()
            })
            .await?
            .into_inner();
        hwm = hwm.max(resp.high_water_mark);
        let retryable = resp.error_code == errors::FETCH_READ_ERROR
            || (resp.error_code == 0 && resp.error.is_empty() && resp.messages.is_empty());
        if resp.messages.is_empty() {
            // Data below the HWM that the broker cannot serve right now: it may be moving the
            // partition from memory to the filer, or (weed 4.48) it reloaded the partition
            // without its offsets and serves nothing until the next publish.
            let since = *stalled_since.get_or_insert_with(Instant::now);
            if retryable && since.elapsed() < FETCH_STALL_BUDGET {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            let why = if resp.error.is_empty() {
                "no data returned below the high-water mark"
            } else {
                resp.error.as_str()
            };
            return Err(Error::Broker {
                code: resp.error_code,
                message: format!("FetchMessage at offset {next} (hwm {hwm}): {why}"),
            });
        }
        stalled_since = None;
        for m in resp
            .messages
            .into_iter()
            .take(usize::try_from(want).unwrap_or(0))
        {
            let key = if m.key.is_empty() {
                serde_json::Value::Null
            } else {
                B64.encode(&m.key).into()
            };
            emit(
                &json!({"offset": next, "key": key, "value": B64.encode(&m.value), "ts_ns": m.ts_ns}),
            );
            next += 1;
            printed += 1;
        }
    }
    emit(&json!({"high_water_mark": hwm}));
    Ok(())
}

async fn range(master: &str, topic: &str, k: i32) -> Result<()> {
    let topic = broker::kafka_topic(topic);
    let (a, mut client) = leader(master, &topic, k).await?;
    let info = broker::range_info(&mut client, &topic, &partition_of(&a)?).await?;
    emit(&json!({"earliest": info.earliest_offset, "high_water_mark": info.high_water_mark}));
    Ok(())
}

async fn read_offset(master: &str, group: &str, topic: &str, k: i32) -> Result<()> {
    let filers = broker::retry(RETRY_BUDGET, || discovery::filer_endpoints(master)).await?;
    let ep = filers
        .first()
        .ok_or_else(|| Error::NotFound("no filer registered at the master".into()))?;
    let mut client = SeaweedFilerClient::new(discovery::connect(ep).await?);
    let dir = group_offsets::dir(group, topic, k);
    match filer::read_file(&mut client, &dir, group_offsets::FILE_NAME).await? {
        None => emit(&json!({"offset": null})),
        Some(b) => {
            let o = group_offsets::decode(&b)?;
            emit(&json!({
                "offset": o.offset,
                "metadata": o.metadata,
                "committed_at": o.committed_at_ms,
            }));
        }
    }
    Ok(())
}

async fn publish(master: &str, topic: &str, k: i32, count: usize, prefix: &str) -> Result<()> {
    let topic = broker::kafka_topic(topic);
    let (a, mut client) = leader(master, &topic, k).await?;
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..count)
        .map(|i| {
            let s = format!("{prefix}-{i}").into_bytes();
            (s.clone(), s)
        })
        .collect();
    let partition = partition_of(&a)?;
    let deadline = Instant::now() + RETRY_BUDGET;
    let offsets = loop {
        match broker::publish(&mut client, &topic, &partition, records.clone()).await {
            // The partition is being unloaded after its previous publisher left; nothing was
            // appended, so a new stream is safe.
            Err(e) if e.is_partition_stopping() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => break other?,
        }
    };
    emit(&json!({"first_offset": offsets.first(), "last_offset": offsets.last()}));
    Ok(())
}

async fn run(cli: Cli) -> Result<()> {
    let m = cli.master.as_str();
    match cli.cmd {
        Cmd::Create { topic, partitions } => create(m, &topic, partitions).await,
        Cmd::Topics => topics(m).await,
        Cmd::Lookup { topic } => lookup(m, &topic).await,
        Cmd::Fetch {
            topic,
            partition,
            offset,
            max,
        } => fetch(m, &topic, partition, offset, max).await,
        Cmd::Range { topic, partition } => range(m, &topic, partition).await,
        Cmd::ReadOffset {
            group,
            topic,
            partition,
        } => read_offset(m, &group, &topic, partition).await,
        Cmd::Publish {
            topic,
            partition,
            count,
            prefix,
        } => publish(m, &topic, partition, count, &prefix).await,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("smqctl: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("smqctl: {e}");
            ExitCode::FAILURE
        }
    }
}
