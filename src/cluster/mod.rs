//! Read-mostly cluster metadata: topics, partition counts, topic ids and configs, and the
//! groups' config overrides ([`group_config`]).
//!
//! Readers on every shard load one immutable [`Snapshot`] through an atomic pointer swap and
//! never lock. Writers (CreateTopics, DeleteTopics, auto-create, IncrementalAlterConfigs) are
//! serialised by a mutex and publish a new snapshot; partition state itself lives on the
//! owning shards, not here.

pub mod broker_config;
pub mod group_config;
pub mod internal;
pub mod key;
pub mod leaders;
pub mod members;
pub mod nodes;
pub mod ownership;
pub mod routing;
pub mod topic_config;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use uuid::Uuid;

use crate::config::Config;
use crate::error::KelpError;

/// One topic as clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    /// The topic's name.
    pub name: String,
    /// Its id (Fetch v13+, Metadata, DeleteTopics v6+): a recreated topic gets a new one, so
    /// clients can tell the incarnations apart.
    pub id: Uuid,
    /// Its partition count.
    pub partitions: i32,
    /// Explicitly set topic configs (defaults are not stored).
    pub configs: BTreeMap<String, String>,
}

impl TopicMeta {
    /// Effective value of a topic config: the override, else the broker default.
    pub fn config(&self, key: &str) -> Option<&str> {
        self.configs
            .get(key)
            .map(String::as_str)
            .or_else(|| topic_config::default_of(key))
    }

    /// Largest record batch accepted (`max.message.bytes`).
    pub fn max_message_bytes(&self) -> usize {
        self.config(topic_config::MAX_MESSAGE_BYTES)
            .and_then(|v| v.parse().ok())
            .unwrap_or(topic_config::DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// Whether `cleanup.policy` includes compact: records must have keys.
    pub fn compacted(&self) -> bool {
        self.config("cleanup.policy")
            .is_some_and(|p| p.split(',').any(|v| v.trim() == "compact"))
    }

    /// Whether the broker stamps appends with its own time
    /// (`message.timestamp.type=LogAppendTime`).
    pub fn log_append_time(&self) -> bool {
        self.config(topic_config::MESSAGE_TIMESTAMP_TYPE) == Some("LogAppendTime")
    }
}

/// An immutable view of all topics.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// Topics by name.
    pub topics: HashMap<String, Arc<TopicMeta>>,
    /// The same topics by id, for requests that name topics by id.
    pub by_id: HashMap<Uuid, Arc<TopicMeta>>,
    /// Grows by one with every snapshot published that changed the topics: consumer groups
    /// tell by it whether the topics changed since they last resolved their subscriptions.
    pub version: u64,
    /// Each group's config overrides (ConfigResource GROUP), by group id; groups without any
    /// are absent. A group need not exist to have some (Kafka allows it).
    pub group_configs: HashMap<String, Arc<BTreeMap<String, String>>>,
}

impl Snapshot {
    /// Looks a topic up by name.
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicMeta>> {
        self.topics.get(name)
    }
}

/// Shared cluster state (one per process).
pub struct Cluster {
    snapshot: ArcSwap<Snapshot>,
    /// Fired whenever a new snapshot is published.
    published: event_listener::Event,
    writer: Mutex<()>,
    next_producer_id: AtomicI64,
    /// Producer ids taken from the storage engine in blocks, not handed out yet.
    producer_blocks: Mutex<std::collections::VecDeque<std::ops::Range<i64>>>,
    /// The broker nodes clients are shown.
    pub nodes: nodes::Nodes,
    /// The Kelp nodes alive over the same shared storage.
    pub members: members::Members,
    /// The partitions this node leads ([`ownership`]).
    pub ownership: ownership::Ownership,
    /// This node's id (`--node-id`).
    pub node_id: i32,
    /// Reported by Metadata and DescribeCluster (`--cluster-id`).
    pub cluster_id: String,
    /// Whether Metadata and Produce create unknown topics (`--auto-create-topics`).
    pub auto_create: bool,
    /// Partition count of a topic created without one (`--default-partitions`).
    pub default_partitions: i32,
    /// Every user's SCRAM credentials (SASL).
    pub credentials: Arc<crate::auth::credentials::Credentials>,
    /// Every ACL binding.
    pub acls: Arc<crate::auth::acl::Acls>,
    /// The ACL checks, with `--authorizer acl`.
    pub authorizer: Option<crate::auth::acl::Authorizer>,
    /// Where topic metadata is persisted (local storage); None keeps it in memory only.
    persist: Option<PathBuf>,
    /// Where group config overrides are persisted (local storage, beside the topics).
    persist_groups: Option<PathBuf>,
    /// The broker values and limits group configs are checked against.
    pub group_limits: group_config::Limits,
    /// Grows with every group config change made here, so that a re-read of the storage
    /// engine's copy that began before one does not undo it ([`Cluster::adopt_group_configs`]).
    group_config_changes: AtomicU64,
}

/// Checks a topic name the way Kafka does: 1-249 chars of [a-zA-Z0-9._-], not "." or "..".
pub fn validate_topic_name(name: &str) -> Result<(), KelpError> {
    let bad = |why: &str| Err(KelpError::InvalidTopic(format!("'{name}': {why}")));
    if name.is_empty() {
        return bad("empty");
    }
    if name == "." || name == ".." {
        return bad("'.' and '..' are reserved");
    }
    if name.len() > 249 {
        return bad("longer than 249 characters");
    }
    if !name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-')
    {
        return bad("only ASCII alphanumerics, '.', '_' and '-' are allowed");
    }
    Ok(())
}

impl Cluster {
    /// Empty cluster metadata for this broker of `shards` shards.
    pub fn new(config: &Config, shards: usize) -> Self {
        let now_ms = crate::clock::now_ms();
        let acls = Arc::new(crate::auth::acl::Acls::default());
        Cluster {
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
            published: event_listener::Event::new(),
            writer: Mutex::new(()),
            // Seeded from the clock so ids are not reused across restarts.
            next_producer_id: AtomicI64::new(now_ms << 10),
            producer_blocks: Mutex::new(std::collections::VecDeque::new()),
            nodes: nodes::Nodes::new(config, shards),
            members: members::Members::default(),
            ownership: ownership::Ownership::default(),
            node_id: config.node_id,
            cluster_id: config.cluster_id.clone(),
            auto_create: config.auto_create_topics,
            default_partitions: config.default_partitions,
            credentials: Arc::default(),
            acls: acls.clone(),
            authorizer: (config.authorizer == crate::config::AuthorizerKind::Acl).then(|| {
                crate::auth::acl::Authorizer {
                    acls,
                    super_users: config.super_users(),
                    allow_if_no_acl: config.allow_everyone_if_no_acl_found,
                }
            }),
            persist: None,
            persist_groups: None,
            group_limits: group_config::Limits::new(config),
            group_config_changes: AtomicU64::new(0),
        }
    }

    /// Cluster metadata persisted at `path` (`meta/topics.json`), and the group config
    /// overrides beside it (`meta/group-configs.json`), starting from what they hold.
    pub fn with_persistence(
        config: &Config,
        shards: usize,
        path: PathBuf,
    ) -> Result<Self, crate::log::LogError> {
        let mut c = Cluster::new(config, shards);
        let mut snap = Snapshot::default();
        for t in crate::log::meta::load(&path)? {
            let id = Uuid::parse_str(&t.id).map_err(|e| {
                crate::log::LogError::Recovery(format!("topic {}: bad id '{}': {e}", t.name, t.id))
            })?;
            let m = Arc::new(TopicMeta {
                name: t.name,
                id,
                partitions: t.partitions,
                configs: t.configs,
            });
            snap.by_id.insert(m.id, m.clone());
            snap.topics.insert(m.name.clone(), m);
        }
        let groups_path = path.with_file_name(crate::log::meta::GROUP_CONFIGS_FILE);
        snap.group_configs = crate::log::meta::load_group_configs(&groups_path)?
            .into_iter()
            .map(|(group, configs)| (group, Arc::new(configs)))
            .collect();
        c.snapshot = ArcSwap::from_pointee(snap);
        c.persist = Some(path);
        c.persist_groups = Some(groups_path);
        Ok(c)
    }

    /// Publishes `next` after persisting it (when persistent): metadata that could not be
    /// stored is not published, so the client sees an error and nothing changes.
    fn store_and_publish(&self, f: impl FnOnce(&mut Snapshot)) -> Result<(), KelpError> {
        let mut next = Snapshot::clone(&self.snapshot.load());
        f(&mut next);
        if let Some(path) = &self.persist {
            let mut topics: Vec<_> = next
                .topics
                .values()
                .map(|m| crate::log::meta::StoredTopic {
                    name: m.name.clone(),
                    id: m.id.to_string(),
                    partitions: m.partitions,
                    configs: m.configs.clone(),
                })
                .collect();
            topics.sort_by(|a, b| a.name.cmp(&b.name));
            crate::log::meta::save(path, topics).map_err(|e| {
                tracing::error!(error = %e, "could not persist topic metadata");
                KelpError::from(e)
            })?;
        }
        next.version += 1;
        self.snapshot.store(Arc::new(next));
        self.published.notify(usize::MAX);
        Ok(())
    }

    /// Fires when the next snapshot is published (a topic made, changed or deleted);
    /// register before reading the snapshot.
    pub fn listen(&self) -> event_listener::EventListener {
        self.published.listen()
    }

    /// Replaces a topic's config overrides (IncrementalAlterConfigs), persisted like topics.
    pub fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), KelpError> {
        for (k, v) in &configs {
            topic_config::validate(k, v)?;
        }
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.topic(name).ok_or(KelpError::UnknownTopicOrPartition)?;
        let m = Arc::new(TopicMeta {
            configs,
            ..TopicMeta::clone(&old)
        });
        self.store_and_publish(|s| {
            s.by_id.insert(m.id, m.clone());
            s.topics.insert(m.name.clone(), m);
        })
    }

    /// `group`'s override of the group config `key`, if it sets one (the default otherwise
    /// is [`group_config::default_of`], or the broker's: [`group_config::Limits::default_value`]
    /// on [`Cluster::group_limits`]).
    pub fn group_config(&self, group: &str, key: &str) -> Option<String> {
        self.snapshot
            .load()
            .group_configs
            .get(group)
            .and_then(|c| c.get(key).cloned())
    }

    /// Every config override `group` sets (empty when none).
    pub fn group_configs(&self, group: &str) -> Arc<BTreeMap<String, String>> {
        self.snapshot
            .load()
            .group_configs
            .get(group)
            .cloned()
            .unwrap_or_default()
    }

    /// Replaces `group`'s config overrides (IncrementalAlterConfigs, AlterConfigs): checked
    /// as Kafka checks them ([`group_config::Limits::validate`]), persisted where topics are
    /// (local storage), then published. Empty overrides remove the group's entry. Engines
    /// that keep them elsewhere (SeaweedMQ) store them before this is called.
    pub fn set_group_configs(
        &self,
        group: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), KelpError> {
        if group.is_empty() {
            return Err(KelpError::InvalidRequest(
                "Default group resources are not allowed.".into(),
            ));
        }
        self.group_limits.validate(&configs)?;
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        self.group_config_changes.fetch_add(1, Ordering::AcqRel);
        self.publish_group_configs(|all| {
            if configs.is_empty() {
                all.remove(group);
            } else {
                all.insert(group.to_string(), Arc::new(configs));
            }
        })
    }

    /// How many group config changes were made here: read before re-reading the storage
    /// engine's copy, handed to [`Cluster::adopt_group_configs`].
    pub fn group_config_changes(&self) -> u64 {
        self.group_config_changes.load(Ordering::Acquire)
    }

    /// Publishes every group's overrides as the storage engine holds them (SeaweedMQ, where
    /// other Kelp nodes change them too), unless a change was made here since `since` (the
    /// read may predate it; the next one will not).
    pub fn adopt_group_configs(
        &self,
        groups: HashMap<String, BTreeMap<String, String>>,
        since: u64,
    ) {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if self.group_config_changes() != since {
            return;
        }
        let same = {
            let current = &self.snapshot.load().group_configs;
            current.len() == groups.len()
                && groups
                    .iter()
                    .all(|(g, c)| current.get(g).is_some_and(|have| **have == *c))
        };
        if same {
            return;
        }
        let result = self.publish_group_configs(|all| {
            *all = groups
                .into_iter()
                .filter(|(_, c)| !c.is_empty())
                .map(|(g, c)| (g, Arc::new(c)))
                .collect();
        });
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not publish the stored group configs");
        }
    }

    /// Publishes the group overrides `f` makes of the current ones, after persisting them
    /// (when persistent). Neither the topics' version moves nor are listeners woken: the
    /// topics did not change, and group configs are read when used.
    fn publish_group_configs(
        &self,
        f: impl FnOnce(&mut HashMap<String, Arc<BTreeMap<String, String>>>),
    ) -> Result<(), KelpError> {
        let mut next = Snapshot::clone(&self.snapshot.load());
        f(&mut next.group_configs);
        if let Some(path) = &self.persist_groups {
            let all = next
                .group_configs
                .iter()
                .map(|(g, c)| (g.clone(), BTreeMap::clone(c)))
                .collect();
            crate::log::meta::save_group_configs(path, all).map_err(|e| {
                tracing::error!(error = %e, "could not persist group configs");
                KelpError::from(e)
            })?;
        }
        self.snapshot.store(Arc::new(next));
        Ok(())
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// Looks a topic up in the current snapshot.
    pub fn topic(&self, name: &str) -> Option<Arc<TopicMeta>> {
        self.snapshot.load().topics.get(name).cloned()
    }

    /// A topic to describe: a stored one, else Kafka's internal topic of that name as Kelp
    /// lists it ([`internal`]). Never for writing or reading records.
    pub fn described_topic(&self, name: &str) -> Option<Arc<TopicMeta>> {
        self.topic(name).or_else(|| {
            internal::is_internal(name)
                .then(|| Arc::new(internal::consumer_offsets(&self.cluster_id)))
        })
    }

    /// Every topic to describe: the stored ones, and Kafka's internal topic unless a stored
    /// topic has its name ([`internal`]). Unsorted.
    pub fn described_topics(&self) -> Vec<Arc<TopicMeta>> {
        let snap = self.snapshot.load();
        let offsets = (!snap.topics.contains_key(internal::CONSUMER_OFFSETS))
            .then(|| Arc::new(internal::consumer_offsets(&self.cluster_id)));
        snap.topics.values().cloned().chain(offsets).collect()
    }

    /// A topic to describe by id: a stored one, else Kafka's internal topic if it has `id`.
    pub fn described_topic_by_id(&self, id: &Uuid) -> Option<Arc<TopicMeta>> {
        self.snapshot.load().by_id.get(id).cloned().or_else(|| {
            let m = internal::consumer_offsets(&self.cluster_id);
            (m.id == *id).then(|| Arc::new(m))
        })
    }

    /// Creates a topic. `partitions` -1 means the default count. With `validate_only`
    /// nothing is published but every check runs.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<TopicMeta>, KelpError> {
        validate_topic_name(name)?;
        if internal::is_internal(name) {
            // Kafka's exists from the start here (see `internal`).
            return Err(KelpError::TopicAlreadyExists);
        }
        let partitions = if partitions == -1 {
            self.default_partitions
        } else {
            partitions
        };
        if partitions <= 0 {
            return Err(KelpError::InvalidPartitions(partitions));
        }
        if replication_factor != -1 && replication_factor != 1 {
            return Err(KelpError::InvalidReplicationFactor(replication_factor));
        }
        for (k, v) in &configs {
            topic_config::validate(k, v)?;
        }
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if self.snapshot.load().topics.contains_key(name) {
            return Err(KelpError::TopicAlreadyExists);
        }
        let meta = Arc::new(TopicMeta {
            name: name.to_string(),
            id: Uuid::new_v4(),
            partitions,
            configs,
        });
        if !validate_only {
            let m = meta.clone();
            self.store_and_publish(|s| {
                s.by_id.insert(m.id, m.clone());
                s.topics.insert(m.name.clone(), m);
            })?;
            tracing::info!(topic = name, partitions, "created topic");
        }
        Ok(meta)
    }

    /// Returns the topic, creating it with the default partition count when auto-creation
    /// is on. `Ok(None)`: unknown and not created.
    pub fn get_or_auto_create(
        &self,
        name: &str,
        allow: bool,
    ) -> Result<Option<Arc<TopicMeta>>, KelpError> {
        if let Some(t) = self.topic(name) {
            return Ok(Some(t));
        }
        if !(allow && self.auto_create) {
            return Ok(None);
        }
        match self.create_topic(name, -1, -1, BTreeMap::new(), false) {
            Ok(t) => Ok(Some(t)),
            // Lost a race with another shard's create: use the winner.
            Err(KelpError::TopicAlreadyExists) => Ok(self.topic(name)),
            Err(e) => Err(e),
        }
    }

    /// Publishes a topic found in the storage engine (SeaweedMQ) with its id and partition
    /// count; a known topic with the same id and count is returned as it is.
    pub fn adopt_topic(
        &self,
        name: &str,
        id: Uuid,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Arc<TopicMeta> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.topic(name);
        if let Some(t) = old
            .as_ref()
            .filter(|t| t.id == id && t.partitions == partitions && t.configs == configs)
        {
            return t.clone();
        }
        let m = Arc::new(TopicMeta {
            name: name.to_string(),
            id,
            partitions,
            configs,
        });
        if let Err(e) = self.replace_topic(old.as_deref(), &m) {
            tracing::warn!(topic = name, error = %e, "could not publish a SeaweedMQ topic");
        } else {
            tracing::info!(topic = name, partitions, "topic from SeaweedMQ");
        }
        m
    }

    /// Publishes a topic the storage engine just created, with its id and configs. If the
    /// topic refresh adopted it meanwhile, its configs are set on that entry.
    pub fn create_topic_with_id(
        &self,
        name: &str,
        id: Uuid,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicMeta>, KelpError> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let m = Arc::new(TopicMeta {
            name: name.to_string(),
            id,
            partitions,
            configs,
        });
        self.replace_topic(self.topic(name).as_deref(), &m)?;
        tracing::info!(topic = name, partitions, "created topic");
        Ok(m)
    }

    /// Publishes `m` in place of `old` (another incarnation of the same name, if any).
    fn replace_topic(&self, old: Option<&TopicMeta>, m: &Arc<TopicMeta>) -> Result<(), KelpError> {
        self.store_and_publish(|s| {
            if let Some(o) = old {
                s.by_id.remove(&o.id);
            }
            s.by_id.insert(m.id, m.clone());
            s.topics.insert(m.name.clone(), m.clone());
        })
    }

    /// CreatePartitions: raises the topic's partition count to `count` (more than it has).
    /// With `validate_only` nothing is published but every check runs.
    pub fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<Arc<TopicMeta>, KelpError> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let meta = self.topic(name).ok_or(KelpError::UnknownTopicOrPartition)?;
        if count <= meta.partitions {
            return Err(KelpError::PartitionsNotIncreased(meta.partitions, count));
        }
        let grown = Arc::new(TopicMeta {
            partitions: count,
            ..TopicMeta::clone(&meta)
        });
        if !validate_only {
            let m = grown.clone();
            self.store_and_publish(|s| {
                s.by_id.insert(m.id, m.clone());
                s.topics.insert(m.name.clone(), m);
            })?;
            tracing::info!(
                topic = name,
                from = meta.partitions,
                to = count,
                "added partitions"
            );
        }
        Ok(grown)
    }

    /// Removes a topic from the metadata; shards drop its partitions when told.
    pub fn delete_topic(&self, name: &str) -> Result<Arc<TopicMeta>, KelpError> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let meta = self.topic(name).ok_or(KelpError::UnknownTopicOrPartition)?;
        self.store_and_publish(|s| {
            s.topics.remove(name);
            s.by_id.remove(&meta.id);
        })?;
        tracing::info!(topic = name, "deleted topic");
        Ok(meta)
    }

    /// A fresh producer id for InitProducerId, from this broker's own counter.
    pub fn allocate_producer_id(&self) -> i64 {
        self.next_producer_id.fetch_add(1, Ordering::Relaxed)
    }

    /// A producer id from the blocks the storage engine handed out, if one is left.
    pub fn take_producer_id(&self) -> Option<i64> {
        let mut blocks = self
            .producer_blocks
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        loop {
            let b = blocks.front_mut()?;
            if let Some(id) = b.next() {
                return Some(id);
            }
            blocks.pop_front();
        }
    }

    /// Adds a block of producer ids the storage engine reserved for this broker.
    pub fn add_producer_ids(&self, block: std::ops::Range<i64>) {
        self.producer_blocks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn cluster() -> Cluster {
        Cluster::new(
            &Config::parse_from(["kelp", "--default-partitions", "3"]),
            1,
        )
    }

    #[test]
    fn create_delete_and_auto_create() {
        let c = cluster();
        let t = c
            .create_topic("orders", 4, 1, BTreeMap::new(), false)
            .unwrap();
        assert_eq!(t.partitions, 4);
        assert_eq!(
            c.create_topic("orders", 4, 1, BTreeMap::new(), false)
                .unwrap_err(),
            KelpError::TopicAlreadyExists
        );
        assert!(c.create_topic("x", 1, 3, BTreeMap::new(), false).is_err());
        assert!(c
            .create_topic("bad name", 1, 1, BTreeMap::new(), false)
            .is_err());
        assert!(c.create_topic("v", 1, 1, BTreeMap::new(), true).is_ok());
        assert!(c.topic("v").is_none(), "validate_only must not create");
        assert_eq!(
            c.get_or_auto_create("auto", true)
                .unwrap()
                .unwrap()
                .partitions,
            3
        );
        assert!(c.get_or_auto_create("nope", false).unwrap().is_none());
        let id = c.delete_topic("orders").unwrap().id;
        assert!(c.topic("orders").is_none());
        assert!(!c.snapshot().by_id.contains_key(&id));
        assert!(c.delete_topic("orders").is_err());
    }

    #[test]
    fn group_configs_are_checked_persisted_and_survive_a_restart() {
        let dir = std::env::temp_dir().join(format!("kelp-cluster-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(crate::log::meta::TOPICS_FILE);
        // A topics file from before group configs: loads, with none.
        std::fs::write(&path, br#"{"version":1,"topics":[]}"#).unwrap();
        let config = Config::parse_from(["kelp"]);
        let open = || Cluster::with_persistence(&config, 1, path.clone()).unwrap();
        let c = open();
        assert_eq!(c.group_config("g", "share.auto.offset.reset"), None);
        let set: BTreeMap<String, String> = [
            ("share.auto.offset.reset", "earliest"),
            ("share.record.lock.duration.ms", "20000"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
        c.set_group_configs("g", set.clone()).unwrap();
        let bad = BTreeMap::from([("share.record.lock.duration.ms".into(), "5".into())]);
        assert!(matches!(
            c.set_group_configs("g", bad),
            Err(KelpError::InvalidConfig(_))
        ));
        assert!(matches!(
            c.set_group_configs("", set.clone()),
            Err(KelpError::InvalidRequest(_))
        ));
        c.create_topic("t", 1, 1, BTreeMap::new(), false).unwrap();
        let version = c.snapshot().version;
        c.set_group_configs("h", set.clone()).unwrap();
        assert_eq!(c.snapshot().version, version, "topics did not change");

        let c = open();
        assert!(c.topic("t").is_some());
        assert_eq!(
            c.group_config("g", "share.auto.offset.reset").as_deref(),
            Some("earliest")
        );
        assert_eq!(*c.group_configs("g"), set);
        c.set_group_configs("g", BTreeMap::new()).unwrap();
        let c = open();
        assert!(c.group_configs("g").is_empty());
        assert!(!c.snapshot().group_configs.contains_key("g"));
        assert_eq!(*c.group_configs("h"), set);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn adopted_group_configs_do_not_undo_a_newer_local_change() {
        let c = cluster();
        let mine = BTreeMap::from([("share.isolation.level".into(), "read_committed".into())]);
        let theirs = BTreeMap::from([("share.auto.offset.reset".into(), "earliest".into())]);
        let since = c.group_config_changes();
        c.set_group_configs("g", mine.clone()).unwrap();
        // A re-read that began before the change above is ignored.
        c.adopt_group_configs(HashMap::from([("g".into(), theirs.clone())]), since);
        assert_eq!(*c.group_configs("g"), mine);
        // One that began after it is published, whole.
        let since = c.group_config_changes();
        c.adopt_group_configs(HashMap::from([("x".into(), theirs.clone())]), since);
        assert!(c.group_configs("g").is_empty());
        assert_eq!(*c.group_configs("x"), theirs);
    }
}
