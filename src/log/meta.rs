//! Durable topic metadata: `<data-dir>/meta/topics.json`, names, ids, partition counts and
//! config overrides of every topic.
//!
//! Rewritten whole on every change (topics change rarely) through a temp file, fsync,
//! rename and directory fsync, so a crash leaves either the old or the new file. Called by
//! `cluster/` under its writer mutex, from any shard thread, hence plain `std::fs`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
#[cfg(test)]
use uuid::Uuid;

use super::LogError;

/// File name inside the meta directory.
pub const TOPICS_FILE: &str = "topics.json";

/// One topic as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredTopic {
    /// The topic's name.
    pub name: String,
    /// Topic id, hyphenated.
    pub id: String,
    /// Its partition count.
    pub partitions: i32,
    /// Its config overrides; absent in files written before topics had configs.
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct TopicsFile {
    version: u32,
    topics: Vec<StoredTopic>,
}

/// Path of the topics file under a data directory.
pub fn topics_path(data_dir: &Path) -> PathBuf {
    super::meta_dir(data_dir).join(TOPICS_FILE)
}

/// Loads the stored topics; a missing file means none.
pub fn load(path: &Path) -> Result<Vec<StoredTopic>, LogError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(LogError::Recovery(format!("{}: {e}", path.display()))),
    };
    let f: TopicsFile = serde_json::from_str(&text)
        .map_err(|e| LogError::Recovery(format!("{}: {e}", path.display())))?;
    Ok(f.topics)
}

/// Replaces the stored topics atomically.
pub fn save(path: &Path, topics: Vec<StoredTopic>) -> Result<(), LogError> {
    let err = |e: std::io::Error| LogError::Write(format!("{}: {e}", path.display()));
    let body = serde_json::to_vec_pretty(&TopicsFile { version: 1, topics })
        .map_err(|e| LogError::Write(e.to_string()))?;
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = std::fs::File::create(&tmp).map_err(err)?;
        f.write_all(&body).map_err(err)?;
        f.sync_all().map_err(err)?;
    }
    std::fs::rename(&tmp, path).map_err(err)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = std::env::temp_dir().join(format!("kelp-meta-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(TOPICS_FILE);
        assert!(load(&path).unwrap().is_empty());
        let t = StoredTopic {
            name: "orders".into(),
            id: Uuid::new_v4().to_string(),
            partitions: 3,
            configs: [("retention.ms".to_string(), "1000".to_string())].into(),
        };
        save(&path, vec![t.clone()]).unwrap();
        assert_eq!(load(&path).unwrap(), vec![t]);
        std::fs::write(&path, b"{not json").unwrap();
        assert!(load(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
