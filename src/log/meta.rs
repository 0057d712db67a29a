//! Durable metadata: `<data-dir>/meta/topics.json`, names, ids, partition counts and
//! config overrides of every topic; `<data-dir>/meta/group-configs.json`, every group's
//! config overrides (a file of its own, so that topics files written before groups had
//! configs load unchanged); and `<data-dir>/meta/<space>/`, small keyed records (SCRAM
//! credentials, ACLs), a file each.
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

/// File name of the group config overrides inside the meta directory.
pub const GROUP_CONFIGS_FILE: &str = "group-configs.json";

/// Every group's config overrides, by group.
pub type GroupConfigs = BTreeMap<String, BTreeMap<String, String>>;

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
    let body = serde_json::to_vec_pretty(&TopicsFile { version: 1, topics })
        .map_err(|e| LogError::Write(e.to_string()))?;
    write_atomic(path, &body)
}

#[derive(Debug, Serialize, Deserialize)]
struct GroupConfigsFile {
    version: u32,
    groups: GroupConfigs,
}

/// Loads the stored group config overrides; a missing file means none.
pub fn load_group_configs(path: &Path) -> Result<GroupConfigs, LogError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(GroupConfigs::new()),
        Err(e) => return Err(LogError::Recovery(format!("{}: {e}", path.display()))),
    };
    let f: GroupConfigsFile = serde_json::from_str(&text)
        .map_err(|e| LogError::Recovery(format!("{}: {e}", path.display())))?;
    Ok(f.groups)
}

/// Replaces the stored group config overrides atomically.
pub fn save_group_configs(path: &Path, groups: GroupConfigs) -> Result<(), LogError> {
    let body = serde_json::to_vec_pretty(&GroupConfigsFile { version: 1, groups })
        .map_err(|e| LogError::Write(e.to_string()))?;
    write_atomic(path, &body)
}

/// Replaces `path` with `body`: temp file, fsync, rename, directory fsync.
fn write_atomic(path: &Path, body: &[u8]) -> Result<(), LogError> {
    let err = |e: std::io::Error| LogError::Write(format!("{}: {e}", path.display()));
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = std::fs::File::create(&tmp).map_err(err)?;
        f.write_all(body).map_err(err)?;
        f.sync_all().map_err(err)?;
    }
    std::fs::rename(&tmp, path).map_err(err)?;
    sync_parent(path)
}

fn sync_parent(path: &Path) -> Result<(), LogError> {
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| LogError::Write(format!("{}: {e}", dir.display())))?;
    }
    Ok(())
}

/// Directory of the records of `space` (SCRAM credentials, ACLs) under a data directory:
/// one file per record.
pub fn records_dir(data_dir: &Path, space: &str) -> PathBuf {
    super::meta_dir(data_dir).join(space)
}

/// Every record in `dir` (none when it does not exist) by file name, but for the files
/// `name_ok` refuses (a crash's temp file).
pub fn list_records(
    dir: &Path,
    name_ok: impl Fn(&str) -> bool,
) -> Result<Vec<(String, Vec<u8>)>, LogError> {
    let err = |e: std::io::Error| LogError::Recovery(format!("{}: {e}", dir.display()));
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(err(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(err)?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name_ok(&name) {
            out.push((name, std::fs::read(entry.path()).map_err(err)?));
        }
    }
    out.sort();
    Ok(out)
}

/// Writes (`Some`) or deletes (`None`) the record file `name` in `dir`, durably.
pub fn put_record(dir: &Path, name: &str, value: Option<&[u8]>) -> Result<(), LogError> {
    let path = dir.join(name);
    match value {
        Some(body) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| LogError::Write(format!("{}: {e}", dir.display())))?;
            write_atomic(&path, body)
        }
        None => match std::fs::remove_file(&path) {
            Ok(()) => sync_parent(&path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(LogError::Write(format!("{}: {e}", path.display()))),
        },
    }
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

    #[test]
    fn group_configs_round_trip() {
        let dir = std::env::temp_dir().join(format!("kelp-groups-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(GROUP_CONFIGS_FILE);
        assert!(load_group_configs(&path).unwrap().is_empty());
        let groups: GroupConfigs = [(
            "g".to_string(),
            [(
                "share.auto.offset.reset".to_string(),
                "earliest".to_string(),
            )]
            .into(),
        )]
        .into();
        save_group_configs(&path, groups.clone()).unwrap();
        assert_eq!(load_group_configs(&path).unwrap(), groups);
        std::fs::write(&path, b"{not json").unwrap();
        assert!(load_group_configs(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn records_a_file_each() {
        let dir = std::env::temp_dir().join(format!("kelp-records-{}", Uuid::new_v4()));
        let ok = |n: &str| !n.ends_with(".tmp");
        assert!(list_records(&dir, ok).unwrap().is_empty());
        put_record(&dir, "alice", Some(b"1")).unwrap();
        put_record(&dir, "bob", Some(b"2")).unwrap();
        put_record(&dir, "bob", Some(b"3")).unwrap();
        std::fs::write(dir.join("bob.tmp"), b"crash").unwrap();
        assert_eq!(
            list_records(&dir, ok).unwrap(),
            vec![
                ("alice".into(), b"1".to_vec()),
                ("bob".into(), b"3".to_vec())
            ]
        );
        put_record(&dir, "bob", None).unwrap();
        put_record(&dir, "nobody", None).unwrap();
        assert_eq!(list_records(&dir, ok).unwrap().len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
