//! Topics as the shard creates, finds and deletes them: in the engine's catalog first when it
//! keeps one (SeaweedMQ's), then in the broker's metadata.
//!
//! Calls `cluster/` for the metadata and the [`crate::storage::Engine`] for its catalog.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Shard;
use crate::cluster::TopicMeta;
use crate::error::KelpError;

/// Producer ids reserved from the engine at a time.
const PRODUCER_ID_BLOCK: i64 = 1000;

impl Shard {
    /// The topic, from the metadata or from the engine's catalog; created when `allow` and
    /// the broker allow it and it is missing. `Ok(None)`: unknown and not created.
    pub async fn topic_or_create(
        &self,
        name: &str,
        allow: bool,
    ) -> Result<Option<Arc<TopicMeta>>, KelpError> {
        if let Some(t) = self.cluster.topic(name) {
            return Ok(Some(t));
        }
        if crate::cluster::internal::is_internal(name) {
            // Listed, never written by clients (Kafka: "Cannot append to internal topic").
            return Err(KelpError::InvalidTopic(format!(
                "cannot append to internal topic {name}"
            )));
        }
        if crate::cluster::validate_topic_name(name).is_err() {
            // The metadata answers with the right error (or nothing, when not allowed).
            return self.cluster.get_or_auto_create(name, allow);
        }
        if let Some(info) = self.engine.lookup_topic(name).await? {
            return Ok(Some(self.cluster.adopt_topic(
                &info.name,
                info.id,
                info.partitions,
                info.configs,
            )));
        }
        if !(allow && self.cluster.auto_create) {
            return Ok(None);
        }
        match self
            .create_topic(name, -1, -1, BTreeMap::new(), false)
            .await
        {
            Ok(t) => Ok(Some(t)),
            // Lost a race with another shard's create: use the winner.
            Err(KelpError::TopicAlreadyExists) => Ok(self.cluster.topic(name)),
            Err(e) => Err(e),
        }
    }

    /// CreateTopics: every check first, then the topic in the engine's catalog, then the
    /// metadata (with the engine's id when it assigns one).
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<TopicMeta>, KelpError> {
        let checked = self.cluster.create_topic(
            name,
            partitions,
            replication_factor,
            configs.clone(),
            true,
        )?;
        if validate_only {
            return Ok(checked);
        }
        match self
            .engine
            .create_topic(name, checked.partitions, &configs)
            .await?
        {
            Some(info) => {
                self.cluster
                    .create_topic_with_id(name, info.id, info.partitions, configs)
            }
            None => self.cluster.create_topic(
                name,
                checked.partitions,
                replication_factor,
                configs,
                false,
            ),
        }
    }

    /// CreatePartitions: every check first, then the engine, then the metadata.
    pub async fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<Arc<TopicMeta>, KelpError> {
        let checked = self.cluster.add_partitions(name, count, true)?;
        if validate_only {
            return Ok(checked);
        }
        let from = self.cluster.topic(name).map_or(0, |m| m.partitions);
        self.engine.add_partitions(name, from, count).await?;
        self.cluster.add_partitions(name, count, false)
    }

    /// IncrementalAlterConfigs: checks every override, stores them with the engine when it
    /// keeps them (SeaweedMQ's, on the filer), then publishes them.
    pub async fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), KelpError> {
        self.cluster
            .topic(name)
            .ok_or(KelpError::UnknownTopicOrPartition)?;
        for (k, v) in &configs {
            crate::cluster::topic_config::validate(k, v)?;
        }
        self.engine.set_topic_configs(name, &configs).await?;
        self.cluster.set_topic_configs(name, configs)
    }

    /// A producer id for InitProducerId: from the blocks the engine reserves when it keeps
    /// state shared by several brokers (unique across them), else from the broker's counter.
    pub async fn allocate_producer_id(&self) -> Result<i64, KelpError> {
        loop {
            if let Some(id) = self.cluster.take_producer_id() {
                return Ok(id);
            }
            match self.engine.allocate_producer_ids(PRODUCER_ID_BLOCK).await? {
                Some(block) if !block.is_empty() => self.cluster.add_producer_ids(block),
                Some(_) => return Err(KelpError::Storage("empty producer id block".into())),
                None => return Ok(self.cluster.allocate_producer_id()),
            }
        }
    }

    /// DeleteTopics: removes the topic from the engine's catalog, then from the metadata.
    pub async fn delete_topic(&self, name: &str) -> Result<Arc<TopicMeta>, KelpError> {
        let listed = self.cluster.topic(name);
        if listed.is_none() && crate::cluster::internal::is_internal(name) {
            return Err(KelpError::InvalidTopic(format!(
                "{name} is an internal topic and cannot be deleted"
            )));
        }
        listed.ok_or(KelpError::UnknownTopicOrPartition)?;
        self.engine.delete_topic(name).await?;
        self.cluster.delete_topic(name)
    }
}
