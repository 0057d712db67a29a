//! Live tests against a running SeaweedFS (master + filer + mq.broker).
//!
//! They run only when `KELP_SEAWEED_MASTER` holds the master's HTTP address (for example
//! `127.0.0.1:9333`); otherwise they print that they were skipped and pass, unless
//! `KELP_REQUIRE_SEAWEED=1`, in which case they fail.

use std::process::Command;
use std::time::Duration;

use kelp_storage_client::broker::{self, BrokerClient, Publisher};
use kelp_storage_client::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use kelp_storage_client::pb::messaging_pb::{
    ConfigureTopicRequest, DataMessage, FetchMessageRequest, FindBrokerLeaderRequest,
    GetTopicConfigurationRequest, ListTopicsRequest, TopicExistsRequest,
};
use kelp_storage_client::pb::schema_pb::{Partition, Topic};
use kelp_storage_client::{addr, discovery, errors, filer, group_offsets, ring, Error};

const BUDGET: Duration = Duration::from_secs(60);

/// The master's HTTP address, or `None` (after printing why) when the test is skipped.
fn master() -> Option<String> {
    match std::env::var("KELP_SEAWEED_MASTER") {
        Ok(m) if !m.trim().is_empty() => Some(m.trim().to_owned()),
        _ => {
            assert!(
                std::env::var("KELP_REQUIRE_SEAWEED").as_deref() != Ok("1"),
                "KELP_REQUIRE_SEAWEED=1 but KELP_SEAWEED_MASTER is not set"
            );
            eprintln!(
                "skipped: set KELP_SEAWEED_MASTER=<master host:port> to run live SeaweedFS tests"
            );
            None
        }
    }
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}-{}", std::process::id(), broker::now_ns())
}

async fn any_broker(master: &str) -> BrokerClient {
    let eps = broker::retry(BUDGET, || async {
        let eps = discovery::broker_endpoints(master).await?;
        if eps.is_empty() {
            return Err(tonic::Status::unavailable("no broker yet").into());
        }
        Ok(eps)
    })
    .await
    .expect("broker endpoints");
    BrokerClient::new(discovery::connect(&eps[0]).await.expect("connect broker"))
}

async fn filer_client(master: &str) -> filer::FilerClient {
    let eps = broker::retry(BUDGET, || discovery::filer_endpoints(master))
        .await
        .expect("filer endpoints");
    let ep = eps.first().expect("a filer is registered");
    SeaweedFilerClient::new(discovery::connect(ep).await.expect("connect filer"))
}

/// Fetches from `from` until `want` messages arrived, waiting out the window in which the
/// broker is moving an unloaded partition to the filer.
async fn fetch_until(
    lead: &mut BrokerClient,
    topic: &Topic,
    partition: &Partition,
    from: i64,
    want: usize,
) -> Vec<DataMessage> {
    let deadline = std::time::Instant::now() + BUDGET;
    let mut out: Vec<DataMessage> = Vec::new();
    while out.len() < want {
        let resp = lead
            .fetch_message(FetchMessageRequest {
                topic: Some(topic.clone()),
                partition: Some(*partition),
                start_offset: from + out.len() as i64,
                max_messages: 100,
                ..Default::default()
            })
            .await
            .expect("FetchMessage")
            .into_inner();
        assert!(
            resp.error_code == 0 || resp.error_code == errors::FETCH_READ_ERROR,
            "fetch error {}: {}",
            resp.error_code,
            resp.error
        );
        if resp.messages.is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "no data after {} of {want} messages (hwm {})",
                out.len(),
                resp.high_water_mark
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        out.extend(resp.messages);
    }
    out
}

/// Runs the `smqctl` binary (off the runtime thread) and parses its JSON lines.
async fn smqctl(master: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_smqctl"));
    cmd.arg("--master").arg(master).args(args);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("run smqctl");
    assert!(
        out.status.success(),
        "smqctl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

/// `smqctl read-offset` of partition 2 of topic "orders" in `group`.
async fn smqctl_read_offset(master: &str, group: &str) -> Vec<serde_json::Value> {
    smqctl(
        master,
        &[
            "read-offset",
            "--group",
            group,
            "--topic",
            "orders",
            "--partition",
            "2",
        ],
    )
    .await
}

#[tokio::test]
async fn publish_fetch_and_range() {
    let Some(master) = master() else { return };
    let mut control = any_broker(&master).await;

    let leader = broker::retry(BUDGET, || {
        let mut c = control.clone();
        async move {
            let r = c
                .find_broker_leader(FindBrokerLeaderRequest::default())
                .await?;
            Ok(r.into_inner().broker)
        }
    })
    .await
    .expect("FindBrokerLeader");
    assert!(!leader.is_empty(), "balancer address");

    let name = unique("kelp-sc");
    let topic = broker::kafka_topic(&name);
    let created = broker::retry(BUDGET, || {
        let mut c = control.clone();
        let topic = topic.clone();
        async move {
            let r = c
                .configure_topic(ConfigureTopicRequest {
                    topic: Some(topic),
                    partition_count: 3,
                    ..Default::default()
                })
                .await?;
            Ok(r.into_inner())
        }
    })
    .await
    .expect("ConfigureTopic");
    assert_eq!(created.broker_partition_assignments.len(), 3);

    let exists = control
        .topic_exists(TopicExistsRequest {
            topic: Some(topic.clone()),
        })
        .await
        .expect("TopicExists")
        .into_inner();
    assert!(exists.exists);

    let all = broker::lookup(&mut control, &topic).await.expect("lookup");
    assert_eq!(all.len(), 3);
    let gen = all[0].partition.expect("partition").unix_time_ns;
    for k in 0..3 {
        let a = ring::find_assignment(&all, k).expect("assignment for k");
        let p = a.partition.expect("partition");
        assert_eq!(p.ring_size, ring::RING_SIZE);
        assert_eq!(p.unix_time_ns, gen, "one generation");
        assert_eq!(ring::kafka_index(3, &p), Some(k));
        assert!(!a.leader_broker.is_empty());
    }

    let conf = control
        .get_topic_configuration(GetTopicConfigurationRequest {
            topic: Some(topic.clone()),
        })
        .await
        .expect("GetTopicConfiguration")
        .into_inner();
    assert_eq!(conf.partition_count, 3);

    // Publish 10 pipelined messages to Kafka partition 1 on its leader.
    let a = broker::lookup_partition(&mut control, &topic, 1)
        .await
        .expect("partition 1");
    let partition = a.partition.expect("partition");
    let ch = discovery::connect(&addr::grpc_endpoint(&a.leader_broker))
        .await
        .expect("connect leader");
    let mut lead = BrokerClient::new(ch);
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..10)
        .map(|i| (format!("k{i}").into_bytes(), format!("v{i}").into_bytes()))
        .collect();
    let mut publisher = Publisher::open(&mut lead, &topic, &partition, "kelp-test")
        .await
        .expect("open publisher");
    let offsets = publisher.publish(records.clone()).await.expect("publish");
    assert_eq!(offsets, (0..10).collect::<Vec<i64>>());

    let info = broker::range_info(&mut lead, &topic, &partition)
        .await
        .expect("range");
    assert_eq!(info.high_water_mark, 10);
    assert_eq!(info.earliest_offset, 0);

    // While the stream is open the partition stays in broker memory.
    let resp = lead
        .fetch_message(FetchMessageRequest {
            topic: Some(topic.clone()),
            partition: Some(partition),
            start_offset: 0,
            max_messages: 100,
            ..Default::default()
        })
        .await
        .expect("FetchMessage")
        .into_inner();
    assert_eq!(resp.error_code, 0, "{}", resp.error);
    assert_eq!(resp.high_water_mark, 10);
    let got: Vec<(Vec<u8>, Vec<u8>)> = resp
        .messages
        .into_iter()
        .map(|m| (m.key.to_vec(), m.value.to_vec()))
        .collect();
    assert_eq!(got, records);

    // Loading a partition the broker has loaded (this stream keeps it so) changes nothing.
    broker::load_partition(&mut lead, &topic, &partition)
        .await
        .expect("load a loaded partition");
    // The same stream continues; fetching from the middle works.
    let more = publisher
        .publish(vec![(vec![], b"x".to_vec())])
        .await
        .expect("publish more");
    assert_eq!(more, vec![10]);
    let resp = lead
        .fetch_message(FetchMessageRequest {
            topic: Some(topic.clone()),
            partition: Some(partition),
            start_offset: 7,
            max_messages: 2,
            ..Default::default()
        })
        .await
        .expect("FetchMessage")
        .into_inner();
    let vals: Vec<&[u8]> = resp.messages.iter().map(|m| m.value.as_ref()).collect();
    assert_eq!(vals, [b"v7".as_slice(), b"v8".as_slice()]);
    assert_eq!(resp.high_water_mark, 11);
    assert_eq!(resp.next_offset, 9);
    publisher.close().await.expect("close publisher");

    // Closing the last publisher makes the broker flush the partition to the filer and
    // unload it. The offset manager keeps the HWM.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let info = broker::range_info(&mut lead, &topic, &partition)
        .await
        .expect("range after unload");
    assert_eq!(info.high_water_mark, 11);

    // A new stream after the unload continues the offsets (retrying while it is stopping).
    let deadline = std::time::Instant::now() + BUDGET;
    let again = loop {
        let rec = vec![(b"k".to_vec(), b"y".to_vec())];
        match broker::publish(&mut lead, &topic, &partition, rec).await {
            Err(e) if e.is_partition_stopping() && std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => break other.expect("publish after unload"),
        }
    };
    assert_eq!(again, vec![11]);

    // Everything comes back, the first 11 from the filer.
    let back = fetch_until(&mut lead, &topic, &partition, 0, 12).await;
    let kv: Vec<(&[u8], &[u8])> = back
        .iter()
        .map(|m| (m.key.as_ref(), m.value.as_ref()))
        .collect();
    assert_eq!(kv[3], (b"k3".as_slice(), b"v3".as_slice()));
    assert_eq!(kv[10], (b"".as_slice(), b"x".as_slice()));
    assert_eq!(kv[11], (b"k".as_slice(), b"y".as_slice()));

    // A partition that is not exactly the assigned one is refused at init, in the body.
    let mut bogus = partition;
    bogus.unix_time_ns += 1;
    match Publisher::open(&mut lead, &topic, &bogus, "kelp-test").await {
        Err(Error::Broker { code, message }) => {
            eprintln!("bogus partition refused: code {code}: {message}");
            assert_ne!(code, 0);
        }
        Err(e) => panic!("unexpected error for a bogus partition: {e}"),
        Ok(_) => panic!("publish to a bogus partition was accepted"),
    }

    // The topic is listed.
    let listed = control
        .list_topics(ListTopicsRequest {})
        .await
        .expect("ListTopics")
        .into_inner();
    assert!(listed.topics.contains(&topic));

    // smqctl sees the same data.
    let lines = smqctl(&master, &["range", "--topic", &name, "--partition", "1"]).await;
    assert_eq!(lines[0]["high_water_mark"], 12);
    assert_eq!(lines[0]["earliest"], 0);
    let lines = smqctl(
        &master,
        &[
            "fetch",
            "--topic",
            &name,
            "--partition",
            "1",
            "--offset",
            "9",
        ],
    )
    .await;
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[0]["offset"], 9);
    assert_eq!(lines[0]["key"], "azk="); // base64("k9")
    assert_eq!(lines[0]["value"], "djk="); // base64("v9")
    assert_eq!(lines[1]["offset"], 10);
    assert!(lines[1]["key"].is_null());
    assert_eq!(lines[2]["value"], "eQ=="); // base64("y")
    assert_eq!(lines[3]["high_water_mark"], 12);
    // A foreign publisher on partition 2 while Kelp holds its own stream there (which keeps
    // the partition loaded on the broker); the offsets interleave.
    let a2 = broker::lookup_partition(&mut control, &topic, 2)
        .await
        .expect("partition 2");
    let p2 = a2.partition.expect("partition");
    let mut lead2 = BrokerClient::new(
        discovery::connect(&addr::grpc_endpoint(&a2.leader_broker))
            .await
            .expect("connect leader 2"),
    );
    let mut held = Publisher::open(&mut lead2, &topic, &p2, "kelp-test")
        .await
        .expect("open publisher 2");
    let lines = smqctl(
        &master,
        &[
            "publish",
            "--topic",
            &name,
            "--partition",
            "2",
            "--count",
            "5",
            "--prefix",
            "p",
        ],
    )
    .await;
    assert_eq!(lines[0]["first_offset"], 0);
    assert_eq!(lines[0]["last_offset"], 4);
    let lines = smqctl(
        &master,
        &[
            "fetch",
            "--topic",
            &name,
            "--partition",
            "2",
            "--offset",
            "1",
            "--max",
            "2",
        ],
    )
    .await;
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["value"], "cC0x"); // base64("p-1")
    assert_eq!(lines[1]["offset"], 2);
    let mine = held
        .publish(vec![(b"own".to_vec(), b"own".to_vec())])
        .await
        .expect("publish on held stream");
    assert_eq!(mine, vec![5]);
    held.close().await.expect("close publisher 2");

    let lines = smqctl(&master, &["topics"]).await;
    assert!(lines
        .iter()
        .any(|l| l["name"] == name.as_str() && l["partitions"] == 3));
}

#[tokio::test]
async fn group_offsets_on_the_filer() {
    let Some(master) = master() else { return };
    let mut fc = filer_client(&master).await;
    let group = unique("kelp-sc-group");
    let dir = group_offsets::dir(&group, "orders", 2);
    let name = group_offsets::FILE_NAME;

    assert_eq!(
        filer::read_file(&mut fc, &dir, name).await.expect("read"),
        None
    );

    filer::write_file(&mut fc, &dir, name, group_offsets::encode(5, 1, "a"))
        .await
        .expect("write");
    let b = filer::read_file(&mut fc, &dir, name)
        .await
        .expect("read")
        .expect("exists");
    let o = group_offsets::decode(&b).expect("decode");
    assert_eq!((o.offset, o.metadata.as_str()), (5, "a"));

    // Overwrite.
    filer::write_file(&mut fc, &dir, name, group_offsets::encode(42, 2, "meta"))
        .await
        .expect("overwrite");
    let b = filer::read_file(&mut fc, &dir, name)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(group_offsets::decode(&b).expect("decode").offset, 42);

    let lines = smqctl_read_offset(&master, &group).await;
    assert_eq!(lines[0]["offset"], 42);
    assert_eq!(lines[0]["metadata"], "meta");

    let entries = filer::list(&mut fc, &group_offsets::group_dir(&group))
        .await
        .expect("list");
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].name, "orders");
    assert!(entries[0].is_directory);
    assert!(filer::list(&mut fc, "/does/not/exist")
        .await
        .expect("list missing")
        .is_empty());

    filer::delete(&mut fc, &dir, name, false)
        .await
        .expect("delete");
    assert_eq!(
        filer::read_file(&mut fc, &dir, name).await.expect("read"),
        None
    );
    filer::delete(&mut fc, &dir, name, false)
        .await
        .expect("delete missing");

    filer::write_file(&mut fc, &dir, name, group_offsets::encode(1, 1, ""))
        .await
        .expect("write again");
    filer::delete(&mut fc, group_offsets::ROOT, &group, true)
        .await
        .expect("delete group");
    assert_eq!(
        filer::read_file(&mut fc, &dir, name).await.expect("read"),
        None
    );
    let lines = smqctl_read_offset(&master, &group).await;
    assert!(lines[0]["offset"].is_null());
}

#[tokio::test]
async fn listing_pages_past_the_page_size() {
    let Some(master) = master() else { return };
    let mut fc = filer_client(&master).await;
    let dir = format!("{}/{}", group_offsets::ROOT, unique("kelp-sc-list"));
    let n = filer::LIST_PAGE as usize + 3;
    for i in 0..n {
        filer::write_file(&mut fc, &dir, &format!("f{i:05}"), vec![b'x'])
            .await
            .expect("write");
    }
    let entries = filer::list(&mut fc, &dir).await.expect("list");
    assert_eq!(entries.len(), n);
    assert_eq!(entries[n - 1].name, format!("f{:05}", n - 1));
    let (parent, base) = dir.rsplit_once('/').expect("parent");
    filer::delete(&mut fc, parent, base, true)
        .await
        .expect("cleanup");
}

#[tokio::test]
async fn a_lock_is_one_owners_lease_with_growing_generations() {
    use kelp_storage_client::lock::{self, Acquired};
    let Some(master) = master() else { return };
    let mut fc = filer_client(&master).await;
    let name = unique("kelp-sc-lock");
    let ttl = Duration::from_secs(2);
    let Acquired::Held(mut a) = lock::acquire(&mut fc, &name, "node-a", ttl)
        .await
        .expect("acquire")
    else {
        panic!("a fresh lock is free")
    };
    assert_eq!(
        lock::owner(&mut fc, &name).await.expect("owner"),
        Some("node-a".into())
    );
    // Another owner is refused while the lease runs, and a renewal keeps it running.
    assert_eq!(
        lock::acquire(&mut fc, &name, "node-b", ttl)
            .await
            .expect("acquire"),
        Acquired::Busy("node-a".into())
    );
    let first_token = a.token.clone();
    lock::renew(&mut fc, &mut a, "node-a", ttl)
        .await
        .expect("renew");
    assert_ne!(a.token, first_token, "each grant returns a new token");
    // An old token no longer renews.
    let mut stale = lock::Lease {
        token: first_token,
        ..a.clone()
    };
    assert!(lock::renew(&mut fc, &mut stale, "node-a", ttl)
        .await
        .is_err());
    // Not renewed: it expires, the next owner gets a later generation, the old holder's
    // renewal is refused.
    tokio::time::sleep(ttl + Duration::from_millis(500)).await;
    assert_eq!(lock::owner(&mut fc, &name).await.expect("owner"), None);
    let Acquired::Held(b) = lock::acquire(&mut fc, &name, "node-b", ttl)
        .await
        .expect("acquire")
    else {
        panic!("an expired lock is free")
    };
    assert!(b.generation > a.generation, "{b:?} after {a:?}");
    assert!(lock::renew(&mut fc, &mut a, "node-a", ttl).await.is_err());
    // Released: free at once.
    lock::release(&mut fc, &b).await.expect("release");
    assert_eq!(lock::owner(&mut fc, &name).await.expect("owner"), None);
    assert!(matches!(
        lock::acquire(&mut fc, &name, "node-a", ttl).await,
        Ok(Acquired::Held(_))
    ));
}
