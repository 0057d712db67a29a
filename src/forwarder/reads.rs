//! Reads from SeaweedMQ for the forwarder: partition ranges (`GetPartitionRangeInfo`) and
//! records below Kelp's cache (`FetchMessage` on the leader, re-encoded as Kafka batches; the
//! partition's flushed log files when the broker's read buffer cannot serve, see
//! [`super::filer_log`]). Runs on the forwarder thread.

use kelp_storage_client::pb::messaging_pb::{
    DataMessage, FetchMessageRequest, GetPartitionRangeInfoRequest,
};

use super::client::{request, storage, unavailable, Forwarder, Placement};
use super::{records, FetchOut};
use crate::error::KelpError;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// First wait of [`retry_transient`]; it doubles after each failed attempt...
const RETRY_MIN: Duration = Duration::from_millis(100);
/// ...up to this, so a partition whose leader returns is used again within about a second.
const RETRY_MAX: Duration = Duration::from_secs(1);

/// Runs `attempt` until it succeeds, fails with an error that is not transient, or
/// `deadline` passes (an attempt still running then is dropped). Waits between attempts
/// (100 ms doubling to 1 s, the last one cut to end at the deadline), so a caller that
/// runs out of time does so at its deadline, not before. After the deadline: the last
/// transient error.
pub(super) async fn retry_transient<T, F, Fut>(
    what: &str,
    deadline: Instant,
    mut attempt: F,
) -> Result<T, KelpError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, KelpError>>,
{
    let deadline_tokio = tokio::time::Instant::from_std(deadline);
    let mut backoff = RETRY_MIN;
    let mut last = None;
    loop {
        match tokio::time::timeout_at(deadline_tokio, attempt()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) if !e.is_transient() => return Err(e),
            Ok(Err(e)) => {
                tracing::debug!(what, error = %e, retry_in_ms = backoff.as_millis() as u64, "SeaweedMQ unavailable; retrying");
                last = Some(e);
            }
            Err(_) => break,
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        tokio::time::sleep(backoff.min(left)).await;
        if Instant::now() >= deadline {
            break;
        }
        backoff = (backoff * 2).min(RETRY_MAX);
    }
    Err(last.unwrap_or_else(|| unavailable(what, "no answer before the deadline")))
}

/// A FetchMessage of the partition at `pl` from `start` (the broker answers at once: Kelp
/// does the long polling).
fn fetch_request(
    pl: &Placement,
    start: i64,
    max_bytes: i32,
    max_messages: i32,
) -> tonic::Request<FetchMessageRequest> {
    request(FetchMessageRequest {
        topic: Some(pl.topic.clone()),
        partition: Some(pl.partition),
        start_offset: start,
        max_bytes,
        max_messages,
        max_wait_ms: 0,
        min_bytes: 0,
        consumer_group: String::new(),
        consumer_id: "kelp".into(),
    })
}

impl Forwarder {
    /// [`Forwarder::range`], retried while SeaweedMQ cannot answer, until `deadline`.
    pub async fn range_until(
        &self,
        topic: &str,
        k: i32,
        deadline: Instant,
    ) -> Result<(i64, i64), KelpError> {
        retry_transient("GetPartitionRangeInfo", deadline, || self.range(topic, k)).await
    }

    /// (earliest, high water mark) of a partition, asked of its leader. A leader that
    /// cannot be reached or cannot tell (stopped, hung, being replaced, loading) gives
    /// [`KelpError::StorageUnavailable`]: the route is dropped first, so a retry looks it up
    /// again, and a topic that is gone shows there as UNKNOWN_TOPIC_OR_PARTITION.
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
                    last = Some(unavailable("GetPartitionRangeInfo", resp.error));
                }
                Err(s) => last = Some(unavailable("GetPartitionRangeInfo", s)),
            }
            self.invalidate(topic);
        }
        Err(last.unwrap_or_else(|| unavailable("GetPartitionRangeInfo", "failed")))
    }

    /// Records from `offset` (below `end`), re-encoded as Kafka batches, each stamped with
    /// the leader epoch its offsets were written under (`epoch_at`).
    pub(super) async fn fetch(
        &self,
        topic: &str,
        k: i32,
        offset: i64,
        max_bytes: usize,
        end: i64,
    ) -> Result<FetchOut, KelpError> {
        let mut out = self.fetch_stored(topic, k, offset, max_bytes, end).await?;
        if !out.batches.is_empty() {
            let history = self.cluster.ownership.history(topic, k).unwrap_or_default();
            for b in out.batches.iter_mut() {
                let last =
                    crate::record::batch::BatchHeader::parse(b).map_or(-1, |h| h.last_offset());
                let epoch = epoch_at(&history, last);
                *b = crate::record::batch::with_leader_epoch(std::mem::take(b), epoch);
            }
        }
        Ok(out)
    }

    /// Records from `offset` (below `end`): from the flushed log files, else FetchMessage on
    /// the leader; re-encoded as Kafka batches.
    async fn fetch_stored(
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
                .fetch_message(fetch_request(
                    &pl,
                    offset,
                    max_bytes,
                    (end - offset).clamp(1, 10_000) as i32,
                ))
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
                        out.batches
                            .extend(records::encode_batch(offset, &r.messages[..keep]));
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

    /// The SeaweedMQ timestamp (ns) of the partition's message at `hwm - 1`, its last: from
    /// the flushed log files, else from FetchMessage on the leader (only when the answer is
    /// provably that offset's).
    pub(super) async fn last_stamp(&self, topic: &str, k: i32, hwm: i64) -> Result<i64, KelpError> {
        let pl = self.placement(topic, k).await?;
        let last = hwm - 1;
        if let Ok(entries) = self.read_files(&pl, last, hwm, 1 << 16).await {
            if let Some(e) = entries.iter().find(|e| e.offset == last) {
                return Ok(e.ts_ns);
            }
        }
        let r = self
            .broker(&pl.leader)?
            .fetch_message(fetch_request(&pl, last, 1 << 20, 1))
            .await
            .map_err(|s| storage("FetchMessage", s))?
            .into_inner();
        match r.messages.first() {
            Some(m) if r.error_code == 0 && r.next_offset == hwm => Ok(m.ts_ns),
            _ => Err(storage(
                "FetchMessage",
                format!("no message at {last} (error {}: {})", r.error_code, r.error),
            )),
        }
    }

    /// The partition's flushed log files (for retention), oldest first.
    pub(super) async fn flushed_files(
        &self,
        topic: &str,
        k: i32,
    ) -> Result<Vec<super::filer_log::FlushedFile>, KelpError> {
        let pl = self.placement(topic, k).await?;
        let mut f = self.filer_client()?;
        let dir = super::filer_log::partition_dir(&pl.topic, &pl.partition);
        super::filer_log::flushed_files(&mut f, &dir)
            .await
            .map_err(|e| storage("listing log files", e))
    }

    /// Entries `[offset, end)` of the partition's flushed log files on the filer.
    async fn read_files(
        &self,
        pl: &Placement,
        offset: i64,
        end: i64,
        max_bytes: usize,
    ) -> Result<Vec<kelp_storage_client::pb::filer_pb::LogEntry>, KelpError> {
        let http = self
            .filer_http
            .borrow()
            .clone()
            .ok_or_else(|| storage("filer", "no filer HTTP address known"))?;
        let mut f = self.filer_client()?;
        let dir = super::filer_log::partition_dir(&pl.topic, &pl.partition);
        self.log_files
            .read(&mut f, &http, &dir, offset, end, max_bytes)
            .await
            .map_err(|e| storage("reading log files", e))
    }

    /// Reads `[offset, end)` from the partition's flushed log files on the filer.
    pub(super) async fn fetch_files(
        &self,
        pl: &Placement,
        offset: i64,
        end: i64,
        max_bytes: usize,
    ) -> Result<FetchOut, KelpError> {
        let entries = self.read_files(pl, offset, end, max_bytes).await?;
        let mut out = FetchOut {
            batches: Vec::new(),
            high_watermark: end,
        };
        // One batch per run of consecutive offsets.
        let mut run: Vec<DataMessage> = Vec::new();
        let mut run_start = -1;
        for e in entries {
            if !run.is_empty() && e.offset != run_start + run.len() as i64 {
                out.batches.extend(records::encode_batch(run_start, &run));
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
            out.batches.extend(records::encode_batch(run_start, &run));
        }
        tracing::debug!(topic = %pl.topic.name, offset, batches = out.batches.len(), "read from SeaweedMQ log files");
        Ok(out)
    }
}

/// The leader epoch under which `offset` was written, from a partition's tenures (epoch,
/// first offset), oldest first: the newest one starting at or before it. -1 (a consumer
/// then skips the check) before the tenures kept, or when they are not known. SeaweedMQ
/// keeps no epoch with its records, so batches read back get it here; the batch's last
/// offset is the one to look up, as a consumer's position goes past it, and a run of
/// records read back may cross into a newer tenure.
pub(super) fn epoch_at(history: &[(i32, i64)], offset: i64) -> i32 {
    history
        .iter()
        .rev()
        .find(|&&(_, start)| start <= offset)
        .map_or(-1, |&(epoch, _)| epoch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn transient_errors_are_retried_with_backoff_until_the_deadline() {
        let calls = Cell::new(0);
        let start = Instant::now();
        let r: Result<(), _> = rt().block_on(retry_transient(
            "t",
            start + Duration::from_millis(800),
            || {
                calls.set(calls.get() + 1);
                async { Err(KelpError::StorageUnavailable("down".into())) }
            },
        ));
        let took = start.elapsed();
        assert_eq!(r, Err(KelpError::StorageUnavailable("down".into())));
        // Waits 100, 200, 400 ms, then what is left: answers at the deadline, not before.
        assert!(took >= Duration::from_millis(800), "{took:?}");
        assert!(took < Duration::from_millis(1100), "{took:?}");
        assert_eq!(
            calls.get(),
            4,
            "not a hot loop: one attempt per backoff step"
        );
    }

    #[test]
    fn an_answer_after_an_outage_is_returned() {
        let calls = Cell::new(0);
        let r = rt().block_on(retry_transient(
            "t",
            Instant::now() + Duration::from_secs(5),
            || {
                calls.set(calls.get() + 1);
                let n = calls.get();
                async move {
                    if n < 3 {
                        Err(KelpError::StorageUnavailable("moving".into()))
                    } else {
                        Ok((0, 42))
                    }
                }
            },
        ));
        assert_eq!(r, Ok((0, 42)));
        assert_eq!(calls.get(), 3);
    }

    #[test]
    fn other_errors_are_not_retried() {
        let calls = Cell::new(0);
        let start = Instant::now();
        let r: Result<(), _> =
            rt().block_on(retry_transient("t", start + Duration::from_secs(5), || {
                calls.set(calls.get() + 1);
                async { Err(KelpError::UnknownTopicOrPartition) }
            }));
        assert_eq!(r, Err(KelpError::UnknownTopicOrPartition));
        assert_eq!(calls.get(), 1);
        assert!(start.elapsed() < Duration::from_millis(100));
    }

    #[test]
    fn an_attempt_that_hangs_ends_at_the_deadline() {
        let start = Instant::now();
        let r: Result<(), _> = rt().block_on(retry_transient(
            "t",
            start + Duration::from_millis(300),
            futures::future::pending,
        ));
        assert!(r.is_err_and(|e| e.is_transient()));
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(300) && took < Duration::from_millis(600));
    }

    #[test]
    fn a_batch_read_back_gets_the_epoch_its_last_offset_was_written_under() {
        let history = [(3, 100), (4, 250), (6, 400)];
        assert_eq!(super::epoch_at(&history, 99), -1, "before the tenures kept");
        assert_eq!(super::epoch_at(&history, 100), 3);
        assert_eq!(super::epoch_at(&history, 249), 3);
        assert_eq!(super::epoch_at(&history, 250), 4);
        assert_eq!(super::epoch_at(&history, 10_000), 6);
        assert_eq!(super::epoch_at(&[], 5), -1);
    }
}
