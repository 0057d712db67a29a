//! Kafka topics in SeaweedMQ for the forwarder: `kafka/<topic>` looked up, created
//! (`ConfigureTopic`, never re-partitioning an existing topic), listed into the cluster
//! metadata ([`super::topic_refresh`]) and deleted (the topic's directory on the filer). Runs on the forwarder thread; publishes topics through `cluster/`.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;

use kelp_storage_client::pb::messaging_pb::{
    BrokerPartitionAssignment, ConfigureTopicRequest, GetTopicConfigurationRequest,
};
use kelp_storage_client::pb::schema_pb;
use kelp_storage_client::{filer, ring};

use super::client::{is_transport, request, storage, Forwarder, Route, NAMESPACE};
use super::TopicInfo;
use crate::error::KelpError;

/// The Kafka topic `name` in SeaweedMQ.
pub fn smq_topic(name: &str) -> schema_pb::Topic {
    schema_pb::Topic {
        namespace: NAMESPACE.to_string(),
        name: name.to_string(),
    }
}

fn topic_info(name: &str, assignments: &[BrokerPartitionAssignment]) -> TopicInfo {
    let generation = assignments
        .iter()
        .filter_map(|a| a.partition.as_ref())
        .map(|p| p.unix_time_ns)
        .min()
        .unwrap_or(0);
    TopicInfo {
        name: name.to_string(),
        partitions: assignments.len() as i32,
        id: uuid::Uuid::new_v5(
            &uuid::Uuid::NAMESPACE_URL,
            format!("seaweedmq:{NAMESPACE}/{name}@{generation}").as_bytes(),
        ),
        configs: BTreeMap::new(),
    }
}

impl Forwarder {
    /// Records each partition's SeaweedMQ leader for placement (which prefers the Kelp node
    /// on that broker's host); a change starts a placement round at once.
    fn note_storage_leaders(&self, name: &str, assignments: &[BrokerPartitionAssignment]) {
        let leaders = (0..assignments.len() as i32)
            .map(|k| {
                ring::find_assignment(assignments, k)
                    .map(|a| a.leader_broker.clone())
                    .unwrap_or_default()
            })
            .collect();
        if self.cluster.ownership.set_storage_leaders(name, leaders) {
            self.placement_moved.notify_one();
        }
    }

    /// The topic's configuration (with its config overrides from the filer), or None if
    /// SeaweedMQ does not know it.
    pub(super) async fn lookup_topic(&self, name: &str) -> Result<Option<TopicInfo>, KelpError> {
        if self.deleted.borrow().contains_key(name) {
            return Ok(None);
        }
        let Some(mut info) = self.topic_configuration(name).await? else {
            return Ok(None);
        };
        info.configs = self.read_topic_configs(name, info.id).await?;
        Ok(Some(info))
    }

    /// The topic's SeaweedMQ configuration (partitions, incarnation; its partition leaders
    /// are noted for placement), or None if SeaweedMQ does not know it.
    pub(super) async fn topic_configuration(
        &self,
        name: &str,
    ) -> Result<Option<TopicInfo>, KelpError> {
        let t = smq_topic(name);
        let r = self
            .control("GetTopicConfiguration", move |mut c| {
                let t = t.clone();
                Box::pin(async move {
                    c.get_topic_configuration(request(GetTopicConfigurationRequest {
                        topic: Some(t),
                    }))
                    .await
                    .map(tonic::Response::into_inner)
                })
            })
            .await;
        match r {
            Ok(cfg) if !cfg.broker_partition_assignments.is_empty() => {
                self.note_storage_leaders(name, &cfg.broker_partition_assignments);
                Ok(Some(topic_info(name, &cfg.broker_partition_assignments)))
            }
            Ok(_) => Ok(None),
            Err(s) if is_transport(&s) => Err(storage("GetTopicConfiguration", s)),
            // A missing topic comes back as an error status with a message.
            Err(_) => Ok(None),
        }
    }

    pub(super) async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicInfo, KelpError> {
        // ConfigureTopic with another count would start a new generation (offsets from 0):
        // never do that to an existing topic.
        if let Some(existing) = self.lookup_topic(name).await? {
            self.cluster.adopt_topic(
                &existing.name,
                existing.id,
                existing.partitions,
                existing.configs,
            );
            return Err(KelpError::TopicAlreadyExists);
        }
        self.deleted.borrow_mut().remove(name);
        let t = smq_topic(name);
        let resp = self
            .control("ConfigureTopic", move |mut c| {
                let t = t.clone();
                Box::pin(async move {
                    c.configure_topic(request(ConfigureTopicRequest {
                        topic: Some(t),
                        partition_count: partitions,
                        ..Default::default()
                    }))
                    .await
                    .map(tonic::Response::into_inner)
                })
            })
            .await
            .map_err(|s| storage("ConfigureTopic", s))?;
        if resp.broker_partition_assignments.len() != partitions as usize {
            return Err(storage(
                "ConfigureTopic",
                format!(
                    "asked for {partitions} partitions, got {}",
                    resp.broker_partition_assignments.len()
                ),
            ));
        }
        let mut info = topic_info(name, &resp.broker_partition_assignments);
        self.note_storage_leaders(name, &resp.broker_partition_assignments);
        if !configs.is_empty() {
            // The topic exists now; without its overrides stored it would run on defaults
            // after a restart: the client is told, and may alter them again.
            self.write_topic_configs(name, info.id, &configs).await?;
        }
        info.configs = configs;
        self.routes.borrow_mut().insert(
            name.to_string(),
            Route {
                assignments: resp.broker_partition_assignments,
                at: Instant::now(),
            },
        );
        tracing::info!(
            topic = name,
            partitions,
            "created SeaweedMQ topic {NAMESPACE}/{name}"
        );
        Ok(info)
    }

    /// Kafka topics SeaweedMQ holds, with their partition counts.
    pub(super) async fn delete_topic(&self, name: &str) -> Result<(), KelpError> {
        let mut f = self.filer_client()?;
        filer::delete(&mut f, &format!("/topics/{NAMESPACE}"), name, true)
            .await
            .map_err(|e| storage("deleting the topic directory", e))?;
        self.drop_log_starts(name).await?;
        self.drop_topic_configs(name).await?;
        self.drop_epochs(name).await?;
        self.drop_journals(name).await?;
        self.drop_txns(name).await?;
        self.cluster.ownership.forget_storage_leaders(name);
        self.invalidate(name);
        self.publishers.borrow_mut().retain(|(t, _), _| t != name);
        self.publisher_tasks
            .borrow_mut()
            .retain(|(t, _), _| t != name);
        self.deleted
            .borrow_mut()
            .insert(name.to_string(), Instant::now());
        Ok(())
    }

    /// Keeps the cluster metadata in step with SeaweedMQ's topics and the groups' config
    /// overrides, forever.
    pub(super) async fn refresh_topics(self: Rc<Self>) {
        loop {
            tokio::time::sleep(self.s.topic_refresh).await;
            if let Err(e) = self.sync_topics().await {
                tracing::debug!(error = %e, "topic refresh failed");
            }
            if let Err(e) = self.sync_group_configs().await {
                tracing::debug!(error = %e, "group configs refresh failed");
            }
        }
    }
}
