//! The shard's side of share groups (KIP-932), on a group's coordinator shard: a ShareFetch
//! reads the session's partitions from their owners (`scatter`), hands the batches read to
//! the group's share-partitions to acquire, and waits for records (appends, releases, lock
//! expiries) until its deadline; acknowledgements are applied and stored first. New
//! share-partitions start from their stored state, else where the group's
//! share.auto.offset.reset says. Timers end record locks and drop idle groups' state from
//! memory. Calls `share::coordinator` for the decisions.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use regex::Regex;
use uuid::Uuid;

use super::ops::{OffsetsItem, ReadItem, WaitItem};
use super::Shard;
use crate::cluster::Snapshot;
use crate::error::KelpError;
use crate::group::consumer::TopicView;
use crate::group::share::coordinator::PartKey;
use crate::group::share::messages::{ShareFetchIn, ShareFetchOut, SharePartitionOut};
use crate::group::share::session::{FetchContext, Requester, SessionPartition};
use crate::partition::txn::AbortedTxn;
use crate::record::batch::BatchHeader;

/// Longest wait a ShareFetch is held for, whatever it asks.
const MAX_WAIT_CAP: Duration = Duration::from_secs(30);

/// The cluster's topics as a share group's timers see them (subscriptions by name).
pub struct SnapshotTopics(pub Arc<Snapshot>);

impl TopicView for SnapshotTopics {
    fn version(&self) -> u64 {
        self.0.version
    }

    fn lookup(&self, name: &str) -> Option<(Uuid, i32)> {
        self.0.topic(name).map(|t| (t.id, t.partitions))
    }

    fn matching(&self, pattern: &Regex) -> Vec<String> {
        self.0
            .topics
            .keys()
            .filter(|n| pattern.is_match(n))
            .cloned()
            .collect()
    }
}

/// Where a share-partition without stored state starts (share.auto.offset.reset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reset {
    Latest,
    Earliest,
    /// The first offset at or after now minus this.
    ByDuration(Duration),
}

impl Reset {
    fn parse(v: Option<&str>) -> Reset {
        match v {
            Some("earliest") => Reset::Earliest,
            Some(v) => v
                .strip_prefix("by_duration:")
                .and_then(iso_duration)
                .map_or(Reset::Latest, Reset::ByDuration),
            None => Reset::Latest,
        }
    }
}

/// An ISO-8601 duration of days, hours, minutes and seconds ("P1DT2H", "PT30M", "PT1.5S").
fn iso_duration(s: &str) -> Option<Duration> {
    let rest = s.strip_prefix('P').or_else(|| s.strip_prefix('p'))?;
    let (days, time) = match rest.split_once(['T', 't']) {
        Some((d, t)) => (d, t),
        None => (rest, ""),
    };
    let mut secs = 0f64;
    if !days.is_empty() {
        secs += days.strip_suffix(['D', 'd'])?.parse::<f64>().ok()? * 86_400.0;
    }
    let mut num = String::new();
    for c in time.chars() {
        let unit = match c.to_ascii_uppercase() {
            'H' => 3600.0,
            'M' => 60.0,
            'S' => 1.0,
            _ => {
                num.push(c);
                continue;
            }
        };
        secs += num.parse::<f64>().ok()? * unit;
        num.clear();
    }
    (num.is_empty() && secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// Each batch read as (first offset, last offset, whether a member may acquire it), in
/// order (an unparseable one covers nothing). Under read_committed, data batches of aborted
/// transactions may not be acquired (the share-partition archives them as gaps), markers may
/// (the client acknowledges them as gaps). Aborted transactions are taken in offset order
/// and each ends at its producer's marker, as Kafka's consumers read them: a producer's
/// later transaction in the same read is not taken for the aborted one.
fn spans(
    batches: &[bytes::Bytes],
    aborted: &[AbortedTxn],
    committed: bool,
) -> Vec<(i64, i64, bool)> {
    let mut pending: Vec<&AbortedTxn> = if committed {
        aborted.iter().collect()
    } else {
        Vec::new()
    };
    pending.sort_by_key(|a| std::cmp::Reverse(a.first_offset));
    let mut open: BTreeSet<i64> = BTreeSet::new();
    batches
        .iter()
        .map(|b| {
            let Ok(h) = BatchHeader::parse(b) else {
                return (i64::MAX, i64::MIN, false);
            };
            let (first, last) = (h.base_offset, h.last_offset());
            while pending.last().is_some_and(|a| a.first_offset <= last) {
                if let Some(a) = pending.pop() {
                    open.insert(a.producer_id);
                }
            }
            let aborted_data = h.is_transactional() && open.contains(&h.producer_id);
            if h.is_transactional() && h.is_control() {
                open.remove(&h.producer_id);
            }
            (first, last, !aborted_data || h.is_control())
        })
        .collect()
}

impl Shard {
    /// A share group config: the group's own, else None (the caller applies the default).
    fn share_setting(&self, group: &str, key: &str) -> Option<String> {
        self.cluster.group_config(group, key)
    }

    /// How long acquired records stay locked for `group`.
    fn share_lock(&self, group: &str) -> Duration {
        self.share_setting(group, "share.record.lock.duration.ms")
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(
                self.groups.shares.settings().record_lock,
                Duration::from_millis,
            )
    }

    /// Serves a ShareFetch or ShareAcknowledge of share group `group` (this shard
    /// coordinates it).
    pub(super) async fn share_fetch(
        &self,
        group: String,
        mut r: ShareFetchIn,
    ) -> Result<ShareFetchOut, KelpError> {
        let shares = &self.groups.shares;
        let who = Requester {
            group: &group,
            member: &r.member_id,
            connection: r.connection,
            broker: r.broker,
        };
        let (parts, full, closing) = if r.fetch {
            match shares.session_fetch(who, r.epoch, &r.added, &r.forgotten, !r.acks.is_empty())? {
                FetchContext::Full(p) => (p, true, None),
                FetchContext::Incremental(p) => (p, false, None),
                FetchContext::Final(p) => (BTreeSet::new(), false, Some(p)),
            }
        } else {
            (
                BTreeSet::new(),
                false,
                shares.session_acknowledge(who, r.epoch)?,
            )
        };
        let lock = self.share_lock(&group);
        let snap = self.cluster.snapshot();
        let mut out: BTreeMap<SessionPartition, SharePartitionOut> = BTreeMap::new();
        for (tp, acks) in std::mem::take(&mut r.acks) {
            let res = match (acks, resolve(&snap, tp)) {
                (Err(e), _) | (Ok(_), Err(e)) => Err(e),
                (Ok(batches), Ok(_)) if batches.is_empty() => Ok(()),
                (Ok(batches), Ok(_)) => {
                    let key = (group.clone(), tp.0, tp.1);
                    shares.acknowledge(&key, &r.member_id, &batches).await
                }
            };
            entry(&mut out, tp).ack = Some(res);
        }
        if let Some(held) = closing {
            shares.release(&group, &r.member_id, &held).await;
        }
        if full {
            for &tp in &parts {
                entry(&mut out, tp);
            }
        }
        if r.fetch && r.max_records > 0 && r.max_bytes > 0 && !parts.is_empty() {
            self.share_read(&group, &r, &parts, &snap, lock, &mut out)
                .await;
        }
        Ok(ShareFetchOut {
            partitions: out.into_values().collect(),
            lock_ms: i32::try_from(lock.as_millis()).unwrap_or(i32::MAX),
        })
    }

    /// Reads and acquires records of the session's partitions for the member, waiting
    /// until some are acquired or the request's wait ends.
    async fn share_read(
        &self,
        group: &str,
        r: &ShareFetchIn,
        parts: &BTreeSet<SessionPartition>,
        snap: &Snapshot,
        lock: Duration,
        out: &mut BTreeMap<SessionPartition, SharePartitionOut>,
    ) {
        let shares = &self.groups.shares;
        let member: Rc<str> = Rc::from(r.member_id.as_str());
        let deadline = Instant::now() + r.max_wait.min(MAX_WAIT_CAP);
        let committed = self
            .share_setting(group, "share.isolation.level")
            .as_deref()
            == Some("read_committed");
        let mut live: Vec<(PartKey, String)> = Vec::new();
        for &tp in parts {
            match resolve(snap, tp) {
                Ok(name) => live.push(((group.to_string(), tp.0, tp.1), name)),
                Err(e) => entry(out, tp).error = Some(e),
            }
        }
        let mut left = r.max_records;
        loop {
            // Registered before looking, so a release between the look and the wait wakes it.
            let changed = shares.listen();
            self.share_load(group, &live).await;
            let plan: Vec<(usize, i64)> = live
                .iter()
                .enumerate()
                .filter_map(|(i, (k, _))| shares.next_fetch_offset(k).map(|o| (i, o)))
                .collect();
            let per = (r.max_bytes / plan.len().max(1)).max(1);
            let items = plan
                .iter()
                .map(|&(i, offset)| ReadItem {
                    topic: live[i].1.clone(),
                    partition: live[i].0 .2,
                    offset,
                    max_bytes: per,
                    response_max: r.max_bytes,
                    committed,
                })
                .collect();
            let results = self.scatter(items).await;
            let now = Instant::now();
            let (mut got, mut failed, mut again) = (false, false, false);
            let mut waits = Vec::new();
            for (&(i, offset), res) in plan.iter().zip(results) {
                let (key, name) = &live[i];
                let tp = (key.1, key.2);
                match res {
                    Ok(read) => {
                        waits.push(WaitItem {
                            topic: name.clone(),
                            partition: key.2,
                            offset: read.high_watermark.max(offset),
                        });
                        let spans = spans(&read.batches, &read.aborted, committed);
                        let ranges: Vec<(i64, i64)> =
                            spans.iter().filter(|s| s.2).map(|s| (s.0, s.1)).collect();
                        let acquired = shares.acquire(key, &member, &ranges, left, now, lock);
                        let (Some(lo), Some(hi)) = (acquired.first(), acquired.last()) else {
                            continue;
                        };
                        let (lo, hi) = (lo.first, hi.last);
                        let n: i64 = acquired.iter().map(|a| a.last - a.first + 1).sum();
                        left = left.saturating_sub(usize::try_from(n).unwrap_or(usize::MAX));
                        got = true;
                        let o = entry(out, tp);
                        // Whole batches, those outside the acquired span trimmed.
                        for (b, &(first, last, _)) in read.batches.iter().zip(&spans) {
                            if last >= lo && first <= hi {
                                o.records.push(b.clone());
                            }
                        }
                        o.acquired.extend(acquired);
                    }
                    Err(KelpError::OffsetOutOfRange { start, .. }) => {
                        shares.log_start_moved(key, start);
                        again = true;
                    }
                    Err(e) => {
                        failed = true;
                        entry(out, tp).error = Some(e);
                    }
                }
            }
            if got || failed || left == 0 || now >= deadline {
                return;
            }
            if again {
                continue;
            }
            let remaining = deadline.saturating_duration_since(now);
            let timer = glommio::timer::sleep(remaining);
            let appended = self.wait_any(waits, deadline);
            futures::future::select(
                Box::pin(timer),
                futures::future::select(Box::pin(appended), changed),
            )
            .await;
        }
    }

    /// Puts the share-partitions of `live` that are not in memory there: from their stored
    /// state, else from where share.auto.offset.reset says.
    async fn share_load(&self, group: &str, live: &[(PartKey, String)]) {
        let shares = &self.groups.shares;
        let mut fresh = Vec::new();
        for (key, name) in live {
            if shares.loaded(key) {
                continue;
            }
            match shares.stored(key, name) {
                Some(s) => shares.load(key.clone(), name, Some(s), 0),
                None => fresh.push((key.clone(), name.clone())),
            }
        }
        if fresh.is_empty() {
            return;
        }
        let reset = Reset::parse(
            self.share_setting(group, "share.auto.offset.reset")
                .as_deref(),
        );
        let timestamp = match reset {
            Reset::Latest => crate::partition::timestamp::LATEST,
            Reset::Earliest => crate::partition::timestamp::EARLIEST,
            Reset::ByDuration(d) => {
                crate::clock::now_ms() - i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
            }
        };
        let items = fresh
            .iter()
            .map(|(k, name)| OffsetsItem {
                topic: name.clone(),
                partition: k.2,
                timestamp,
                committed: false,
            })
            .collect();
        let found = self.scatter(items).await;
        let mut latest = Vec::new();
        for ((key, name), f) in fresh.into_iter().zip(found) {
            match f {
                // Loaded meanwhile by another fetch of the group: that one stands.
                _ if shares.loaded(&key) => {}
                Ok((_, offset)) if offset >= 0 => shares.load(key, &name, None, offset),
                // No record at or after the time: from the end.
                Ok(_) => latest.push((key, name)),
                Err(e) => {
                    tracing::debug!(group, topic = %name, partition = key.2, error = %e,
                        "share-partition start not found yet")
                }
            }
        }
        if latest.is_empty() {
            return;
        }
        let items = latest
            .iter()
            .map(|(k, name)| OffsetsItem {
                topic: name.clone(),
                partition: k.2,
                timestamp: crate::partition::timestamp::LATEST,
                committed: false,
            })
            .collect();
        let found = self.scatter(items).await;
        for ((key, name), f) in latest.into_iter().zip(found) {
            if let (Ok((_, offset)), false) = (f, shares.loaded(&key)) {
                shares.load(key, &name, None, offset.max(0));
            }
        }
    }

    /// A connection closed: the share sessions it opened on this shard's groups go, and
    /// their members' records are released.
    pub(super) async fn share_closed(&self, connection: u64) {
        let shares = &self.groups.shares;
        for (group, member, parts) in shares.connection_closed(connection) {
            shares.release(&group, &member, &parts).await;
        }
    }

    /// Share group timers: record locks due end (stored), members whose session timed
    /// out leave, and every `idle` call groups with nobody left drop their share-partitions
    /// from memory.
    pub(super) async fn share_tick(&self, idle: bool) {
        let shares = &self.groups.shares;
        let view = SnapshotTopics(self.cluster.snapshot());
        let changed = shares.expire(&view, Instant::now());
        if !changed.is_empty() {
            if let Err(e) = shares.persist(&changed).await {
                // As Kafka: the records are available in memory all the same.
                tracing::warn!(error = %e, "expired share record locks not stored");
            }
        }
        if idle {
            shares.drop_idle();
        }
    }
}

/// The answer's entry of a partition, made on first use.
fn entry(
    out: &mut BTreeMap<SessionPartition, SharePartitionOut>,
    tp: SessionPartition,
) -> &mut SharePartitionOut {
    out.entry(tp).or_insert_with(|| SharePartitionOut {
        partition: tp,
        ..Default::default()
    })
}

/// The topic name of a session partition, or why it cannot be read.
fn resolve(snap: &Snapshot, (topic, partition): SessionPartition) -> Result<String, KelpError> {
    let m = snap.by_id.get(&topic).ok_or(KelpError::UnknownTopicId)?;
    if partition < 0 || partition >= m.partitions {
        return Err(KelpError::UnknownTopicOrPartition);
    }
    Ok(m.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(base: i64, pid: i64) -> bytes::Bytes {
        crate::record::build::records_at(base, 1, Some(pid))
    }

    fn marker(base: i64, pid: i64, kind: crate::record::control::ControlType) -> bytes::Bytes {
        let mut m = crate::record::control::marker_batch(kind, pid, 0, 0, 1);
        m[..8].copy_from_slice(&base.to_be_bytes());
        m.freeze()
    }

    #[test]
    fn only_the_aborted_transaction_is_left_out_not_the_producers_next_one() {
        use crate::record::control::ControlType::{Abort, Commit};
        let read = vec![
            txn(10, 7),
            marker(11, 7, Abort),
            txn(12, 7),
            marker(13, 7, Commit),
        ];
        let aborted = [AbortedTxn {
            producer_id: 7,
            first_offset: 10,
            last_offset: 11,
        }];
        let got = spans(&read, &aborted, true);
        assert_eq!(
            got,
            vec![
                (10, 10, false),
                (11, 11, true),
                (12, 12, true),
                (13, 13, true)
            ]
        );
        // read_uncommitted acquires everything.
        assert!(spans(&read, &aborted, false).iter().all(|s| s.2));
    }

    #[test]
    fn auto_offset_reset_values_parse_as_kafka_writes_them() {
        assert_eq!(Reset::parse(None), Reset::Latest);
        assert_eq!(Reset::parse(Some("latest")), Reset::Latest);
        assert_eq!(Reset::parse(Some("earliest")), Reset::Earliest);
        assert_eq!(
            Reset::parse(Some("by_duration:PT1H30M")),
            Reset::ByDuration(Duration::from_secs(5400))
        );
        assert_eq!(
            Reset::parse(Some("by_duration:P1DT0.5S")),
            Reset::ByDuration(Duration::from_millis(86_400_500))
        );
        assert_eq!(Reset::parse(Some("by_duration:1H")), Reset::Latest);
    }
}
