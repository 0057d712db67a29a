//! The shard's part in the cluster-wide security records (SCRAM credentials, ACLs): reading
//! them into [`crate::auth::credentials::Credentials`] and [`crate::auth::acl::Acls`] (at
//! start-up, with the bootstrap users, and over shared storage again every `records_every` to
//! see other nodes' changes) and storing AlterUserScramCredentials', CreateAcls' and
//! DeleteAcls' changes through the storage engine. Start-up and the re-read
//! run on shard 0; a change runs on the shard that received it.

use std::rc::Rc;
use std::time::Duration;

use anyhow::Context;

use super::Shard;
use crate::auth::acl::{self, AclBinding};
use crate::auth::credentials::{Change, SPACE};
use crate::error::KelpError;

impl Shard {
    /// Reads every user's credentials and creates the bootstrap users that have none; only
    /// then may the shards accept connections (a client of a bootstrap user is not refused
    /// on a shard that started serving before the user was made).
    pub async fn load_credentials(&self) -> anyhow::Result<()> {
        let creds = &self.cluster.credentials;
        let records = self
            .engine
            .records(SPACE)
            .await
            .context("reading the SCRAM credentials")?;
        creds.set_all(records);
        let acls = self
            .engine
            .records(acl::SPACE)
            .await
            .context("reading the ACLs")?;
        self.cluster.acls.set_all(acls);
        if let Some(path) = &self.config.sasl_bootstrap_users {
            let changes = creds.bootstrap(path)?;
            let mut users: Vec<&str> = changes.iter().map(|c| c.user.as_str()).collect();
            users.dedup();
            for user in users {
                self.alter_credentials(user, &changes)
                    .await
                    .with_context(|| format!("creating bootstrap user {user}"))?;
                tracing::info!(%user, "created SCRAM credentials for a bootstrap user");
            }
        }
        creds.mark_loaded();
        Ok(())
    }

    /// Applies `changes` of `user`: stored durably first, then seen by every shard.
    pub async fn alter_credentials(&self, user: &str, changes: &[Change]) -> Result<(), KelpError> {
        let creds = &self.cluster.credentials;
        let (new, body) = creds.changed(user, changes)?;
        self.engine.put_record(SPACE, user, body).await?;
        creds.put(user, new);
        Ok(())
    }

    /// Stores new ACL bindings, then lets every shard see them.
    pub async fn add_acls(&self, bindings: &[AclBinding]) -> Result<(), KelpError> {
        for b in bindings {
            let body = serde_json::to_vec(b).map_err(|e| KelpError::Storage(e.to_string()))?;
            self.engine
                .put_record(acl::SPACE, &b.key(), Some(body))
                .await?;
        }
        self.cluster.acls.add(bindings);
        Ok(())
    }

    /// Deletes ACL bindings' records, then takes them out of every shard's view.
    pub async fn remove_acls(&self, bindings: &[AclBinding]) -> Result<(), KelpError> {
        for b in bindings {
            self.engine.put_record(acl::SPACE, &b.key(), None).await?;
        }
        self.cluster.acls.remove(bindings);
        Ok(())
    }

    /// Re-reads the credentials and ACLs every `every`, forever: other Kelp nodes over the same
    /// storage change them too.
    pub async fn run_records_refresh(self: Rc<Self>, every: Duration) {
        loop {
            glommio::timer::sleep(every).await;
            // A change made here while the records are read is kept: refresh skips a read
            // that may predate it.
            let since = self.cluster.credentials.changes();
            match self.engine.records(SPACE).await {
                Ok(records) => {
                    self.cluster.credentials.refresh(records, since);
                }
                Err(e) => tracing::warn!(error = %e,
                    "cannot re-read the SCRAM credentials; keeping the ones read before"),
            }
            let since = self.cluster.acls.changes();
            match self.engine.records(acl::SPACE).await {
                Ok(records) => {
                    self.cluster.acls.refresh(records, since);
                }
                Err(e) => tracing::warn!(error = %e,
                    "cannot re-read the ACLs; keeping the ones read before"),
            }
        }
    }
}
