//! The durable log of one partition: its segments, the queue of batches waiting to be
//! written, and group commit.
//!
//! Offsets are assigned by `partition/` before batches are queued here, so the log only
//! preserves their order. A single writer at a time (whichever waiting produce finds the log
//! idle) drains the whole queue into the active segment in one write, rolls segments by
//! size and age, and — under `--fsync always`, when a durable waiter asked — issues one
//! fdatasync for everything written so far. Appends that arrive during a write or sync are
//! taken by the writer's next round: that is the group commit. A failed write or sync fails
//! every queued append (they see a new generation) and never acknowledges them.
//!
//! Offsets stay contiguous through failures: [`PartitionLog::enqueue`] takes only the offset
//! after everything written and queued, a failed write is cut off the file at once (the
//! appender), and a segment is sealed only at its logical length and synced, so neither the
//! live log nor recovery ever finds bytes of an unacknowledged batch between acknowledged
//! ones.
//!
//! A failed fdatasync: on Linux the kernel may mark the pages it could not write clean and
//! report the error once, so the next fdatasync of the file succeeds without writing them
//! ("fsyncgate"). Waiters in the failed round fail, and before any later fdatasync may count
//! for anything the log reads back every byte of the active segment past its last good sync,
//! checks it is still the batches it wrote (CRC, contiguous offsets) and writes it again, so
//! that sync writes fresh dirty pages. Under `always` that is the next durable append or the
//! next roll, under `interval` the next tick. If the bytes no longer read back intact (the
//! kernel dropped the pages), data acknowledged as written is gone: the log is fenced and
//! refuses every append until a restart's recovery decides what the disk holds — PostgreSQL's
//! answer to the same problem. Syncs of one log never overlap, so no success can hide a
//! concurrent failure.
//!
//! Lives on the owning shard only; calls [`super::segment`] and [`super::scan`], and records
//! write and fdatasync latencies in `metrics::storage`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;

use super::scan::{scan, Stop};
use super::segment::{self, Segment};
use super::LogError;
use crate::config::FsyncPolicy;
use crate::metrics::storage::{record, StorageOp};
use crate::record::batch::{first_offset_at_or_after, BatchHeader};

/// Whether active segments are appended with O_DIRECT: under `--fsync always` a write an
/// acks=all producer waits for is synced right after it, so the page cache would only add a
/// copy and its writeback ([`super::direct`]); acks=1 rounds go the same way (measured
/// cheaper, docs/storage.md). Other policies keep the page cache, which lets writes return
/// before the device has them.
pub fn direct_appends(policy: FsyncPolicy) -> bool {
    policy == FsyncPolicy::Always
}

/// Roll settings of the partition's topic at the time of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RollSettings {
    /// Roll to a new segment before this size is exceeded (`segment.bytes`).
    pub segment_bytes: u64,
    /// Roll a segment this old, in ms (`segment.ms`; `u64::MAX`: never).
    pub segment_ms: u64,
}

/// See [`PartitionLog::progress`].
enum Progress {
    Done,
    Busy,
    Idle,
}

/// What an append waits for: written (or synced) past `target` in generation `gen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// The log generation the append was queued in: a failed write ends it.
    pub gen: u64,
    /// The offset after the append's last batch.
    pub target: i64,
}

struct State {
    segments: BTreeMap<i64, Segment>,
    pending: Vec<(BatchHeader, Bytes)>,
    roll: RollSettings,
    writing: bool,
    /// Offset after the last batch written to a segment.
    written_end: i64,
    /// Offset after the last batch written or queued: the base the next batch must have.
    reserved_end: i64,
    /// Offset after the last batch known to be on stable storage.
    synced_end: i64,
    /// Largest target a durable waiter asked to be synced.
    want_sync: i64,
    /// Bumped by every failed write: queued appends of older generations failed.
    gen: u64,
    /// Why the last failed round failed: what its waiters get.
    error: Option<LogError>,
    /// An fdatasync of the active segment failed: its bytes past `synced_len` must be written
    /// again before a sync counts.
    rewrite: bool,
    /// Why the log refuses writes until a restart, once it does.
    fenced: Option<String>,
}

/// One partition's segments on the owning shard.
pub struct PartitionLog {
    dir: PathBuf,
    policy: FsyncPolicy,
    st: RefCell<State>,
    changed: event_listener::Event,
    /// Held through every fdatasync (and the rewrite before it): of two overlapping syncs of
    /// one file only one sees an error, and the other's success would be a lie.
    sync_lock: futures::lock::Mutex<()>,
}

/// Bytes read per cold-read or scan step.
const READ_CHUNK: usize = 1 << 20;

impl PartitionLog {
    /// A log in `dir` with recovered `segments` (none for a new partition: the directory
    /// and first segment are created by the first write).
    pub fn new(
        dir: PathBuf,
        policy: FsyncPolicy,
        segments: Vec<Segment>,
        roll: RollSettings,
    ) -> Self {
        let end = segments.last().map_or(0, |s| s.next_offset);
        PartitionLog {
            dir,
            policy,
            st: RefCell::new(State {
                segments: segments.into_iter().map(|s| (s.base, s)).collect(),
                pending: Vec::new(),
                roll,
                writing: false,
                written_end: end,
                reserved_end: end,
                synced_end: end,
                want_sync: end,
                gen: 0,
                error: None,
                rewrite: false,
                fenced: None,
            }),
            changed: event_listener::Event::new(),
            sync_lock: futures::lock::Mutex::new(()),
        }
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Offset after the last written batch.
    pub fn written_end(&self) -> i64 {
        self.st.borrow().written_end
    }

    /// Current generation (changes when a write fails).
    pub fn generation(&self) -> u64 {
        self.st.borrow().gen
    }

    /// Bytes in all segments.
    pub fn size(&self) -> u64 {
        self.st.borrow().segments.values().map(|s| s.size).sum()
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.st.borrow().segments.len()
    }

    /// Offset after the last batch written or queued: where the next batch must start.
    pub fn reserved_end(&self) -> i64 {
        self.st.borrow().reserved_end
    }

    /// Queues batches (offsets assigned, in order) for the writer. Refuses them, queueing
    /// none, unless they continue exactly where the written and queued ones end: a failed
    /// write fails everything queued, and a batch reserved before the caller learned of it
    /// would otherwise be written after a gap.
    pub fn enqueue(
        &self,
        batches: Vec<(BatchHeader, Bytes)>,
        roll: RollSettings,
    ) -> Result<Ticket, LogError> {
        let mut s = self.st.borrow_mut();
        if let Some(why) = &s.fenced {
            return Err(LogError::Fenced(why.clone()));
        }
        let mut next = s.reserved_end;
        for (h, _) in &batches {
            if h.base_offset != next {
                return Err(LogError::OutOfOrder {
                    expected: next,
                    got: h.base_offset,
                });
            }
            next = h.last_offset() + 1;
        }
        s.roll = roll;
        let target = if batches.is_empty() {
            s.written_end
        } else {
            next
        };
        s.reserved_end = next;
        s.pending.extend(batches);
        Ok(Ticket { gen: s.gen, target })
    }

    /// Asks the writer to sync through `target` in the round that writes it, so an acks=all
    /// append's fdatasync starts with its write instead of after it is answered as stored.
    pub fn want_sync(&self, target: i64) {
        if self.policy == FsyncPolicy::Always {
            let mut s = self.st.borrow_mut();
            s.want_sync = s.want_sync.max(target);
        }
    }

    /// A ticket in the current generation for everything below `reserved_end`: what an
    /// acks=all append waits on once it is written, to be synced.
    pub fn ticket_for_all(&self, reserved_end: i64) -> Ticket {
        let s = self.st.borrow();
        Ticket {
            gen: s.gen,
            target: reserved_end,
        }
    }

    /// Waits until the ticket's batches are written, and synced when `durable` and the
    /// policy is `always`. Becomes the writer when none is running.
    pub async fn wait(&self, t: Ticket, durable: bool) -> Result<(), LogError> {
        let durable = durable && self.policy == FsyncPolicy::Always;
        if durable {
            let mut s = self.st.borrow_mut();
            s.want_sync = s.want_sync.max(t.target);
        }
        loop {
            // Checked before listening too: most waits find their round done (a persist right
            // after its append's round synced), and a listener is an allocation.
            match self.progress(&t, durable)? {
                Progress::Done => return Ok(()),
                Progress::Idle => self.write_round_boxed().await,
                Progress::Busy => {
                    let listener = self.changed.listen();
                    // Again after listening, so a change between the two is not missed.
                    match self.progress(&t, durable)? {
                        Progress::Done => return Ok(()),
                        Progress::Idle => self.write_round_boxed().await,
                        Progress::Busy => listener.await,
                    }
                }
            }
        }
    }

    /// [`Self::write_round`] on the heap: inline, its state (~2.6 KB) made every waiter's
    /// future that big, and the stores box one per append and one per persist. Past 1 KiB
    /// malloc serves a block from its shared arena under its lock instead of the thread's own
    /// cache, and those locks were the shards' `futex` waits (perf/results/allocs-ad39327).
    /// A round is boxed once, by the waiter that becomes the writer.
    async fn write_round_boxed(&self) {
        Box::pin(self.write_round()).await
    }

    /// Where a ticket's batches stand: written (synced when `durable`), or waiting behind a
    /// writer, or waiting with none running; an error when they never will be.
    fn progress(&self, t: &Ticket, durable: bool) -> Result<Progress, LogError> {
        let s = self.st.borrow();
        let end = if durable { s.synced_end } else { s.written_end };
        if end >= t.target {
            return Ok(Progress::Done);
        }
        if s.gen != t.gen {
            return Err(s
                .error
                .clone()
                .unwrap_or_else(|| LogError::Write("write failed".into())));
        }
        if let Some(why) = &s.fenced {
            return Err(LogError::Fenced(why.clone()));
        }
        if t.target > s.reserved_end {
            // Nothing queued reaches it: no round would ever complete it.
            return Err(LogError::OutOfOrder {
                expected: s.reserved_end,
                got: t.target,
            });
        }
        Ok(if s.writing {
            Progress::Busy
        } else {
            Progress::Idle
        })
    }

    async fn write_round(&self) {
        self.st.borrow_mut().writing = true;
        let res = self.write_loop().await;
        {
            let mut s = self.st.borrow_mut();
            s.writing = false;
            if let Err(e) = res {
                tracing::error!(dir = %self.dir.display(), error = %e, "log write failed; failing queued appends");
                s.gen += 1;
                s.pending.clear();
                s.reserved_end = s.written_end;
                s.want_sync = s.synced_end;
                s.error = Some(e);
            }
        }
        self.changed.notify(usize::MAX);
    }

    async fn write_loop(&self) -> Result<(), LogError> {
        if let Some(why) = &self.st.borrow().fenced {
            return Err(LogError::Fenced(why.clone()));
        }
        loop {
            let (batches, roll) = {
                let mut s = self.st.borrow_mut();
                (std::mem::take(&mut s.pending), s.roll)
            };
            if !batches.is_empty() {
                let started = std::time::Instant::now();
                let written = self.write_batches(batches, roll).await;
                let synced_for = written.as_ref().map_or(Duration::ZERO, |d| *d);
                record(
                    StorageOp::LocalAppend,
                    started.elapsed().saturating_sub(synced_for),
                    written.is_ok(),
                );
                written?;
                // acks=1 waiters can go now; durable ones wait for the sync below.
                self.changed.notify(usize::MAX);
            }
            let want_sync = {
                let s = self.st.borrow();
                s.want_sync > s.synced_end && s.written_end > s.synced_end
            };
            if want_sync {
                self.sync_written().await?;
                self.changed.notify(usize::MAX);
            } else if self.st.borrow().pending.is_empty() {
                return Ok(());
            }
        }
    }

    /// Makes everything written so far durable: fdatasync of the active segment (sealed ones
    /// were synced when sealed), after writing again what a failed fdatasync may have lost.
    async fn sync_written(&self) -> Result<(), LogError> {
        let _one_at_a_time = self.sync_lock.lock().await;
        let (active, end, rewrite) = {
            let s = self.st.borrow();
            if let Some(why) = &s.fenced {
                return Err(LogError::Fenced(why.clone()));
            }
            let active = s.segments.values().next_back().and_then(|seg| {
                let h = seg.sync_handle()?;
                Some((seg.base, h, seg.size, seg.next_offset))
            });
            (active, s.written_end, s.rewrite)
        };
        if let Some((base, handle, size, next)) = active {
            if rewrite {
                self.rewrite_unsynced(base).await?;
            }
            let started = std::time::Instant::now();
            let synced = handle.fdatasync().await;
            self.settle_sync(
                &mut self.st.borrow_mut(),
                synced,
                started.elapsed(),
                Some((base, size, next)),
            )?;
        }
        let mut s = self.st.borrow_mut();
        s.synced_end = s.synced_end.max(end);
        Ok(())
    }

    /// Takes the outcome of an fdatasync of the active segment, `covered` being its base, the
    /// bytes the sync covered and the offset after their batches: a failure makes the next
    /// sync write the unsynced bytes again first, a success moves the segment's synced marks.
    /// Both syncs of the log (alone, or with a round's last write) end here.
    fn settle_sync(
        &self,
        s: &mut State,
        synced: std::io::Result<()>,
        took: Duration,
        covered: Option<(i64, u64, i64)>,
    ) -> Result<(), LogError> {
        record(StorageOp::LocalSync, took, synced.is_ok());
        if let Err(e) = synced {
            s.rewrite = true;
            return Err(LogError::Write(format!(
                "fdatasync in {}: {e}",
                self.dir.display()
            )));
        }
        s.rewrite = false;
        let Some((base, size, next)) = covered else {
            return Ok(());
        };
        if let Some(seg) = s.segments.get_mut(&base) {
            seg.synced_len = seg.synced_len.max(size);
            seg.synced_next = seg.synced_next.max(next);
        }
        Ok(())
    }

    /// Writes the active segment's bytes past its last good sync again, from what reads
    /// back, once they prove to be the batches written there; fences the log if they do not.
    async fn rewrite_unsynced(&self, base: i64) -> Result<(), LogError> {
        let found = {
            let s = self.st.borrow();
            s.segments.get(&base).and_then(|seg| {
                let h = seg.sync_handle()?;
                Some((
                    h,
                    seg.file(),
                    seg.synced_len,
                    seg.size,
                    seg.synced_next,
                    seg.next_offset,
                ))
            })
        };
        let Some((handle, file, mut pos, size, mut expect, end)) = found else {
            return Ok(());
        };
        let mut chunk = READ_CHUNK;
        while pos < size {
            let len = chunk.min((size - pos) as usize);
            let data = segment::read(&file, pos, len)
                .await
                .map_err(|e| LogError::Write(format!("reading back unsynced bytes: {e}")))?;
            let (batches, stop) = scan(&data, expect, true);
            let mut good = 0;
            for f in batches {
                if f.header.base_offset != expect {
                    break;
                }
                expect = f.header.last_offset() + 1;
                good = f.pos + f.header.total_len();
            }
            if good == 0 {
                match stop {
                    Stop::NeedMore { total, .. } if data.len() == len && total > len => {
                        chunk = total;
                        continue;
                    }
                    _ => break,
                }
            }
            handle
                .rewrite(pos, data.slice(..good))
                .await
                .map_err(|e| LogError::Write(e.to_string()))?;
            pos += good as u64;
        }
        if pos == size && expect == end {
            return Ok(());
        }
        let why = format!(
            "{}: after a failed fdatasync, bytes {pos}..{size} of segment {base} no longer \
             read back as the batches written there",
            self.dir.display()
        );
        tracing::error!(dir = %self.dir.display(), "{why}; refusing writes until restart");
        self.st.borrow_mut().fenced = Some(why.clone());
        Err(LogError::Fenced(why))
    }

    /// Syncs everything written when the policy is `interval` (called by the shard timer).
    /// A fenced log is left alone: it said why once, at error level.
    pub async fn sync_if_dirty(&self) -> Result<(), LogError> {
        {
            let s = self.st.borrow();
            if s.written_end <= s.synced_end || s.writing || s.fenced.is_some() {
                return Ok(());
            }
        }
        self.sync_written().await
    }

    /// Writes the round's batches (rolling segments as needed); returns the time spent in an
    /// fdatasync done with the last write.
    async fn write_batches(
        &self,
        batches: Vec<(BatchHeader, Bytes)>,
        roll: RollSettings,
    ) -> Result<Duration, LogError> {
        let mut sync_time = Duration::ZERO;
        let mut i = 0;
        while i < batches.len() {
            let must_roll = {
                let s = self.st.borrow();
                match s.segments.values().next_back() {
                    None => true,
                    Some(seg) => {
                        !seg.is_active()
                            || (seg.size > 0
                                && (seg.size + batches[i].1.len() as u64 > roll.segment_bytes
                                    || seg.opened.elapsed()
                                        >= Duration::from_millis(roll.segment_ms)))
                    }
                }
            };
            if must_roll {
                self.roll_to(batches[i].0.base_offset).await?;
            }
            let mut appender = {
                let mut s = self.st.borrow_mut();
                s.segments
                    .values_mut()
                    .next_back()
                    .and_then(Segment::take_appender)
                    .ok_or_else(|| LogError::Write("no active segment".into()))?
            };
            appender.set_room_limit(roll.segment_bytes);
            let mut parts = Vec::new();
            let mut written = Vec::new();
            let mut pos = appender.len();
            while i < batches.len() {
                let (h, data) = &batches[i];
                if !parts.is_empty() && pos + data.len() as u64 > roll.segment_bytes {
                    break;
                }
                parts.push(data.clone());
                written.push((*h, pos));
                pos += data.len() as u64;
                i += 1;
            }
            // A round a durable waiter asked for is synced right after its last write, in the
            // same trip to the pool, unless a failed sync left bytes to write again first.
            let sync_now = {
                let s = self.st.borrow();
                i == batches.len() && s.want_sync > s.synced_end && !s.rewrite
            };
            let _one_sync = match sync_now {
                true => Some(self.sync_lock.lock().await),
                false => None,
            };
            let (res, synced) = match sync_now {
                true => match appender.append_and_sync(&parts).await {
                    Ok(synced) => (Ok(()), Some(synced)),
                    Err(e) => (Err(e), None),
                },
                false => (appender.append(&parts).await, None),
            };
            let mut s = self.st.borrow_mut();
            let ok = res.is_ok();
            if let Some(seg) = s.segments.values_mut().next_back() {
                seg.put_appender(appender, if ok { &written } else { &[] });
            }
            res.map_err(|e| LogError::Write(e.to_string()))?;
            if let Some((h, _)) = written.last() {
                s.written_end = h.last_offset() + 1;
            }
            if let Some((synced, took)) = synced {
                sync_time += took;
                let covered = s
                    .segments
                    .values()
                    .next_back()
                    .map(|seg| (seg.base, seg.size, seg.next_offset));
                self.settle_sync(&mut s, synced, took, covered)?;
                s.synced_end = s.synced_end.max(s.written_end);
            }
        }
        Ok(sync_time)
    }

    /// Seals the active segment and starts a new one at `base`.
    async fn roll_to(&self, base: i64) -> Result<(), LogError> {
        tracing::debug!(dir = %self.dir.display(), base, "rolling to a new segment");
        let sync = self.policy != FsyncPolicy::Never;
        let active = self
            .st
            .borrow_mut()
            .segments
            .values_mut()
            .next_back()
            .and_then(Segment::take_appender);
        if let Some(mut appender) = active {
            // Nothing writes or syncs a sealed segment again, so it is sealed only at its
            // logical length (no bytes of a failed write past it, which recovery would take
            // for damage and drop every later segment) and on stable storage; until then it
            // stays active and the next round retries.
            let trimmed = appender.trim().await;
            if let Some(seg) = self.st.borrow_mut().segments.values_mut().next_back() {
                seg.put_appender(appender, &[]);
            }
            trimmed.map_err(|e| LogError::Write(format!("sealing a segment: {e}")))?;
            if sync {
                self.sync_written().await?;
            }
        }
        let sealing = self
            .st
            .borrow_mut()
            .segments
            .values_mut()
            .next_back()
            .and_then(Segment::begin_seal);
        if let Some(job) = sealing {
            job.finish(sync)
                .await
                .map_err(|e| LogError::Write(format!("sealing a segment: {e}")))?;
        }
        let fresh = self.st.borrow().segments.is_empty();
        if fresh {
            std::fs::create_dir_all(&self.dir)
                .map_err(|e| LogError::Write(format!("creating {}: {e}", self.dir.display())))?;
        }
        let seg = Segment::create(&self.dir, base, direct_appends(self.policy))
            .await
            .map_err(|e| LogError::Write(e.to_string()))?;
        if sync {
            // The new file's directory entry must survive a crash too.
            super::sync_dir(&self.dir).await?;
            if fresh {
                if let Some(parent) = self.dir.parent() {
                    super::sync_dir(parent).await?;
                }
            }
        }
        self.st.borrow_mut().segments.insert(base, seg);
        Ok(())
    }

    /// Whole batches from the one containing `offset`, below `hw`, up to `max_bytes` (at
    /// least one batch: Kafka's first-batch rule), from a single segment.
    pub async fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        hw: i64,
    ) -> Result<Vec<Bytes>, LogError> {
        let found = {
            let s = self.st.borrow();
            let seg = s
                .segments
                .range(..=offset)
                .next_back()
                .map(|(_, seg)| seg)
                .filter(|seg| offset < seg.next_offset)
                // The next segment holding a batch: cleaning may leave sealed ones empty.
                .or_else(|| {
                    s.segments
                        .range(offset + 1..)
                        .map(|(_, seg)| seg)
                        .find(|seg| seg.next_offset > seg.base)
                });
            seg.map(|seg| (seg.file(), seg.position_for(offset), seg.size))
        };
        let Some((file, mut pos, size)) = found else {
            return Ok(Vec::new());
        };
        let mut chunk = (max_bytes.saturating_add(2 * super::index::INDEX_INTERVAL as usize))
            .clamp(64 * 1024, READ_CHUNK);
        let mut out = Vec::new();
        let mut bytes = 0usize;
        while pos < size {
            let len = chunk.min((size - pos) as usize);
            let data = segment::read(&file, pos, len)
                .await
                .map_err(|e| LogError::Read(e.to_string()))?;
            let (batches, stop) = scan(&data, -1, false);
            for f in batches {
                let h = f.header;
                if h.last_offset() < offset {
                    continue;
                }
                if h.base_offset >= hw {
                    return Ok(out);
                }
                if !out.is_empty() && bytes + h.total_len() > max_bytes {
                    return Ok(out);
                }
                bytes += h.total_len();
                out.push(data.slice(f.pos..f.pos + h.total_len()));
                if bytes >= max_bytes {
                    return Ok(out);
                }
            }
            match stop {
                Stop::NeedMore { pos: p, total } if data.len() == len => {
                    pos += p as u64;
                    chunk = chunk.max(total);
                }
                _ => break,
            }
        }
        Ok(out)
    }

    /// ListOffsets by timestamp on the segments: (timestamp, offset) of the first record with
    /// timestamp >= `ts` at or after `from`, if any.
    pub async fn find_timestamp(
        &self,
        ts: i64,
        from: i64,
        hw: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        let starts: Vec<i64> = {
            let s = self.st.borrow();
            s.segments
                .values()
                .filter(|seg| seg.next_offset > from && seg.index.max_timestamp() >= ts)
                .map(|seg| {
                    let rel = seg.index.offset_for_time(ts).unwrap_or(0);
                    (seg.base + i64::from(rel)).max(from)
                })
                .collect()
        };
        for mut at in starts {
            loop {
                let batches = self.read(at, READ_CHUNK, hw).await?;
                let Some(last) = batches.last() else { break };
                let next = crate::record::batch::BatchHeader::parse(last)
                    .map(|h| h.last_offset() + 1)
                    .map_err(|e| LogError::Read(e.to_string()))?;
                for b in &batches {
                    let Ok(h) = BatchHeader::parse(b) else {
                        continue;
                    };
                    if h.max_timestamp >= ts {
                        if let Some((off, found_ts)) = first_offset_at_or_after(b, ts) {
                            if off >= from {
                                return Ok(Some((found_ts, off)));
                            }
                        }
                    }
                }
                if next <= at {
                    break;
                }
                at = next;
            }
        }
        Ok(None)
    }

    /// Deletes sealed segments wholly below `offset` (the active segment always stays).
    /// Returns the bytes deleted.
    pub fn delete_below(&self, offset: i64) -> u64 {
        let mut s = self.st.borrow_mut();
        if s.writing {
            // A seal may be in flight; retention runs again on the next tick.
            return 0;
        }
        let doomed: Vec<i64> = s
            .segments
            .values()
            .filter(|seg| !seg.is_active() && seg.next_offset <= offset)
            .map(|seg| seg.base)
            .collect();
        let mut freed = 0;
        for base in doomed {
            if let Some(seg) = s.segments.remove(&base) {
                seg.remove_files();
                freed += seg.size;
            }
        }
        freed
    }

    /// Sealed segments oldest first: (base, next offset, size, max timestamp).
    pub fn sealed_segments(&self) -> Vec<(i64, i64, u64, i64)> {
        self.st
            .borrow()
            .segments
            .values()
            .filter(|seg| !seg.is_active())
            .map(|seg| {
                (
                    seg.base,
                    seg.next_offset,
                    seg.size,
                    seg.index.max_timestamp(),
                )
            })
            .collect()
    }

    /// The sealed segments from the first on, as long as each one's newest batch is at most
    /// `max_timestamp` (what the cleaner may map and rewrite).
    pub(super) fn sealed_files(&self, max_timestamp: i64) -> Vec<super::cleaner::SealedFile> {
        self.st
            .borrow()
            .segments
            .values()
            .take_while(|seg| !seg.is_active() && seg.index.max_timestamp() <= max_timestamp)
            .map(|seg| super::cleaner::SealedFile {
                base: seg.base,
                next_offset: seg.next_offset,
                path: seg.path().to_path_buf(),
                file: seg.file(),
                size: seg.size,
            })
            .collect()
    }

    /// Whether the sealed segment at `base` is still part of the log.
    pub(super) fn holds_sealed(&self, base: i64) -> bool {
        self.st
            .borrow()
            .segments
            .get(&base)
            .is_some_and(|seg| !seg.is_active())
    }

    /// Removes the sealed segment at `base` and its files unless it is the log's first;
    /// whether it did.
    pub(super) fn drop_sealed_unless_first(&self, base: i64) -> bool {
        let mut s = self.st.borrow_mut();
        let first = s.segments.keys().next().copied();
        if first == Some(base) || s.segments.get(&base).is_none_or(|seg| seg.is_active()) {
            return false;
        }
        match s.segments.remove(&base) {
            Some(seg) => {
                seg.remove_files();
                true
            }
            None => false,
        }
    }

    /// Puts a cleaned segment in place of the sealed one with its base; false if that one
    /// is gone meanwhile (retention, topic deleted).
    pub(super) fn replace_sealed(&self, cleaned: Segment) -> bool {
        let mut s = self.st.borrow_mut();
        match s.segments.get_mut(&cleaned.base) {
            Some(seg) if !seg.is_active() => {
                *seg = cleaned;
                true
            }
            _ => false,
        }
    }

    /// The broker is stopping: cuts the active segment's O_DIRECT padding, so that after a
    /// clean stop the segment files hold exactly the log (recovery would cut it too). Skipped
    /// while a write round is running: nothing waits for it any more, and recovery copes.
    pub async fn close(&self) {
        let appender = {
            let mut s = self.st.borrow_mut();
            if s.writing {
                return;
            }
            // Marked as writing, so no round starts while the appender is out.
            let a = s
                .segments
                .values_mut()
                .next_back()
                .and_then(Segment::take_appender);
            s.writing = a.is_some();
            a
        };
        let Some(mut appender) = appender else {
            return;
        };
        if let Err(e) = appender.trim().await {
            tracing::warn!(dir = %self.dir.display(), error = %e,
                "could not cut the active segment's padding at shutdown; recovery will");
        }
        {
            let mut s = self.st.borrow_mut();
            s.writing = false;
            if let Some(seg) = s.segments.values_mut().next_back() {
                seg.put_appender(appender, &[]);
            }
        }
        // Anyone who came while the appender was out waits for this.
        self.changed.notify(usize::MAX);
    }

    /// Removes the whole partition directory (topic deleted).
    pub fn remove_all(&self) {
        let mut s = self.st.borrow_mut();
        s.segments.clear();
        s.pending.clear();
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %self.dir.display(), error = %e, "could not delete partition directory");
            }
        }
    }
}
