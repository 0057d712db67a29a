//! The SCRAM credentials of every user: an in-memory snapshot every shard reads (SASL
//! exchanges look users up synchronously) of the storage engine's cluster-wide records
//! (space [`SPACE`], one record per user), so they are durable where the data is and, over
//! SeaweedMQ, shared by every Kelp node. The shard does the storing and reading
//! (`shard/security.rs`); this module turns records into credentials and changes into
//! records, and calls nothing.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::refreshed::Refreshed;
use super::scram::{Credential, Mechanism, MIN_ITERATIONS};
use crate::error::KelpError;

/// The engine record space of SCRAM credentials.
pub const SPACE: &str = "scram-credentials";

/// One user's credentials, by mechanism (the stored record).
pub type UserCredentials = BTreeMap<Mechanism, Credential>;

/// Every user's SCRAM credentials.
#[derive(Default)]
pub struct Credentials {
    users: Refreshed<HashMap<String, UserCredentials>>,
    loaded: AtomicBool,
    loaded_event: event_listener::Event,
}

/// One change of AlterUserScramCredentials: set (`Some`) or delete (`None`) the credential
/// of `user` for `mechanism`.
#[derive(Debug, Clone)]
pub struct Change {
    /// The user.
    pub user: String,
    /// Which of its credentials.
    pub mechanism: Mechanism,
    /// The new credential, or None to delete it.
    pub credential: Option<Credential>,
}

impl Credentials {
    /// The credential of `user` for `mechanism`.
    pub fn get(&self, user: &str, mechanism: Mechanism) -> Option<Credential> {
        self.users.load().get(user)?.get(&mechanism).cloned()
    }

    /// Every user's mechanisms and iteration counts, by user name.
    pub fn describe(&self) -> BTreeMap<String, Vec<(Mechanism, i32)>> {
        self.users
            .load()
            .iter()
            .map(|(u, c)| {
                (
                    u.clone(),
                    c.iter().map(|(m, c)| (*m, c.iterations)).collect(),
                )
            })
            .collect()
    }

    /// Replaces the snapshot with the stored `records` (user, JSON); records that do not
    /// decode are logged and skipped (one bad file must not lock every user out).
    pub fn set_all(&self, records: Vec<(String, Vec<u8>)>) {
        self.users.set(Self::decode(records));
    }

    /// How many changes [`Credentials::put`] has made: taken before a re-read of the records
    /// and handed to [`Credentials::refresh`].
    pub fn changes(&self) -> u64 {
        self.users.changes()
    }

    /// Replaces the snapshot with `records` read after [`Credentials::changes`] returned
    /// `since`, unless a change was put in meanwhile (the records may predate it; the next
    /// re-read has it). True if replaced.
    pub fn refresh(&self, records: Vec<(String, Vec<u8>)>, since: u64) -> bool {
        self.users.refresh(Self::decode(records), since)
    }

    fn decode(records: Vec<(String, Vec<u8>)>) -> HashMap<String, UserCredentials> {
        let mut users = HashMap::new();
        for (user, body) in records {
            match serde_json::from_slice::<UserCredentials>(&body) {
                Ok(c) => {
                    users.insert(user, c);
                }
                Err(e) => {
                    tracing::warn!(%user, error = %e, "skipping an unreadable SCRAM credential record")
                }
            }
        }
        users
    }

    /// Lets the shards waiting in [`Credentials::wait_loaded`] go on: the stored credentials
    /// are read and the bootstrap users made.
    pub fn mark_loaded(&self) {
        if !self.loaded.swap(true, Ordering::AcqRel) {
            self.loaded_event.notify(usize::MAX);
        }
    }

    /// Resolves once [`Credentials::mark_loaded`] has run (shards wait for it before
    /// accepting connections, so no client is refused for credentials not read or bootstrap
    /// users not made yet).
    pub async fn wait_loaded(&self) {
        loop {
            if self.loaded.load(Ordering::Acquire) {
                return;
            }
            let listener = self.loaded_event.listen();
            if self.loaded.load(Ordering::Acquire) {
                return;
            }
            listener.await;
        }
    }

    /// `user`'s credentials after `changes`, and the record to store for them (None: delete
    /// the record, no credential is left).
    pub fn changed(
        &self,
        user: &str,
        changes: &[Change],
    ) -> Result<(UserCredentials, Option<Vec<u8>>), KelpError> {
        let mut creds = self.users.load().get(user).cloned().unwrap_or_default();
        for c in changes.iter().filter(|c| c.user == user) {
            match &c.credential {
                Some(cred) => creds.insert(c.mechanism, cred.clone()),
                None => creds.remove(&c.mechanism),
            };
        }
        let body = if creds.is_empty() {
            None
        } else {
            Some(serde_json::to_vec(&creds).map_err(|e| KelpError::Storage(e.to_string()))?)
        };
        Ok((creds, body))
    }

    /// Puts `user`'s credentials (once stored) into the snapshot.
    pub fn put(&self, user: &str, creds: UserCredentials) {
        self.users.change(|all| {
            let mut all = HashMap::clone(all);
            if creds.is_empty() {
                all.remove(user);
            } else {
                all.insert(user.to_string(), creds.clone());
            }
            all
        });
    }

    /// The changes that give every `USER:PASSWORD` line of `path` whose user has no
    /// credentials yet SCRAM-SHA-256 and SCRAM-SHA-512 ones.
    pub fn bootstrap(&self, path: &Path) -> anyhow::Result<Vec<Change>> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("--sasl-bootstrap-users {}: {e}", path.display()))?;
        let mut out = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((user, password)) = line
                .split_once(':')
                .filter(|(u, p)| !u.is_empty() && !p.is_empty())
            else {
                anyhow::bail!(
                    "--sasl-bootstrap-users {} line {}: expected USER:PASSWORD",
                    path.display(),
                    n + 1
                );
            };
            if self.users.load().contains_key(user) {
                continue;
            }
            out.extend(Mechanism::ALL.into_iter().map(|m| Change {
                user: user.to_string(),
                mechanism: m,
                credential: Some(Credential::from_password(m, password, MIN_ITERATIONS)),
            }));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stores `changes` as the shard does: the record, then the snapshot.
    fn alter(
        creds: &Credentials,
        store: &mut BTreeMap<String, Vec<u8>>,
        user: &str,
        changes: &[Change],
    ) {
        let (c, body) = creds.changed(user, changes).unwrap();
        match body {
            Some(b) => store.insert(user.to_string(), b),
            None => store.remove(user),
        };
        creds.put(user, c);
    }

    #[test]
    fn changes_records_and_bootstrap() {
        let mut store = BTreeMap::new();
        let creds = Credentials::default();
        creds.set_all(Vec::new());
        let c = Credential::from_password(Mechanism::Sha256, "pw", 4096);
        let set = Change {
            user: "alice".into(),
            mechanism: Mechanism::Sha256,
            credential: Some(c.clone()),
        };
        alter(&creds, &mut store, "alice", &[set]);
        // Another process reading the same records sees it.
        let other = Credentials::default();
        other.set_all(store.clone().into_iter().collect());
        assert_eq!(other.get("alice", Mechanism::Sha256), Some(c));
        assert_eq!(other.get("alice", Mechanism::Sha512), None);

        let dir = std::env::temp_dir().join(format!("kelp-boot-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("users");
        std::fs::write(&file, "# admins\nadmin:s3cr:et\nalice:other\n").unwrap();
        let boot = creds.bootstrap(&file).unwrap();
        // alice exists: left alone; admin gets both mechanisms.
        assert_eq!(boot.len(), 2);
        assert!(boot.iter().all(|c| c.user == "admin"));
        alter(&creds, &mut store, "admin", &boot);
        let admin = creds.get("admin", Mechanism::Sha512).unwrap();
        assert!(admin.matches(Mechanism::Sha512, "s3cr:et"));
        assert!(creds.bootstrap(&file).unwrap().is_empty());
        std::fs::write(&file, "nopassword\n").unwrap();
        assert!(creds.bootstrap(&file).is_err());

        let del = Change {
            user: "alice".into(),
            mechanism: Mechanism::Sha256,
            credential: None,
        };
        alter(&creds, &mut store, "alice", &[del]);
        assert!(!store.contains_key("alice"));
        store.insert("broken".into(), b"{".to_vec());
        other.set_all(store.into_iter().collect());
        assert!(!other.describe().contains_key("alice"));
        assert!(!other.describe().contains_key("broken"));
        assert_eq!(other.describe()["admin"].len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_reread_older_than_a_change_does_not_undo_it() {
        let mut store = BTreeMap::new();
        let creds = Credentials::default();
        creds.set_all(Vec::new());
        let since = creds.changes();
        let read: Vec<_> = store.clone().into_iter().collect();
        let set = Change {
            user: "carol".into(),
            mechanism: Mechanism::Sha512,
            credential: Some(Credential::from_password(Mechanism::Sha512, "pw", 4096)),
        };
        alter(&creds, &mut store, "carol", &[set]);
        assert!(!creds.refresh(read, since));
        assert!(creds.get("carol", Mechanism::Sha512).is_some());
        // A read after the change replaces the snapshot: another node deleted carol.
        let since = creds.changes();
        assert!(creds.refresh(Vec::new(), since));
        assert!(creds.get("carol", Mechanism::Sha512).is_none());
    }

    #[test]
    fn shards_wait_for_mark_loaded_not_the_first_read() {
        use futures::FutureExt;
        let creds = Credentials::default();
        creds.set_all(Vec::new());
        assert!(creds.wait_loaded().now_or_never().is_none());
        creds.mark_loaded();
        assert!(creds.wait_loaded().now_or_never().is_some());
    }
}
