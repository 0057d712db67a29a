//! Kafka's log start offset for SeaweedMQ partitions, which have none of their own (SeaweedMQ
//! cannot delete below an offset and reports 0 as every partition's earliest). DeleteRecords
//! moves a logical log start, kept on the filer so that every Kelp node and every restart
//! honours it: `/topics/kafka/.meta/kelp/log_start/<topic>/<partition>` holding
//! `{"log_start":N,"topic_id":"<uuid>"}`. The topic id ties it to one incarnation of the
//! topic: a topic deleted and made again (by anyone) starts from its own records. Runs on
//! the forwarder thread; the partition applies it as its earliest offset.

use kelp_storage_client::filer;
use serde::{Deserialize, Serialize};

use super::client::{storage, Forwarder};
use crate::error::KelpError;

/// Filer directory of the log start files.
pub const ROOT: &str = "/topics/kafka/.meta/kelp/log_start";

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Stored {
    log_start: i64,
}

fn dir(topic: &str) -> String {
    format!("{ROOT}/{topic}")
}

/// The log start a file holds for the topic incarnation `id` (0 for another incarnation or
/// a file that does not decode: it is not this topic's).
fn decode(body: &[u8], id: uuid::Uuid) -> i64 {
    super::tied::decode::<Stored>(body, id, "log start").map_or(0, |s| s.log_start.max(0))
}

impl Forwarder {
    /// The partition's logical log start (0 when none was set). Read from the filer once,
    /// then kept: this Kelp is the partition's only writer of it.
    pub(super) async fn log_start(&self, topic: &str, k: i32) -> Result<i64, KelpError> {
        if let Some(&v) = self.log_starts.borrow().get(&(topic.to_string(), k)) {
            return Ok(v);
        }
        match self.lookup_topic(topic).await? {
            Some(info) => self.read_log_start(topic, k, info.id).await,
            None => Ok(0),
        }
    }

    /// The partition's log start for the topic incarnation `id`: kept, else read from the
    /// filer and kept.
    async fn read_log_start(&self, topic: &str, k: i32, id: uuid::Uuid) -> Result<i64, KelpError> {
        if let Some(&v) = self.log_starts.borrow().get(&(topic.to_string(), k)) {
            return Ok(v);
        }
        let mut f = self.filer_client()?;
        let body = filer::read_file(&mut f, &dir(topic), &k.to_string())
            .await
            .map_err(|e| storage("reading a log start", e))?;
        let v = body.map_or(0, |b| decode(&b, id));
        // A concurrent set wins over what was read before it.
        Ok(*self
            .log_starts
            .borrow_mut()
            .entry((topic.to_string(), k))
            .or_insert(v))
    }

    /// Moves the partition's log start up to `offset` (never down), durably on the filer
    /// before it is used.
    pub(super) async fn set_log_start(
        &self,
        topic: &str,
        k: i32,
        offset: i64,
    ) -> Result<i64, KelpError> {
        let info = self
            .lookup_topic(topic)
            .await?
            .ok_or(KelpError::UnknownTopicOrPartition)?;
        let current = self.read_log_start(topic, k, info.id).await?;
        if offset <= current {
            return Ok(current);
        }
        let body = super::tied::encode(Stored { log_start: offset }, info.id)
            .map_err(|e| storage("encoding a log start", e))?;
        let mut f = self.filer_client()?;
        filer::write_file(&mut f, &dir(topic), &k.to_string(), body)
            .await
            .map_err(|e| storage("writing a log start", e))?;
        let mut m = self.log_starts.borrow_mut();
        let v = m.entry((topic.to_string(), k)).or_insert(offset);
        *v = (*v).max(offset);
        Ok(*v)
    }

    /// Forgets a deleted topic's log starts, here and on the filer.
    pub(super) async fn drop_log_starts(&self, topic: &str) -> Result<(), KelpError> {
        self.log_starts.borrow_mut().retain(|(t, _), _| t != topic);
        let mut f = self.filer_client()?;
        filer::delete(&mut f, ROOT, topic, true)
            .await
            .map_err(|e| storage("deleting log starts", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_keeps_the_format_other_nodes_read() {
        let id = uuid::Uuid::from_u128(7);
        let body = super::super::tied::encode(Stored { log_start: 42 }, id).unwrap();
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            r#"{"topic_id":"00000000-0000-0000-0000-000000000007","log_start":42}"#
        );
        assert_eq!(decode(&body, id), 42);
        assert_eq!(decode(&body, uuid::Uuid::from_u128(8)), 0);
    }
}
