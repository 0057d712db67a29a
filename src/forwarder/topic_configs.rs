//! Kafka topic config overrides of SeaweedMQ topics (retention, max.message.bytes, ...), which
//! SeaweedMQ's own topic configuration has no room for: kept on the filer so that they
//! survive restarts and every Kelp node over the same SeaweedMQ sees the same ones, at
//! `/topics/kafka/.meta/kelp/topic_configs/<topic>` holding
//! `{"topic_id":"<uuid>","configs":{"retention.ms":"..."}}`. The topic id ties them to one
//! incarnation of the topic (a topic deleted and made again by anyone starts from the
//! defaults). Runs on the forwarder thread; `cluster/` publishes them with the topic.

use std::collections::BTreeMap;

use kelp_storage_client::filer;
use serde::{Deserialize, Serialize};

use super::client::{storage, Forwarder};
use crate::error::KelpError;

/// Filer directory of the config files, one per topic.
pub const ROOT: &str = "/topics/kafka/.meta/kelp/topic_configs";

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Stored {
    configs: BTreeMap<String, String>,
}

/// The overrides a file holds for the topic incarnation `id` (none for another incarnation
/// or a file that does not decode).
pub(super) fn decode(body: &[u8], id: uuid::Uuid) -> BTreeMap<String, String> {
    super::tied::decode::<Stored>(body, id, "topic configs")
        .map_or_else(BTreeMap::new, |s| s.configs)
}

impl Forwarder {
    /// The config overrides stored for the topic incarnation `id`.
    pub(super) async fn read_topic_configs(
        &self,
        name: &str,
        id: uuid::Uuid,
    ) -> Result<BTreeMap<String, String>, KelpError> {
        let mut f = self.filer_client()?;
        let body = filer::read_file(&mut f, ROOT, name)
            .await
            .map_err(|e| storage("reading topic configs", e))?;
        Ok(body.map(|b| decode(&b, id)).unwrap_or_default())
    }

    /// Stores the topic's config overrides (all of them: they replace the stored ones).
    pub(super) async fn write_topic_configs(
        &self,
        name: &str,
        id: uuid::Uuid,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), KelpError> {
        let body = super::tied::encode(
            Stored {
                configs: configs.clone(),
            },
            id,
        )
        .map_err(|e| storage("encoding topic configs", e))?;
        let mut f = self.filer_client()?;
        filer::write_file(&mut f, ROOT, name, body)
            .await
            .map_err(|e| storage("writing topic configs", e))
    }

    /// IncrementalAlterConfigs on a SeaweedMQ topic: the new overrides, stored.
    pub(super) async fn set_topic_configs(
        &self,
        name: &str,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), KelpError> {
        let info = self
            .lookup_topic(name)
            .await?
            .ok_or(KelpError::UnknownTopicOrPartition)?;
        self.write_topic_configs(name, info.id, configs).await
    }

    /// Forgets a deleted topic's config overrides.
    pub(super) async fn drop_topic_configs(&self, name: &str) -> Result<(), KelpError> {
        let mut f = self.filer_client()?;
        filer::delete(&mut f, ROOT, name, false)
            .await
            .map_err(|e| storage("deleting topic configs", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_belong_to_one_topic_incarnation() {
        let id = uuid::Uuid::from_u128(3);
        let configs = BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]);
        let body = super::super::tied::encode(
            Stored {
                configs: configs.clone(),
            },
            id,
        )
        .unwrap();
        assert_eq!(decode(&body, id), configs);
        assert!(decode(&body, uuid::Uuid::from_u128(4)).is_empty());
        assert!(decode(b"[]", id).is_empty());
    }
}
