//! What `/metrics` shows of the partitions a shard owns, kept current by the shard itself:
//! high watermark, log start and log size after appends, retention, DeleteRecords, a
//! restart and a topic deletion, and the local engine's write and fdatasync latencies.

use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use super::local_shard_tests::{with_local_shard, DataDir};
use super::ops::ProduceItem;
use super::Shard;
use crate::record::batch::tests::make_batch;
use crate::record::ValidatedBatches;

const TOPIC: &str = "gauged";

/// Runs `body` on a one-shard local-engine broker over `data_dir`, with small segments so
/// retention has sealed ones to delete.
fn with_shard<F, Fut>(data_dir: &Path, body: F)
where
    F: FnOnce(Rc<Shard>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    with_local_shard(data_dir, &["--segment-bytes", "200"], body);
}

/// The shard's partition and storage series, as a scrape renders them.
fn scraped(shard: &Shard) -> String {
    let mut out = String::new();
    crate::metrics::partitions::render(&mut out, std::slice::from_ref(&shard.stats));
    crate::metrics::storage::render(&mut out, "local", &[&shard.stats.storage]);
    out
}

/// The value of the one sample named `series` (name and labels), if shown.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn series(name: &str) -> String {
    format!("{name}{{topic=\"{TOPIC}\",partition=\"0\"}}")
}

#[test]
fn partition_gauges_follow_appends_deletes_restarts_and_topic_deletion() {
    let dir = DataDir::new("metrics");
    with_shard(&dir.0, |shard| async move {
        let configs = [("retention.bytes".to_string(), "300".to_string())];
        shard
            .create_topic(TOPIC, 1, 1, configs.into_iter().collect(), false)
            .await
            .expect("topic");
        for _ in 0..3 {
            let batches =
                ValidatedBatches::validate(make_batch(5, 0), 1 << 20).expect("valid batch");
            shard
                .append(ProduceItem {
                    topic: TOPIC.into(),
                    partition: 0,
                    batches,
                    acks: -1,
                    timeout: Duration::from_secs(5),
                    log_append_time: false,
                })
                .await
                .expect("append");
        }
        let text = scraped(&shard);
        let hw = series("kelp_partition_high_watermark");
        let start = series("kelp_partition_log_start_offset");
        let size = series("kelp_partition_log_size_bytes");
        assert_eq!(sample(&text, &hw), Some(15.0), "{text}");
        assert_eq!(sample(&text, &start), Some(0.0));
        let on_disk = shard
            .with_partition(TOPIC, 0, |p| p.log_size_bytes())
            .expect("partition")
            .expect("local knows its size");
        assert!(on_disk > 0);
        assert_eq!(sample(&text, &size), Some(on_disk as f64));
        // acks=all waited for an fdatasync, timed where it ran.
        let syncs = "kelp_storage_latency_seconds_count{engine=\"local\",op=\"sync\"}";
        assert!(sample(&text, syncs).is_some_and(|n| n >= 1.0), "{text}");
        let writes = "kelp_storage_latency_seconds_count{engine=\"local\",op=\"append\"}";
        assert!(sample(&text, writes).is_some_and(|n| n >= 1.0), "{text}");
        // Retention deletes the oldest sealed segments: the log start moves, the size shrinks.
        shard.apply_retention().await;
        let text = scraped(&shard);
        let cut = sample(&text, &start).expect("log start");
        assert!(cut > 0.0, "{text}");
        let smaller = sample(&text, &size).expect("size");
        assert!(smaller < on_disk as f64, "{smaller} vs {on_disk}");
        let now = shard
            .with_partition(TOPIC, 0, |p| p.log_size_bytes())
            .expect("partition");
        assert_eq!(Some(smaller as u64), now);
        shard
            .delete_records(TOPIC, 0, 12)
            .await
            .expect("delete records");
        assert_eq!(sample(&scraped(&shard), &start), Some(12.0));
    });
    // A restart publishes what recovery found, before any request touches the partition.
    with_shard(&dir.0, |shard| async move {
        let text = scraped(&shard);
        assert_eq!(
            sample(&text, &series("kelp_partition_high_watermark")),
            Some(15.0)
        );
        assert_eq!(
            sample(&text, &series("kelp_partition_log_start_offset")),
            Some(12.0)
        );
        shard.delete_topic(TOPIC).await.expect("delete topic");
        shard.broadcast_drop_topic(TOPIC).await;
        assert!(!scraped(&shard).contains(TOPIC), "{}", scraped(&shard));
    });
}
