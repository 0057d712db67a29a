//! Group config overrides (ConfigResource GROUP) over SeaweedMQ: the SeaweedMQ engine stores
//! each group's as a cluster-wide record ([`crate::cluster::group_config::SPACE`], one filer
//! file per group under the cluster's directory, [`super::cluster_records`]); this reads them
//! all back into the cluster metadata, at start-up and with every topic refresh, so that a
//! restart keeps them and every Kelp node over the same SeaweedMQ sees the others' changes.
//! Runs on the forwarder thread; publishes through `cluster/`.

use std::collections::HashMap;

use super::client::Forwarder;
use crate::cluster::group_config;
use crate::error::KelpError;

impl Forwarder {
    /// One round: publishes every group's stored overrides (a record that does not decode is
    /// skipped with a warning).
    pub(super) async fn sync_group_configs(&self) -> Result<(), KelpError> {
        let since = self.cluster.group_config_changes();
        let files = self.records(group_config::SPACE).await?;
        let mut groups = HashMap::with_capacity(files.len());
        for (name, body) in files {
            match group_config::decode(&body) {
                Some((group, configs)) => {
                    groups.insert(group, configs);
                }
                None => tracing::warn!(file = %name, "a group configs record does not decode"),
            }
        }
        self.cluster.adopt_group_configs(groups, since);
        Ok(())
    }
}
