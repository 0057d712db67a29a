//! Conversion between Kafka record batches and SeaweedMQ data messages, losslessly.
//!
//! Produce: a validated v2 batch (any codec) is decoded into one [`Pending`] record per Kafka
//! record; the partition's publisher gives each its place in SeaweedMQ's time order with a
//! [`Clock`] when it is first sent. SeaweedMQ keeps a key, a value and a ns timestamp per
//! message and forces that timestamp to increase (it names log files after it), so a record
//! whose Kafka timestamp fits the partition's clock is stored plain (key, value, timestamp:
//! what the Go gateway and other readers expect); a record with headers, a timestamp that
//! would go back in time or run ahead of the clock, or an empty (not null) key or value goes
//! into an envelope ([`super::envelope`]) in the value, as does every record of a
//! transaction (its producer travels with it). Fetch below the cache: messages are turned
//! back into uncompressed v2 batches whose offsets are `start + i`, with each record's own
//! key, value, headers and timestamp; a transaction's records come back in batches of their
//! producer (transactional), each marker as a control batch of its own. Runs on the forwarder thread; calls
//! `record::walk` to read batches and `record::build` to build them.

use bytes::Bytes;
use kelp_storage_client::pb::messaging_pb::DataMessage;

use super::envelope::{self, TxnTag};
use crate::record::build::{BatchBuilder, RecordParts};
use crate::record::walk;

const NS_PER_MS: i64 = 1_000_000;
/// How far ahead of this host's clock a record's timestamp may set a partition's clock.
/// Beyond it, a producer with a clock running ahead would force every later record into an
/// envelope until real time catches up.
const AHEAD_NS: i64 = 1_000_000_000;
/// How far behind this host's clock a record whose own timestamp cannot be used may be put:
/// such a record is stamped right after the one before it, so the clock does not jump to
/// the present and push the next records (a little older than now) into envelopes, but not
/// before this (a new partition's first such record is put near the present).
const BEHIND_NS: i64 = 60_000_000_000;

/// One Kafka record, decoded, waiting for its SeaweedMQ timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// None: a null key.
    pub key: Option<Bytes>,
    /// None: a null value.
    pub value: Option<Bytes>,
    /// Kafka timestamp, ms.
    pub timestamp: i64,
    /// Number of header entries.
    pub header_count: u32,
    /// Header entries in Kafka's encoding.
    pub headers: Bytes,
    /// The transaction it belongs to (its batch was transactional), if any.
    pub txn: Option<TxnTag>,
}

/// Decodes one Kafka record batch (decompressing it, up to [`walk::MAX_INFLATED_BYTES`])
/// into records, in offset order. Records are walked one by one ([`walk::Records`]): a
/// compressed batch whose header claims more records than it holds is an error here, never
/// an allocation sized by the claim.
pub fn decode_batch(batch: &Bytes) -> Result<Vec<Pending>, String> {
    let mut records =
        walk::Records::new(batch, walk::MAX_INFLATED_BYTES).map_err(|e| e.why().to_string())?;
    let h = records.header();
    let (base_ts, append_ts) = (
        h.base_timestamp,
        h.is_log_append_time().then_some(h.max_timestamp),
    );
    let txn = (h.is_transactional() && h.producer_id >= 0).then_some(TxnTag {
        producer_id: h.producer_id,
        epoch: h.producer_epoch,
        control: h.is_control(),
    });
    let mut out = Vec::new();
    while let Some(r) = records.next_record().map_err(|e| e.why().to_string())? {
        out.push(Pending {
            key: r.key,
            value: r.value,
            timestamp: append_ts.unwrap_or(base_ts.wrapping_add(r.timestamp_delta)),
            header_count: r.header_count,
            headers: r.headers,
            txn,
        });
    }
    Ok(out)
}

/// One partition's SeaweedMQ clock: the ns timestamp of the last message stored, which every
/// next one must exceed (SeaweedMQ would otherwise move it silently, losing the Kafka
/// timestamp a plain message carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    last_ns: i64,
}

impl Clock {
    /// A clock after the partition's last stored message, stamped `last_ns`.
    pub fn after(last_ns: i64) -> Clock {
        Clock { last_ns }
    }

    /// A clock for a partition whose last stamp is unknown: ahead of any stamp Kelp can have
    /// stored (never past its own time plus 1 s), so order is kept; records of the
    /// next second are wrapped rather than stored plain.
    pub fn unknown(now_ns: i64) -> Clock {
        Clock::after(now_ns.saturating_add(AHEAD_NS))
    }

    /// The message that stores `p`, its timestamp after every earlier one; `now_ns` is this
    /// host's time.
    pub fn stamp(&mut self, p: &Pending, now_ns: i64) -> DataMessage {
        let floor = self.last_ns.saturating_add(1);
        // The Kafka timestamp in ns, moved up within its ms if the clock is already there.
        let fitted = p
            .timestamp
            .checked_mul(NS_PER_MS)
            .filter(|&ns| ns >= 0)
            .map(|ns| ns.max(floor))
            .filter(|&ns| ns / NS_PER_MS == p.timestamp && ns <= now_ns.saturating_add(AHEAD_NS));
        let empty_key = p.key.as_ref().is_some_and(Bytes::is_empty);
        let plain = fitted.is_some()
            && p.txn.is_none()
            && p.header_count == 0
            && !empty_key
            && p.value
                .as_ref()
                .is_none_or(|v| !v.is_empty() && !envelope::looks_wrapped(v));
        let ts_ns = fitted.unwrap_or_else(|| floor.max(now_ns.saturating_sub(BEHIND_NS)));
        self.last_ns = ts_ns;
        let value = if plain {
            p.value.clone().unwrap_or_default()
        } else {
            envelope::wrap(
                p.timestamp,
                empty_key,
                p.value.as_deref(),
                p.header_count,
                &p.headers,
                p.txn,
            )
        };
        DataMessage {
            key: p.key.clone().unwrap_or_default(),
            value,
            ts_ns,
            ctrl: None,
        }
    }
}

/// Encodes messages read from `start` into uncompressed v2 batches (offset `start + i`),
/// each record as the producer sent it: a batch per run of records of one transaction (or
/// of none), and one per marker. A plain message's empty key or value is a null one
/// (SeaweedMQ stores no difference; Kelp wraps the empty ones it writes).
pub fn encode_batch(start: i64, messages: &[DataMessage]) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut b = BatchBuilder::default();
    let mut run: Option<TxnTag> = None;
    let mut run_start = start;
    for (i, m) in messages.iter().enumerate() {
        let offset = start + i as i64;
        let stored_key = (!m.key.is_empty()).then_some(&m.key[..]);
        let opened = envelope::open(&m.value);
        let txn = opened.as_ref().and_then(|o| o.txn);
        // A marker is a batch of its own, as the coordinator wrote it.
        let cut = txn != run || txn.is_some_and(|t| t.control);
        if cut && !b.is_empty() {
            let done = std::mem::take(&mut b);
            out.push(done.finish_for(run_start, run.map(tag_fields)));
        }
        if b.is_empty() {
            run = txn;
            run_start = offset;
        }
        match &opened {
            Some(o) => b.push(RecordParts {
                timestamp: o.timestamp,
                key: stored_key.or(o.empty_key.then_some(&[][..])),
                value: o.value.as_deref(),
                header_count: o.header_count,
                headers: &o.headers,
            }),
            None => b.push(RecordParts {
                timestamp: m.ts_ns.div_euclid(NS_PER_MS),
                key: stored_key,
                value: (!m.value.is_empty()).then_some(&m.value[..]),
                header_count: 0,
                headers: &[],
            }),
        }
    }
    if !b.is_empty() || out.is_empty() {
        out.push(b.finish_for(run_start, run.map(tag_fields)));
    }
    out
}

/// The producer fields [`BatchBuilder::finish_for`] takes for a transaction's batch.
fn tag_fields(t: TxnTag) -> (i64, i16, i16) {
    (t.producer_id, t.epoch, t.attributes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::batch::{BatchHeader, ValidatedBatches};
    use bytes::BytesMut;

    fn pending(ts: i64) -> Pending {
        Pending {
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::from_static(b"v")),
            timestamp: ts,
            header_count: 0,
            headers: Bytes::new(),
            txn: None,
        }
    }

    fn read_back(batch: &Bytes) -> Vec<Pending> {
        let h = BatchHeader::parse(batch).unwrap();
        assert!(ValidatedBatches::validate(BytesMut::from(&batch[..]), 1 << 20).is_ok());
        assert_eq!(h.producer_id, -1);
        decode_batch(batch).unwrap()
    }

    const NOW_MS: i64 = 1_700_000_000_000;
    const NOW: i64 = NOW_MS * NS_PER_MS;

    #[test]
    fn records_come_back_as_they_were_sent() {
        let hdrs = [2u8, b'h', 2, b'1', 2, b'h', 1]; // "h"="1", "h"=null: duplicates kept
        let sent = vec![
            pending(NOW_MS - 5),
            Pending {
                header_count: 2,
                headers: Bytes::copy_from_slice(&hdrs),
                ..pending(NOW_MS - 4)
            },
            Pending {
                key: None,
                value: None,
                ..pending(NOW_MS - 4)
            },
            Pending {
                key: Some(Bytes::new()),
                value: Some(Bytes::new()),
                ..pending(NOW_MS - 3)
            },
            // Back in time, far back, ahead of this host: all kept exactly.
            pending(NOW_MS - 60_000),
            pending(7),
            pending(NOW_MS + 3_600_000),
            pending(-1),
            Pending {
                value: Some(Bytes::copy_from_slice(&envelope::MAGIC)),
                ..pending(NOW_MS)
            },
        ];
        let mut clock = Clock::after(0);
        let stored: Vec<DataMessage> = sent.iter().map(|p| clock.stamp(p, NOW)).collect();
        for w in stored.windows(2) {
            assert!(w[1].ts_ns > w[0].ts_ns, "SeaweedMQ's timestamps increase");
        }
        let plain: Vec<bool> = stored
            .iter()
            .map(|m| envelope::open(&m.value).is_none())
            .collect();
        assert_eq!(
            plain,
            [true, false, true, false, false, false, false, false, false],
            "only what a plain message cannot hold is wrapped"
        );
        assert_eq!(stored[0].value, "v", "other readers see the plain value");
        let batches = encode_batch(40, &stored);
        assert_eq!(batches.len(), 1);
        let batch = &batches[0];
        let h = BatchHeader::parse(batch).unwrap();
        assert_eq!((h.base_offset, h.last_offset()), (40, 48));
        assert_eq!(read_back(batch), sent);
    }

    #[test]
    fn transactions_come_back_in_batches_of_their_producer() {
        use crate::record::control::{control_type, marker_batch, ControlType};
        let tag = |pid, control| {
            Some(TxnTag {
                producer_id: pid,
                epoch: 3,
                control,
            })
        };
        let marker = decode_batch(&marker_batch(ControlType::Abort, 7, 3, 0, NOW_MS).freeze())
            .unwrap()
            .remove(0);
        assert_eq!(marker.txn, tag(7, true));
        let sent = vec![
            pending(NOW_MS),
            Pending {
                txn: tag(7, false),
                ..pending(NOW_MS)
            },
            Pending {
                txn: tag(7, false),
                ..pending(NOW_MS)
            },
            Pending {
                txn: tag(8, false),
                ..pending(NOW_MS)
            },
            marker.clone(),
            marker,
            pending(NOW_MS),
        ];
        let mut clock = Clock::after(0);
        let stored: Vec<DataMessage> = sent.iter().map(|p| clock.stamp(p, NOW)).collect();
        let batches = encode_batch(10, &stored);
        let shape: Vec<_> = batches
            .iter()
            .map(|b| {
                let h = BatchHeader::parse(b).unwrap();
                (h.base_offset, h.record_count, h.producer_id, h.attributes)
            })
            .collect();
        assert_eq!(
            shape,
            [
                (10, 1, -1, 0),
                (11, 2, 7, 0x10),
                (13, 1, 8, 0x10),
                (14, 1, 7, 0x30),
                (15, 1, 7, 0x30),
                (16, 1, -1, 0)
            ]
        );
        let h = BatchHeader::parse(&batches[3]).unwrap();
        assert_eq!(control_type(&h, &batches[3]), Some(ControlType::Abort));
        assert_eq!(h.producer_epoch, 3);
        for b in &batches {
            let v = ValidatedBatches::validate_broker(BytesMut::from(&b[..]));
            assert!(v.is_ok(), "a valid batch");
        }
        let back: Vec<Pending> = batches
            .iter()
            .flat_map(|b| decode_batch(b).unwrap())
            .collect();
        assert_eq!(back, sent);
    }

    #[test]
    fn the_clock_never_goes_back_nor_reuses_a_stamp() {
        let mut clock = Clock::after(NOW + 5);
        // Same ms as the last stored message: moved up within the ms, still plain.
        let m = clock.stamp(&pending(NOW_MS), NOW);
        assert_eq!((m.ts_ns, &m.value[..]), (NOW + 6, &b"v"[..]));
        // A full ms: the next one's ns no longer fits its ms, so it is wrapped.
        let mut clock = Clock::after(NOW + NS_PER_MS - 1);
        let m = clock.stamp(&pending(NOW_MS), NOW);
        assert_eq!(m.ts_ns, NOW + NS_PER_MS);
        assert!(envelope::open(&m.value).is_some());
        // Records that cannot use their own timestamp do not move the clock to the present:
        // the next one, a little older than now, is still stored plain.
        let mut clock = Clock::after(NOW - 10 * NS_PER_MS);
        for odd in [NOW_MS + 3_600_000, NOW_MS - 3_600_000, -1] {
            let m = clock.stamp(&pending(odd), NOW);
            assert!(m.ts_ns < NOW - 9 * NS_PER_MS && envelope::open(&m.value).is_some());
        }
        let m = clock.stamp(&pending(NOW_MS - 9), NOW);
        assert_eq!((m.ts_ns, &m.value[..]), (NOW - 9 * NS_PER_MS, &b"v"[..]));
        // A new partition's first record without a usable timestamp is put near the present.
        let m = Clock::after(0).stamp(&pending(-1), NOW);
        assert_eq!(m.ts_ns, NOW - BEHIND_NS);
    }

    #[test]
    fn batches_from_every_client_shape_decode() {
        let built = crate::record::build::simple_batch(3, 10, NOW_MS);
        let decoded = decode_batch(&built.freeze()).unwrap();
        assert_eq!(decoded.len(), 3);
        assert_eq!(decoded[2].timestamp, NOW_MS + 2);
        assert_eq!(decoded[0].key, None);
        let compressed = crate::record::walk::tests::encoded_batch(4, &[b"a", b"b"], NOW_MS);
        let decoded = decode_batch(&compressed).unwrap();
        assert_eq!(decoded[1].value.as_deref(), Some(&b"b"[..]));
        assert_eq!(decoded[1].key.as_deref(), Some(&b"k1"[..]));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(decode_batch(&Bytes::from_static(b"not a batch at all")).is_err());
    }
}
