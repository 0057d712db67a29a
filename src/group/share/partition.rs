//! One share-partition: a share group's state of one topic partition, as Kafka's
//! SharePartition keeps it (KIP-932). Offsets below the share-partition start offset
//! (`start`, Kafka's SPSO) are finished for the group; offsets in `[start, end)` are in
//! flight, each AVAILABLE, ACQUIRED by one member under a lock until a deadline,
//! ACKNOWLEDGED or ARCHIVED (the last two final); offsets from `end` on have not been handed
//! out yet. A record goes back to AVAILABLE when released or when its lock expires, and is
//! ARCHIVED instead once it was delivered `delivery_limit` times. The start moves past the
//! leading run of final offsets.
//!
//! State is kept per offset: the window is bounded by `max_in_flight` (Kafka's
//! group.share.partition.max.record.locks, 2000 by default) plus the one log batch that may
//! overshoot it, so memory per share-partition stays small and fixed. Time is passed in, so
//! every transition is deterministic and unit-tested.

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::error::KelpError;

/// Where a record of the window is (Kafka's RecordState; the codes are those persisted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    /// May be acquired.
    Available = 0,
    /// Handed to a member, locked until a deadline.
    Acquired = 1,
    /// Accepted by a member: done.
    Acknowledged = 2,
    /// Rejected, a gap, beyond the delivery limit, or aborted: done.
    Archived = 4,
}

impl RecordState {
    /// Whether the record is done for the group (acknowledged or archived).
    pub fn is_final(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// How a member acknowledges a record (ShareFetch/ShareAcknowledge `AcknowledgeTypes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckType {
    /// 0: not a record (a control batch, a compacted-away offset): archived.
    Gap,
    /// 1: processed: acknowledged.
    Accept,
    /// 2: give it back for another delivery: available (archived at the delivery limit).
    Release,
    /// 3: unprocessable: archived.
    Reject,
}

impl AckType {
    /// The type of wire code `code` (v1: 0-3).
    pub fn from_code(code: i8) -> Option<AckType> {
        Some(match code {
            0 => AckType::Gap,
            1 => AckType::Accept,
            2 => AckType::Release,
            3 => AckType::Reject,
            _ => return None,
        })
    }
}

/// Limits of a share-partition (broker and group configs).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// group.share.delivery.count.limit: deliveries before a record is archived (Kafka: 5).
    pub delivery_limit: u16,
    /// group.share.partition.max.record.locks: most offsets in flight (Kafka: 2000).
    pub max_in_flight: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            delivery_limit: 5,
            max_in_flight: 2000,
        }
    }
}

/// A run of acquired offsets handed to a member (ShareFetch's `AcquiredRecords`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    /// First offset.
    pub first: i64,
    /// Last offset (inclusive).
    pub last: i64,
    /// How many times these were delivered, this time included.
    pub delivery_count: u16,
}

/// One acknowledgement batch: offsets `first..=last`, one type for all or one per offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckBatch {
    /// First offset.
    pub first: i64,
    /// Last offset (inclusive).
    pub last: i64,
    /// One type for the whole range, or one per offset.
    pub types: Vec<AckType>,
}

/// A run of final or available offsets as persisted (Kafka's StateBatches): ACQUIRED is
/// never persisted, so after a restart those records are available again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBatch {
    /// First offset.
    pub first: i64,
    /// Last offset (inclusive).
    pub last: i64,
    /// AVAILABLE (0), ACKNOWLEDGED (2) or ARCHIVED (4).
    pub state: RecordState,
    /// Deliveries so far.
    pub delivery_count: u16,
}

#[derive(Debug, Clone, PartialEq)]
struct Slot {
    state: RecordState,
    deliveries: u16,
    /// The member holding it while ACQUIRED.
    owner: Option<Rc<str>>,
    /// Its lock's deadline while ACQUIRED.
    until: Option<Instant>,
}

impl Slot {
    fn new() -> Self {
        Slot {
            state: RecordState::Available,
            deliveries: 0,
            owner: None,
            until: None,
        }
    }
}

/// What one acknowledgement changed, to put back if it could not be stored
/// ([`SharePartition::undo`]): each offset it changed, its slot before and its state after.
#[derive(Debug, Clone, PartialEq)]
pub struct AckUndo {
    changed: Vec<(i64, Slot, RecordState)>,
}

/// One share group's state of one partition (see the module docs).
#[derive(Debug, Clone)]
pub struct SharePartition {
    start: i64,
    /// Slot `i` is offset `start + i`; its length is `end - start`.
    slots: VecDeque<Slot>,
    limits: Limits,
}

impl SharePartition {
    /// A share-partition starting at `start` (chosen by share.auto.offset.reset) with
    /// nothing in flight.
    pub fn new(start: i64, limits: Limits) -> Self {
        SharePartition {
            start,
            slots: VecDeque::new(),
            limits,
        }
    }

    /// A share-partition from its persisted state: `start` and the runs above it. Offsets
    /// between runs were never final: they are available again.
    pub fn restore(start: i64, batches: &[StateBatch], limits: Limits) -> Self {
        let mut p = SharePartition::new(start, limits);
        let end = batches.iter().map(|b| b.last + 1).max().unwrap_or(start);
        let len = usize::try_from(end - start).unwrap_or(0);
        p.slots = (0..len).map(|_| Slot::new()).collect();
        for b in batches {
            for o in b.first.max(start)..=b.last {
                if let Some(s) = p.slot_mut(o) {
                    s.state = match b.state {
                        RecordState::Acquired => RecordState::Available,
                        other => other,
                    };
                    s.deliveries = b.delivery_count;
                }
            }
        }
        p.advance();
        p
    }

    /// The share-partition start offset (SPSO): everything below it is done.
    pub fn start(&self) -> i64 {
        self.start
    }

    /// The offset after the last one handed out (Kafka's SPEO + 1).
    pub fn end(&self) -> i64 {
        self.start + self.slots.len() as i64
    }

    fn slot_mut(&mut self, offset: i64) -> Option<&mut Slot> {
        let i = usize::try_from(offset - self.start).ok()?;
        self.slots.get_mut(i)
    }

    fn slot(&self, offset: i64) -> Option<&Slot> {
        let i = usize::try_from(offset - self.start).ok()?;
        self.slots.get(i)
    }

    /// Where the next fetch for this share-partition should read from: the first available
    /// offset in flight, else the end. None when the window is full and nothing in it is
    /// available (the fetch waits for acknowledgements, releases or expiries).
    pub fn next_fetch_offset(&self) -> Option<i64> {
        if let Some(i) = self
            .slots
            .iter()
            .position(|s| s.state == RecordState::Available)
        {
            return Some(self.start + i as i64);
        }
        (self.slots.len() < self.limits.max_in_flight).then(|| self.end())
    }

    /// Acquires for `member`, until `now + lock`, at most about `max_records` records of the
    /// log batches read (`batches`: each batch's first and last offset, in order, below the
    /// readable end). Available offsets in flight go first; then whole batches past the end
    /// (a batch that crosses the limit is taken whole, as Kafka does, so a client is never
    /// handed part of a batch it must then skip), while the window has room.
    pub fn acquire(
        &mut self,
        member: &Rc<str>,
        batches: &[(i64, i64)],
        max_records: usize,
        now: Instant,
        lock: Duration,
    ) -> Vec<Acquired> {
        let until = now + lock;
        let mut out: Vec<Acquired> = Vec::new();
        let mut taken = 0usize;
        let take = |p: &mut SharePartition, o: i64, out: &mut Vec<Acquired>| {
            let Some(s) = p.slot_mut(o) else { return };
            s.state = RecordState::Acquired;
            s.deliveries = s.deliveries.saturating_add(1);
            s.owner = Some(member.clone());
            s.until = Some(until);
            let count = s.deliveries;
            match out.last_mut() {
                Some(a) if a.last + 1 == o && a.delivery_count == count => a.last = o,
                _ => out.push(Acquired {
                    first: o,
                    last: o,
                    delivery_count: count,
                }),
            }
        };
        // Available offsets the read covered, in order.
        let covered = |o: i64| batches.iter().any(|&(f, l)| f <= o && o <= l);
        let end = self.end();
        for o in self.start..end {
            if taken >= max_records {
                break;
            }
            if self
                .slot(o)
                .is_some_and(|s| s.state == RecordState::Available)
                && covered(o)
            {
                take(self, o, &mut out);
                taken += 1;
            }
        }
        // New batches, whole, while there is room.
        for &(first, last) in batches {
            if last < self.end() {
                continue;
            }
            if taken >= max_records || self.slots.len() >= self.limits.max_in_flight {
                break;
            }
            // A batch starting below the end (read from inside one) is taken from the end.
            let from = first.max(self.end());
            // Offsets missing between the end and the batch (compacted away, removed) are
            // gaps no member gets: archived, so the start can pass them.
            while self.end() < from {
                let mut s = Slot::new();
                s.state = RecordState::Archived;
                self.slots.push_back(s);
            }
            for o in from..=last {
                self.slots.push_back(Slot::new());
                take(self, o, &mut out);
                taken += 1;
            }
        }
        out
    }

    /// Applies `member`'s acknowledgements, all or none: the first batch that does not apply
    /// refuses the partition's whole set, nothing changed (INVALID_REQUEST for a malformed
    /// batch or offsets never handed out, INVALID_RECORD_STATE for records the member does
    /// not hold: their lock expired, or another member has them now). Offsets below the
    /// start are ignored (already done). Returns what it changed, for [`Self::undo`].
    pub fn acknowledge(&mut self, member: &str, acks: &[AckBatch]) -> Result<AckUndo, KelpError> {
        let invalid = |why: &str| Err(KelpError::InvalidRequest(why.to_string()));
        let mut prev_last: Option<i64> = None;
        for b in acks {
            if b.first > b.last {
                return invalid("first offset after last offset");
            }
            if prev_last.is_some_and(|p| b.first <= p) {
                return invalid("acknowledgement batches out of order");
            }
            prev_last = Some(b.last);
            let n = b.last - b.first + 1;
            if b.types.is_empty() || (b.types.len() != 1 && b.types.len() as i64 != n) {
                return invalid("acknowledge types must be one, or one per offset");
            }
            if b.last >= self.end() {
                return invalid("offsets never acquired");
            }
            for o in b.first.max(self.start)..=b.last {
                let s = self.slot(o).ok_or(KelpError::InvalidRecordState)?;
                if s.state != RecordState::Acquired || s.owner.as_deref() != Some(member) {
                    return Err(KelpError::InvalidRecordState);
                }
            }
        }
        let mut undo = AckUndo {
            changed: Vec::new(),
        };
        for b in acks {
            for o in b.first.max(self.start)..=b.last {
                let t = if b.types.len() == 1 {
                    b.types[0]
                } else {
                    b.types[(o - b.first) as usize]
                };
                let limit = self.limits.delivery_limit;
                if let Some(s) = self.slot_mut(o) {
                    let before = s.clone();
                    s.owner = None;
                    s.until = None;
                    s.state = match t {
                        AckType::Accept => RecordState::Acknowledged,
                        AckType::Gap | AckType::Reject => RecordState::Archived,
                        AckType::Release if s.deliveries >= limit => RecordState::Archived,
                        AckType::Release => RecordState::Available,
                    };
                    undo.changed.push((o, before, s.state));
                }
            }
        }
        self.advance();
        Ok(undo)
    }

    /// Puts back what an acknowledgement changed when it could not be stored, and only
    /// that: what happened since stays (a released record another member acquired
    /// meanwhile stays with that member). Offsets the start moved past come back into the
    /// window; final ones among them that were not this acknowledgement's stay final.
    pub fn undo(&mut self, undo: AckUndo) {
        let Some(lowest) = undo.changed.iter().map(|c| c.0).min() else {
            return;
        };
        let passed = self.start;
        while self.start > lowest {
            self.start -= 1;
            let mut s = Slot::new();
            s.state = RecordState::Acknowledged;
            self.slots.push_front(s);
        }
        for (o, before, after) in undo.changed {
            if o < passed {
                // Back from below the old start: nobody can have touched it since.
                if let Some(s) = self.slot_mut(o) {
                    *s = before;
                }
            } else if let Some(s) = self.slot_mut(o) {
                if s.state == after && s.owner.is_none() && s.deliveries == before.deliveries {
                    *s = before;
                }
            }
        }
        self.advance();
    }

    /// Gives back every record `member` holds (its share session closed or its connection
    /// went): available again with their delivery counts (Kafka 4.2), archived at the limit.
    /// How many were released.
    pub fn release_member(&mut self, member: &str) -> usize {
        let limit = self.limits.delivery_limit;
        let mut n = 0;
        for s in self.slots.iter_mut() {
            if s.state == RecordState::Acquired && s.owner.as_deref() == Some(member) {
                Self::unlock(s, limit);
                n += 1;
            }
        }
        self.advance();
        n
    }

    /// Ends the locks due by `now`: their records are available again (archived at the
    /// delivery limit). How many expired.
    pub fn expire_locks(&mut self, now: Instant) -> usize {
        let limit = self.limits.delivery_limit;
        let mut n = 0;
        for s in self.slots.iter_mut() {
            if s.state == RecordState::Acquired && s.until.is_some_and(|u| u <= now) {
                Self::unlock(s, limit);
                n += 1;
            }
        }
        self.advance();
        n
    }

    /// The earliest lock deadline, for the timer that expires it.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.slots.iter().filter_map(|s| s.until).min()
    }

    fn unlock(s: &mut Slot, limit: u16) {
        s.owner = None;
        s.until = None;
        s.state = if s.deliveries >= limit {
            RecordState::Archived
        } else {
            RecordState::Available
        };
    }

    /// The log start moved to `log_start` (retention, DeleteRecords): what is below it can
    /// no longer be delivered. In-flight records below it are archived, and the start moves
    /// up to it.
    pub fn log_start_moved(&mut self, log_start: i64) {
        if log_start <= self.start {
            return;
        }
        while self.start < log_start {
            if self.slots.pop_front().is_none() {
                break;
            }
            self.start += 1;
        }
        self.start = self.start.max(log_start);
        self.advance();
    }

    /// Moves the start past the leading final offsets.
    fn advance(&mut self) {
        while self.slots.front().is_some_and(|s| s.state.is_final()) {
            self.slots.pop_front();
            self.start += 1;
        }
    }

    /// The state to persist: the start and the runs above it that are not acquired (an
    /// acquired record is persisted as available: after a restart nobody holds it).
    pub fn state_batches(&self) -> Vec<StateBatch> {
        let mut out: Vec<StateBatch> = Vec::new();
        for (i, s) in self.slots.iter().enumerate() {
            let o = self.start + i as i64;
            let state = match s.state {
                RecordState::Acquired => RecordState::Available,
                other => other,
            };
            match out.last_mut() {
                Some(b)
                    if b.last + 1 == o && b.state == state && b.delivery_count == s.deliveries =>
                {
                    b.last = o
                }
                _ => out.push(StateBatch {
                    first: o,
                    last: o,
                    state,
                    delivery_count: s.deliveries,
                }),
            }
        }
        out
    }

    /// How many offsets in flight are done (Kafka's DeliveryCompleteCount, for lag).
    pub fn completed(&self) -> i64 {
        self.slots.iter().filter(|s| s.state.is_final()).count() as i64
    }

    /// The state of `offset` (None outside the window).
    pub fn state_of(&self, offset: i64) -> Option<RecordState> {
        self.slot(offset).map(|s| s.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: Duration = Duration::from_secs(30);

    fn m(s: &str) -> Rc<str> {
        Rc::from(s)
    }

    fn ack(first: i64, last: i64, t: AckType) -> AckBatch {
        AckBatch {
            first,
            last,
            types: vec![t],
        }
    }

    #[test]
    fn whole_batches_are_acquired_and_accepted_records_move_the_start() {
        let now = Instant::now();
        let mut p = SharePartition::new(10, Limits::default());
        assert_eq!(p.next_fetch_offset(), Some(10));
        // Batches 10-14 and 15-19; at most 3 records asked: the first batch is taken whole.
        let got = p.acquire(&m("a"), &[(10, 14), (15, 19)], 3, now, LOCK);
        assert_eq!(
            got,
            [Acquired {
                first: 10,
                last: 14,
                delivery_count: 1
            }]
        );
        assert_eq!((p.start(), p.end()), (10, 15));
        // Nothing is available in flight: the next read starts at the end.
        assert_eq!(p.next_fetch_offset(), Some(15));
        p.acknowledge("a", &[ack(10, 12, AckType::Accept)]).unwrap();
        assert_eq!(p.start(), 13);
        // One type per offset: 13 released, 14 rejected.
        p.acknowledge(
            "a",
            &[AckBatch {
                first: 13,
                last: 14,
                types: vec![AckType::Release, AckType::Reject],
            }],
        )
        .unwrap();
        assert_eq!(
            (p.start(), p.state_of(14)),
            (13, Some(RecordState::Archived))
        );
        assert_eq!(p.next_fetch_offset(), Some(13));
        // 13 goes again, delivery 2, to another member.
        let got = p.acquire(&m("b"), &[(10, 14)], 10, now, LOCK);
        assert_eq!(
            got,
            [Acquired {
                first: 13,
                last: 13,
                delivery_count: 2
            }]
        );
        p.acknowledge("b", &[ack(13, 13, AckType::Accept)]).unwrap();
        assert_eq!((p.start(), p.end()), (15, 15));
    }

    #[test]
    fn acknowledgements_are_checked_whole_and_applied_all_or_none() {
        let now = Instant::now();
        let mut p = SharePartition::new(0, Limits::default());
        p.acquire(&m("a"), &[(0, 9)], 100, now, LOCK);
        let bad = [
            (vec![ack(5, 4, AckType::Accept)], "reversed"),
            (
                vec![ack(0, 3, AckType::Accept), ack(3, 5, AckType::Accept)],
                "overlapping",
            ),
            (
                vec![AckBatch {
                    first: 0,
                    last: 2,
                    types: vec![AckType::Accept, AckType::Accept],
                }],
                "two types for three offsets",
            ),
            (vec![ack(8, 12, AckType::Accept)], "never acquired"),
        ];
        for (acks, why) in bad {
            assert!(
                matches!(p.acknowledge("a", &acks), Err(KelpError::InvalidRequest(_))),
                "{why}"
            );
        }
        // Another member's records, and a good batch before them: nothing applied.
        assert_eq!(
            p.acknowledge("b", &[ack(0, 1, AckType::Accept)]),
            Err(KelpError::InvalidRecordState)
        );
        assert_eq!(
            p.acknowledge(
                "a",
                &[ack(0, 1, AckType::Accept), ack(2, 2, AckType::Accept)]
            )
            .map(drop),
            Ok(())
        );
        assert_eq!(
            p.acknowledge(
                "a",
                &[ack(3, 3, AckType::Accept), ack(2, 2, AckType::Accept)]
            ),
            Err(KelpError::InvalidRequest(
                "acknowledgement batches out of order".into()
            ))
        );
        // Offsets below the start are done: acknowledging them again changes nothing.
        assert_eq!(p.start(), 3);
        assert_eq!(
            p.acknowledge(
                "a",
                &[AckBatch {
                    first: 1,
                    last: 3,
                    types: vec![AckType::Accept]
                }]
            )
            .map(drop),
            Ok(())
        );
        assert_eq!(p.start(), 4);
    }

    #[test]
    fn expired_locks_and_closed_sessions_give_records_back_until_the_delivery_limit() {
        let t0 = Instant::now();
        let limits = Limits {
            delivery_limit: 3,
            max_in_flight: 2000,
        };
        let mut p = SharePartition::new(0, limits);
        p.acquire(&m("a"), &[(0, 1)], 10, t0, LOCK);
        assert_eq!(p.next_expiry(), Some(t0 + LOCK));
        assert_eq!(p.expire_locks(t0 + LOCK - Duration::from_millis(1)), 0);
        assert_eq!(p.expire_locks(t0 + LOCK), 2);
        // The member's late acknowledgement finds the records no longer its own.
        assert_eq!(
            p.acknowledge("a", &[ack(0, 1, AckType::Accept)]),
            Err(KelpError::InvalidRecordState)
        );
        // Delivery 2, released by a session close; delivery 3 then expires: archived.
        p.acquire(&m("b"), &[(0, 1)], 10, t0, LOCK);
        assert_eq!(p.release_member("b"), 2);
        let third = p.acquire(&m("c"), &[(0, 1)], 10, t0, LOCK);
        assert_eq!(third[0].delivery_count, 3);
        p.expire_locks(t0 + LOCK);
        assert_eq!((p.start(), p.end()), (2, 2));
    }

    #[test]
    fn the_window_is_bounded_and_gaps_between_batches_are_archived() {
        let now = Instant::now();
        let limits = Limits {
            delivery_limit: 5,
            max_in_flight: 10,
        };
        let mut p = SharePartition::new(0, limits);
        // 0-7, a compacted-away hole at 8-9, then 10-17: the second batch crosses the bound
        // and is taken whole; a third is not.
        let got = p.acquire(&m("a"), &[(0, 7), (10, 17), (18, 20)], 100, now, LOCK);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(p.end(), 18);
        assert_eq!(p.state_of(8), Some(RecordState::Archived));
        assert_eq!(p.next_fetch_offset(), None, "full, nothing available");
        p.acknowledge("a", &[ack(0, 7, AckType::Accept)]).unwrap();
        // 8-9 were gaps: the start passes them.
        assert_eq!(p.start(), 10);
        assert_eq!(p.next_fetch_offset(), Some(18));
    }

    #[test]
    fn persisted_state_restores_without_locks() {
        let now = Instant::now();
        let mut p = SharePartition::new(0, Limits::default());
        p.acquire(&m("a"), &[(0, 5)], 100, now, LOCK);
        p.acknowledge(
            "a",
            &[ack(1, 1, AckType::Accept), ack(3, 3, AckType::Reject)],
        )
        .unwrap();
        let saved = p.state_batches();
        assert_eq!(
            saved
                .iter()
                .map(|b| (b.first, b.last, b.state))
                .collect::<Vec<_>>(),
            [
                (0, 0, RecordState::Available),
                (1, 1, RecordState::Acknowledged),
                (2, 2, RecordState::Available),
                (3, 3, RecordState::Archived),
                (4, 5, RecordState::Available),
            ]
        );
        let mut q = SharePartition::restore(p.start(), &saved, Limits::default());
        assert_eq!((q.start(), q.end()), (0, 6));
        // Nobody holds anything after a restart: 0, 2, 4 and 5 go again, delivery 2.
        let again = q.acquire(&m("b"), &[(0, 5)], 100, now, LOCK);
        assert_eq!(
            again
                .iter()
                .map(|a| (a.first, a.last, a.delivery_count))
                .collect::<Vec<_>>(),
            [(0, 0, 2), (2, 2, 2), (4, 5, 2)]
        );
        // Retention took 0-4: what was in flight there is gone.
        q.log_start_moved(5);
        assert_eq!((q.start(), q.state_of(5)), (5, Some(RecordState::Acquired)));
    }

    #[test]
    fn an_acknowledgement_that_could_not_be_stored_is_undone_and_only_it() {
        let now = Instant::now();
        let mut p = SharePartition::new(0, Limits::default());
        p.acquire(&m("a"), &[(0, 3)], 100, now, LOCK);
        p.acquire(&m("c"), &[(4, 4)], 100, now, LOCK);
        // a accepts 0-1 (the start moves past them) and releases 2.
        let undo = p
            .acknowledge(
                "a",
                &[ack(0, 1, AckType::Accept), ack(2, 2, AckType::Release)],
            )
            .unwrap();
        assert_eq!(p.start(), 2);
        // Meanwhile b takes the released record and c accepts its own.
        let got = p.acquire(&m("b"), &[(2, 2)], 100, now, LOCK);
        assert_eq!(got[0].delivery_count, 2);
        p.acknowledge("c", &[ack(4, 4, AckType::Accept)]).unwrap();
        // The store refused a's acknowledgement: a holds 0-1 again, b keeps 2, c's stays.
        p.undo(undo);
        assert_eq!(p.start(), 0);
        assert_eq!(p.state_of(0), Some(RecordState::Acquired));
        assert_eq!(p.state_of(1), Some(RecordState::Acquired));
        assert_eq!(p.state_of(4), Some(RecordState::Acknowledged));
        assert_eq!(
            p.acknowledge("b", &[ack(2, 2, AckType::Accept)]).map(drop),
            Ok(())
        );
        assert_eq!(
            p.acknowledge(
                "a",
                &[ack(0, 1, AckType::Accept), ack(3, 3, AckType::Accept)]
            )
            .map(drop),
            Ok(())
        );
        assert_eq!(p.start(), 5);
    }

    #[test]
    fn an_undo_brings_back_offsets_the_start_passed_and_keeps_others_final() {
        let now = Instant::now();
        let mut p = SharePartition::new(0, Limits::default());
        p.acquire(&m("a"), &[(0, 0)], 100, now, LOCK);
        p.acquire(&m("b"), &[(1, 2)], 100, now, LOCK);
        p.acknowledge("b", &[ack(1, 1, AckType::Reject)]).unwrap();
        // a's accept lets the start pass 0 and the rejected 1.
        let undo = p.acknowledge("a", &[ack(0, 0, AckType::Accept)]).unwrap();
        assert_eq!(p.start(), 2);
        p.undo(undo);
        assert_eq!(p.start(), 0);
        assert_eq!(p.state_of(0), Some(RecordState::Acquired));
        assert!(p.state_of(1).is_some_and(RecordState::is_final));
        // The lock a had is its own again: it expires as it would have.
        assert_eq!(p.expire_locks(now + LOCK), 2);
        assert_eq!(p.state_of(0), Some(RecordState::Available));
    }
}
