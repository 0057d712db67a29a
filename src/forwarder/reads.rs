//! Reads from SeaweedMQ for the forwarder: partition ranges (`GetPartitionRangeInfo`) and
//! records below Kelp's cache (`FetchMessage` on the leader, re-encoded as Kafka batches; the
//! partition's flushed log files when the broker's read buffer cannot serve, see
//! [`super::filer_log`]). Runs on the forwarder thread.

use kelp_storage_client::pb::messaging_pb::{
    DataMessage, FetchMessageRequest, GetPartitionRangeInfoRequest,
};

use super::client::{request, storage, Forwarder, Placement};
use super::{records, FetchOut};
use crate::error::KelpError;
use std::sync::atomic::Ordering;

impl Forwarder {
    /// (earliest, high water mark) of a partition, asked of its leader.
    pub async fn range(&self, topic: &str, k: i32) -> Result<(i64, i64), KelpError> {
        let mut last = None;
        for _ in 0..2 {
            let pl = self.placement(topic, k).await?;
            let r = self
                .broker(&pl.leader)?
                .get_partition_range_info(request(GetPartitionRangeInfoRequest {
                    topic: Some(pl.topic.clone()),
                    partition: Some(pl.partition),
                }))
                .await;
            match r {
                Ok(resp) => {
                    let resp = resp.into_inner();
                    if resp.error.is_empty() {
                        let o = resp.offset_range.unwrap_or_default();
                        return Ok((o.earliest_offset.max(0), o.high_water_mark.max(0)));
                    }
                    last = Some(storage("GetPartitionRangeInfo", resp.error));
                }
                Err(s) => last = Some(storage("GetPartitionRangeInfo", s)),
            }
            self.invalidate(topic);
        }
        Err(last.unwrap_or_else(|| storage("GetPartitionRangeInfo", "failed")))
    }

    /// Records from `offset` (below `end`): from the flushed log files, else FetchMessage on
    /// the leader; re-encoded as Kafka batches.
    pub(super) async fn fetch(
        &self,
        topic: &str,
        k: i32,
        offset: i64,
        max_bytes: usize,
        end: i64,
    ) -> Result<FetchOut, KelpError> {
        if offset >= end {
            return Ok(FetchOut::default());
        }
        self.stats.fetch_requests.fetch_add(1, Ordering::Relaxed);
        let max_bytes = max_bytes.clamp(1024, 64 << 20) as i32;
        // Flushed records first, from the files, where every entry carries its offset: a
        // broker's read buffer after a partition reload can answer from the wrong offsets.
        // FetchMessage serves what is not flushed yet.
        let mut pl = self.placement(topic, k).await?;
        match self.fetch_files(&pl, offset, end, max_bytes as usize).await {
            Ok(out) if !out.batches.is_empty() => return Ok(out),
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(topic, partition = k, error = %e, "log files unreadable; asking the broker")
            }
        }
        let mut last = None;
        for attempt in 0..2 {
            if attempt > 0 {
                pl = self.placement(topic, k).await?;
            }
            let resp = self
                .broker(&pl.leader)?
                .fetch_message(request(FetchMessageRequest {
                    topic: Some(pl.topic.clone()),
                    partition: Some(pl.partition),
                    start_offset: offset,
                    max_bytes,
                    max_messages: (end - offset).clamp(1, 10_000) as i32,
                    max_wait_ms: 0,
                    min_bytes: 0,
                    consumer_group: String::new(),
                    consumer_id: "kelp".into(),
                }))
                .await;
            match resp {
                Ok(r) => {
                    let r = r.into_inner();
                    if r.error_code == 0 && r.error.is_empty() {
                        let mut out = FetchOut {
                            batches: Vec::new(),
                            high_watermark: r.high_water_mark,
                        };
                        let keep = r.messages.len().min((end - offset) as usize);
                        // The entries' own offsets give next_offset: a buffer that started
                        // the read elsewhere than asked shows it there.
                        let misplaced = r.next_offset != offset + r.messages.len() as i64;
                        if keep == 0 || r.high_water_mark < end || misplaced {
                            // The broker's read buffer does not know offsets that exist (a
                            // partition reloaded from files it mislabels): what it returns is
                            // empty or from the wrong offsets, and the files had nothing yet.
                            tracing::debug!(
                                topic,
                                offset,
                                next = r.next_offset,
                                n = r.messages.len(),
                                hwm = r.high_water_mark,
                                "FetchMessage cannot serve the offset yet"
                            );
                            return Ok(FetchOut {
                                batches: Vec::new(),
                                high_watermark: end,
                            });
                        }
                        out.batches.push(
                            records::encode_batch(offset, &r.messages[..keep])
                                .map_err(|e| storage("re-encoding", e))?,
                        );
                        return Ok(out);
                    }
                    // 1: not the leader / partition unknown here; 2: read error (retriable).
                    last = Some(storage(
                        "FetchMessage",
                        format!("error {}: {}", r.error_code, r.error),
                    ));
                    if r.error_code != 1 {
                        break;
                    }
                }
                Err(s) => last = Some(storage("FetchMessage", s)),
            }
            self.invalidate(topic);
        }
        let e = last.unwrap_or_else(|| storage("FetchMessage", "failed"));
        tracing::warn!(topic, partition = k, offset, error = %e, "cold read from SeaweedMQ failed");
        Err(e)
    }

    /// Reads `[offset, end)` from the partition's flushed log files on the filer.
    pub(super) async fn fetch_files(
        &self,
        pl: &Placement,
        offset: i64,
        end: i64,
        max_bytes: usize,
    ) -> Result<FetchOut, KelpError> {
        let http = self
            .filer_http
            .borrow()
            .clone()
            .ok_or_else(|| storage("filer", "no filer HTTP address known"))?;
        let mut f = self.filer_client()?;
        let dir = super::filer_log::partition_dir(&pl.topic, &pl.partition);
        let entries = self
            .log_files
            .read(&mut f, &http, &dir, offset, end, max_bytes)
            .await
            .map_err(|e| storage("reading log files", e))?;
        let mut out = FetchOut {
            batches: Vec::new(),
            high_watermark: end,
        };
        // One batch per run of consecutive offsets.
        let mut run: Vec<DataMessage> = Vec::new();
        let mut run_start = -1;
        for e in entries {
            if !run.is_empty() && e.offset != run_start + run.len() as i64 {
                out.batches.push(
                    records::encode_batch(run_start, &run)
                        .map_err(|e| storage("re-encoding", e))?,
                );
                run.clear();
            }
            if run.is_empty() {
                run_start = e.offset;
            }
            run.push(DataMessage {
                key: e.key,
                value: e.data,
                ts_ns: e.ts_ns,
                ctrl: None,
            });
        }
        if !run.is_empty() {
            out.batches.push(
                records::encode_batch(run_start, &run).map_err(|e| storage("re-encoding", e))?,
            );
        }
        tracing::debug!(topic = %pl.topic.name, offset, batches = out.batches.len(), "read from SeaweedMQ log files");
        Ok(out)
    }
}
