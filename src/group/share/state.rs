//! The durable form of a share-partition (Kafka keeps it in `__share_group_state`): its
//! start offset and the runs above it that are available, acknowledged or archived, with
//! their delivery counts. Kelp stores it through the coordinator's offset store, beside the
//! group's committed offsets: the key is the topic name behind a prefix no topic name can
//! carry (`:` is not allowed in topic names), the offset is the start, and the metadata
//! names the topic id (a topic recreated under the same name starts over) and the runs. So
//! each storage engine keeps share state where it keeps offsets, durable before an
//! acknowledgement is answered, with nothing new to recover. Pure.

use uuid::Uuid;

use super::partition::{RecordState, StateBatch};
use crate::group::CommittedOffset;

/// Key prefix of share state in a group's offsets.
pub const KEY_PREFIX: &str = "share:";

/// The offsets key of one topic's share state.
pub fn key(topic: &str) -> String {
    format!("{KEY_PREFIX}{topic}")
}

/// The topic a share state key belongs to, None for a committed offset's key.
pub fn topic_of(key: &str) -> Option<&str> {
    key.strip_prefix(KEY_PREFIX)
}

/// One share-partition as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The topic's id when the state was written.
    pub topic_id: Uuid,
    /// The share-partition start offset.
    pub start: i64,
    /// The runs above the start.
    pub batches: Vec<StateBatch>,
}

/// Its offsets store form, written at `now_ms`.
pub fn encode(s: &Stored, now_ms: i64) -> CommittedOffset {
    let mut metadata = format!("v1 {}", s.topic_id);
    for b in &s.batches {
        metadata.push_str(&format!(
            " {}-{}:{}:{}",
            b.first, b.last, b.state as i8, b.delivery_count
        ));
    }
    CommittedOffset {
        offset: s.start,
        leader_epoch: -1,
        metadata,
        commit_timestamp_ms: now_ms,
    }
}

/// Reads the stored form back; None when it is not one this version wrote (the state is
/// then started over, as for a new share-partition).
pub fn decode(c: &CommittedOffset) -> Option<Stored> {
    let mut words = c.metadata.split(' ');
    if words.next()? != "v1" {
        return None;
    }
    let topic_id = Uuid::parse_str(words.next()?).ok()?;
    let mut batches = Vec::new();
    for w in words {
        let (range, rest) = w.split_once(':')?;
        let (state, count) = rest.split_once(':')?;
        let (first, last) = range.split_once('-')?;
        let state = match state.parse::<i8>().ok()? {
            0 => RecordState::Available,
            2 => RecordState::Acknowledged,
            4 => RecordState::Archived,
            _ => return None,
        };
        let (first, last) = (first.parse().ok()?, last.parse().ok()?);
        if first > last {
            return None;
        }
        batches.push(StateBatch {
            first,
            last,
            state,
            delivery_count: count.parse().ok()?,
        });
    }
    Some(Stored {
        topic_id,
        start: c.offset,
        batches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_state_reads_back_and_foreign_metadata_does_not() {
        let s = Stored {
            topic_id: Uuid::from_u128(7),
            start: 42,
            batches: vec![
                StateBatch {
                    first: 42,
                    last: 45,
                    state: RecordState::Available,
                    delivery_count: 2,
                },
                StateBatch {
                    first: 46,
                    last: 46,
                    state: RecordState::Archived,
                    delivery_count: 5,
                },
            ],
        };
        let c = encode(&s, 1);
        assert_eq!(decode(&c), Some(s));
        for bad in [
            "",
            "v2 x",
            "v1 not-a-uuid",
            "v1 00000000-0000-0000-0000-000000000007 5-4:0:1",
        ] {
            let c = CommittedOffset {
                offset: 0,
                leader_epoch: -1,
                metadata: bad.to_string(),
                commit_timestamp_ms: 0,
            };
            assert_eq!(decode(&c), None, "{bad}");
        }
        assert_eq!(topic_of(&key("t")), Some("t"));
        assert_eq!(topic_of("t"), None);
    }
}
