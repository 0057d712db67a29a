//! Keeping the cluster metadata in step with SeaweedMQ's topics at a cost that does not grow
//! with their number. A round reads three lists, whatever the topic count: the mq brokers
//! (from the master), the topic directories under `/topics/kafka` (with their creation
//! times) and the topic config files (inline, one directory), all from one call each. A
//! topic's SeaweedMQ configuration (partitions, incarnation, partition leaders) is asked
//! for only when its directory is new or made again, while the broker set has just
//! changed (leaders move), and in a full sweep every 60 s, which also catches a
//! leader moved by hand (`mq.balance`).
//!
//! Asking each topic every round, as the first version did, kept SeaweedMQ's broker and
//! filer at 0.3 of a core for 150 idle topics at a 500 ms refresh, and start-up waited for
//! one topic after another. Runs on the forwarder thread; publishes through `cluster/`.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use kelp_storage_client::filer;

use super::client::{storage, Forwarder, NAMESPACE};
use super::TopicInfo;
use crate::error::KelpError;

/// How often every topic's SeaweedMQ configuration is read again even without a sign of
/// change.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// How long after the broker set changed every round reads every topic: SeaweedMQ's
/// balancer moves leaders a while after the master saw the broker come or go.
const UNSETTLED_FOR: Duration = Duration::from_secs(30);

/// Topic configurations asked for at once.
const PARALLEL_LOOKUPS: usize = 8;

/// What the last rounds saw.
#[derive(Default)]
pub struct Seen {
    /// Per topic directory: its creation time when last looked up, and what that found
    /// (None: a directory that is no Kafka topic, or not yet).
    topics: HashMap<String, (i64, Option<TopicInfo>)>,
    /// The mq brokers the master listed.
    brokers: Vec<String>,
    /// The last full sweep.
    swept: Option<Instant>,
    /// Rounds sweep until then (the broker set changed).
    unsettled_until: Option<Instant>,
}

impl Forwarder {
    /// One round: publishes SeaweedMQ's Kafka topics (with their config overrides) in the
    /// cluster metadata; returns how many there are.
    pub(super) async fn sync_topics(&self) -> Result<usize, KelpError> {
        let now = Instant::now();
        self.rediscover_brokers(now).await;
        let dirs = self.topic_dirs().await?;
        let configs = self.config_files().await?;
        self.deleted
            .borrow_mut()
            .retain(|_, at| at.elapsed() < super::client::DELETED_MEMORY);
        let sweep = {
            let seen = self.topic_seen.borrow();
            seen.swept.is_none_or(|t| now >= t + SWEEP_EVERY)
                || seen.unsettled_until.is_some_and(|t| now < t)
        };
        let ask: Vec<(String, i64)> = {
            let seen = self.topic_seen.borrow();
            dirs.iter()
                .filter(|(name, crtime)| {
                    sweep || seen.topics.get(*name).is_none_or(|(c, _)| c != *crtime)
                })
                .map(|(n, c)| (n.clone(), *c))
                .collect()
        };
        let found: Vec<(String, i64, Result<Option<TopicInfo>, KelpError>)> = stream::iter(ask)
            .map(|(name, crtime)| async move {
                let r = self.topic_configuration(&name).await;
                (name, crtime, r)
            })
            .buffer_unordered(PARALLEL_LOOKUPS)
            .collect()
            .await;
        {
            let mut seen = self.topic_seen.borrow_mut();
            seen.topics.retain(|name, _| dirs.contains_key(name));
            for (name, crtime, r) in found {
                match r {
                    Ok(info) => {
                        seen.topics.insert(name, (crtime, info));
                    }
                    // Asked again next round.
                    Err(e) => {
                        seen.topics.remove(&name);
                        tracing::debug!(topic = %name, error = %e, "topic configuration not read");
                    }
                }
            }
            if sweep {
                seen.swept = Some(now);
            }
        }
        let topics: Vec<TopicInfo> = self
            .topic_seen
            .borrow()
            .topics
            .values()
            .filter_map(|(_, info)| info.clone())
            .filter(|t| !self.deleted.borrow().contains_key(&t.name))
            .collect();
        for mut t in topics {
            t.configs = match configs.get(&t.name) {
                Some(Some(body)) => super::topic_configs::decode(body, t.id),
                // Stored in chunks rather than inline: read on its own.
                Some(None) => self.read_topic_configs(&t.name, t.id).await?,
                None => BTreeMap::new(),
            };
            self.cluster
                .adopt_topic(&t.name, t.id, t.partitions, t.configs);
        }
        Ok(self
            .topic_seen
            .borrow()
            .topics
            .values()
            .filter(|(_, info)| info.is_some())
            .count())
    }

    /// Reads the mq brokers from the master again; a changed set (a broker came or went)
    /// makes the rounds of the next [`UNSETTLED_FOR`] read every topic.
    async fn rediscover_brokers(&self, now: Instant) {
        if let Err(e) = self.discover().await {
            tracing::debug!(error = %e, "mq brokers not listed");
            return;
        }
        let mut brokers = self.brokers.borrow().clone();
        brokers.sort();
        let mut seen = self.topic_seen.borrow_mut();
        if seen.brokers != brokers {
            if !seen.brokers.is_empty() {
                tracing::info!(
                    ?brokers,
                    "mq brokers changed: reading every topic's leaders"
                );
                seen.unsettled_until = Some(now + UNSETTLED_FOR);
            }
            seen.brokers = brokers;
        }
    }

    /// The directories under `/topics/kafka` that may be Kafka topics, with their creation
    /// times (a topic deleted and made again has a new directory).
    async fn topic_dirs(&self) -> Result<HashMap<String, i64>, KelpError> {
        let mut f = self.filer_client()?;
        let entries = filer::list(&mut f, &format!("/topics/{NAMESPACE}"))
            .await
            .map_err(|e| storage("listing topics", e))?;
        Ok(entries
            .into_iter()
            .filter(|e| e.is_directory && e.name != ".meta")
            .filter(|e| crate::cluster::validate_topic_name(&e.name).is_ok())
            .map(|e| {
                let crtime = e.attributes.map_or(0, |a| a.crtime);
                (e.name, crtime)
            })
            .collect())
    }

    /// Every topic config file by topic: its inline content, or None when stored in chunks.
    async fn config_files(&self) -> Result<HashMap<String, Option<Vec<u8>>>, KelpError> {
        let mut f = self.filer_client()?;
        let entries = filer::list(&mut f, super::topic_configs::ROOT)
            .await
            .map_err(|e| storage("listing topic configs", e))?;
        Ok(entries
            .into_iter()
            .filter(|e| !e.is_directory)
            .map(|e| {
                let body =
                    (!e.content.is_empty() || e.chunks.is_empty()).then(|| e.content.to_vec());
                (e.name, body)
            })
            .collect())
    }
}
