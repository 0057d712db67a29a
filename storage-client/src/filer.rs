//! Small file operations on the SeaweedFS filer (`filer_pb.SeaweedFiler`).
//!
//! Kelp keeps small metadata files (consumer-group offsets, see [`crate::group_offsets`]) on
//! the filer with their content stored inline in the entry, as the Go gateway does. These
//! helpers wrap the RPCs and SeaweedFS's quirks: a missing entry is reported as a gRPC error
//! whose message contains [`NO_ENTRY`], and `CreateEntry`/`DeleteEntry` report failures in a
//! response field even when the call itself succeeds.

use std::time::{SystemTime, UNIX_EPOCH};

use tonic::transport::Channel;

use crate::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use crate::pb::filer_pb::{
    CreateEntryRequest, DeleteEntryRequest, Entry, FuseAttributes, ListEntriesRequest,
    LookupDirectoryEntryRequest,
};
use crate::{Error, Result};

/// The filer client type these helpers take.
pub type FilerClient = SeaweedFilerClient<Channel>;

/// Text of the filer's error for a missing entry (it does not use the NotFound code).
pub const NO_ENTRY: &str = "no entry is found in filer store";

/// Page size used by [`list`].
pub const LIST_PAGE: u32 = 1024;

/// File mode of files written by [`write_file`].
pub const FILE_MODE: u32 = 0o644;

fn join(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// True if `status` is the filer's way of saying the entry (or a parent) does not exist.
pub fn is_missing(status: &tonic::Status) -> bool {
    status.code() == tonic::Code::NotFound || status.message().contains(NO_ENTRY)
}

/// Looks up one entry; `Ok(None)` if it does not exist.
pub async fn lookup(client: &mut FilerClient, dir: &str, name: &str) -> Result<Option<Entry>> {
    let req = LookupDirectoryEntryRequest {
        directory: dir.to_owned(),
        name: name.to_owned(),
    };
    match client.lookup_directory_entry(req).await {
        Ok(resp) => Ok(resp.into_inner().entry),
        Err(s) if is_missing(&s) => Ok(None),
        Err(s) => Err(s.into()),
    }
}

/// Reads a small file stored inline; `Ok(None)` if the entry does not exist.
///
/// Directories and chunked (non-inline) files are rejected with [`Error::Filer`].
pub async fn read_file(client: &mut FilerClient, dir: &str, name: &str) -> Result<Option<Vec<u8>>> {
    let Some(entry) = lookup(client, dir, name).await? else {
        return Ok(None);
    };
    if entry.is_directory {
        return Err(Error::Filer {
            path: join(dir, name),
            message: "is a directory".into(),
        });
    }
    if entry.content.is_empty() && !entry.chunks.is_empty() {
        return Err(Error::Filer {
            path: join(dir, name),
            message: "file content is chunked, expected inline content".into(),
        });
    }
    Ok(Some(entry.content.to_vec()))
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Creates or overwrites `dir/name` with inline `content` (mode 0644, mtime/crtime now).
///
/// The filer creates missing parent directories. An error in the response body is returned
/// as [`Error::Filer`].
pub async fn write_file(
    client: &mut FilerClient,
    dir: &str,
    name: &str,
    content: Vec<u8>,
) -> Result<()> {
    let now = now_secs();
    let req = CreateEntryRequest {
        directory: dir.to_owned(),
        entry: Some(Entry {
            name: name.to_owned(),
            is_directory: false,
            attributes: Some(FuseAttributes {
                file_size: content.len() as u64,
                mtime: now,
                crtime: now,
                file_mode: FILE_MODE,
                ..Default::default()
            }),
            content: content.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let resp = client.create_entry(req).await?.into_inner();
    if !resp.error.is_empty() {
        return Err(Error::Filer {
            path: join(dir, name),
            message: resp.error,
        });
    }
    Ok(())
}

/// Deletes `dir/name` and its data; with `recursive`, also a non-empty directory.
///
/// Deleting an entry that does not exist succeeds (the filer reports no error for it).
pub async fn delete(
    client: &mut FilerClient,
    dir: &str,
    name: &str,
    recursive: bool,
) -> Result<()> {
    let req = DeleteEntryRequest {
        directory: dir.to_owned(),
        name: name.to_owned(),
        is_delete_data: true,
        is_recursive: recursive,
        ..Default::default()
    };
    let resp = match client.delete_entry(req).await {
        Ok(r) => r.into_inner(),
        Err(s) if is_missing(&s) => return Ok(()),
        Err(s) => return Err(s.into()),
    };
    if resp.error.is_empty() || resp.error.contains(NO_ENTRY) {
        Ok(())
    } else {
        Err(Error::Filer {
            path: join(dir, name),
            message: resp.error,
        })
    }
}

/// All entries of directory `dir`, in name order; empty if the directory does not exist.
///
/// Pages through `ListEntries` with `startFromFileName` ([`LIST_PAGE`] entries per call) until
/// a page comes back short.
pub async fn list(client: &mut FilerClient, dir: &str) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    let mut start = String::new();
    loop {
        let req = ListEntriesRequest {
            directory: dir.to_owned(),
            start_from_file_name: start.clone(),
            inclusive_start_from: false,
            limit: LIST_PAGE,
            ..Default::default()
        };
        let mut stream = match client.list_entries(req).await {
            Ok(r) => r.into_inner(),
            Err(s) if is_missing(&s) => return Ok(out),
            Err(s) => return Err(s.into()),
        };
        let mut page = 0u32;
        loop {
            let msg = match stream.message().await {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(s) if is_missing(&s) && out.is_empty() && page == 0 => return Ok(out),
                Err(s) => return Err(s.into()),
            };
            if let Some(e) = msg.entry {
                page += 1;
                start.clone_from(&e.name);
                out.push(e);
            }
        }
        if page < LIST_PAGE {
            return Ok(out);
        }
    }
}
