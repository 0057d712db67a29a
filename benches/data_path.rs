//! Data-path micro-benchmarks with bytes/s figures: Produce request decode, the Produce path
//! (validate + CRC32C + offset rewrite + cache append) and Fetch response assembly.

#![allow(
    missing_docs,
    reason = "a bench binary has no API; criterion_group! makes an undocumented pub fn"
)]

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::{Encodable, StrBytes};
use std::time::Instant;

use futures::FutureExt;
use kelp::partition::settle::Reserved;
use kelp::partition::Partition;
use kelp::protocol::fetch_response::{self, PartitionOut, TopicOut};
use kelp::protocol::{produce_request, RequestHeader};
use kelp::record::build::simple_batch;
use kelp::record::ValidatedBatches;
use kelp::storage::memory::MemoryStore;
use kelp::storage::{Durability, PartitionStore};

/// A Produce v9 body carrying one batch of `records` x `value_len` per partition.
fn produce_body(partitions: i32, records: i32, value_len: usize) -> BytesMut {
    let batch = simple_batch(records, value_len, 1_700_000_000_000).freeze();
    let req = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("bench")))
            .with_partition_data(
                (0..partitions)
                    .map(|i| {
                        PartitionProduceData::default()
                            .with_index(i)
                            .with_records(Some(batch.clone()))
                    })
                    .collect(),
            )]);
    let mut b = BytesMut::new();
    req.encode(&mut b, 9).expect("encode");
    b
}

fn bench_decode(c: &mut Criterion) {
    let body = produce_body(8, 100, 100);
    let mut g = c.benchmark_group("produce_request_decode");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("v9_8_partitions_100x100B", |b| {
        b.iter_batched(
            || body.clone(),
            |body| produce_request::decode(body, 9).expect("decode"),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn bench_produce_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("produce_path");
    for (records, value_len) in [(100, 100), (16, 1024), (1000, 1024)] {
        let batch = simple_batch(records, value_len, 1_700_000_000_000);
        g.throughput(Throughput::Bytes(batch.len() as u64));
        let store: std::rc::Rc<dyn PartitionStore> = std::rc::Rc::new(MemoryStore);
        let mut part = Partition::new(uuid::Uuid::nil(), store.clone());
        let mut appended = 0usize;
        g.bench_function(
            format!("validate_crc_rewrite_append_{records}x{value_len}B"),
            |b| {
                b.iter_batched(
                    || batch.clone(),
                    |buf| {
                        let v = ValidatedBatches::validate(buf, 16 << 20).expect("valid");
                        // The shard's append on the memory engine: reserve, store, settle.
                        let Ok(Reserved::Append { ticket, batches }) = part.reserve(v, false)
                        else {
                            panic!("a fresh append");
                        };
                        let stored = store
                            .append(&batches, Durability::Stored, Instant::now())
                            .now_or_never()
                            .expect("the memory engine stores at once");
                        appended += part.settle(ticket, stored).added;
                        if part.cached_bytes() > 256 << 20 {
                            part.evict_through(i64::MAX - 1);
                        }
                    },
                    BatchSize::SmallInput,
                )
            },
        );
    }
    g.finish();
}

fn bench_fetch_assembly(c: &mut Criterion) {
    let batch: Bytes = simple_batch(100, 1024, 0).freeze();
    let topics: Vec<TopicOut> = vec![TopicOut {
        name: "bench".into(),
        topic_id: [1; 16],
        partitions: (0..8)
            .map(|i| PartitionOut {
                index: i,
                high_watermark: 1000,
                last_stable_offset: 1000,
                records: vec![batch.clone(); 4],
                ..Default::default()
            })
            .collect(),
    }];
    let bytes: usize = topics[0]
        .partitions
        .iter()
        .map(PartitionOut::records_len)
        .sum();
    let header = RequestHeader {
        api_key: 1,
        api_version: 12,
        correlation_id: 1,
        client_id: None,
        body_offset: 0,
    };
    let mut g = c.benchmark_group("fetch_response_assembly");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("v12_8_partitions_4_batches_of_100KiB", |b| {
        b.iter(|| fetch_response::encode(&header, 0, 0, &topics))
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_decode,
    bench_produce_path,
    bench_fetch_assembly
);
criterion_main!(benches);
