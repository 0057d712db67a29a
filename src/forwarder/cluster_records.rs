//! The cluster-wide records of Kelp nodes over one SeaweedMQ (SCRAM credentials, ACLs): one
//! filer file per record at `/topics/kafka/.meta/kelp/clusters/<cluster>/<space>/<file>`, so
//! every node reads the same ones and writers of different records never overwrite each
//! other. Runs on the forwarder thread for the SeaweedMQ engine, which names the files.

use kelp_storage_client::filer;

use super::client::{storage, Forwarder};
use crate::error::KelpError;

impl Forwarder {
    fn records_dir(&self, space: &str) -> String {
        format!(
            "{}/{}/{space}",
            super::membership::CLUSTERS,
            self.cluster.cluster_id
        )
    }

    /// Every record file of `space`, by file name.
    pub(super) async fn records(&self, space: &str) -> Result<super::RecordFiles, KelpError> {
        let dir = self.records_dir(space);
        let mut f = self.filer_client()?;
        let mut out = Vec::new();
        for e in filer::list(&mut f, &dir)
            .await
            .map_err(|e| storage("listing records", e))?
        {
            let body = if e.content.is_empty() {
                // Stored in chunks rather than inline: read it.
                filer::read_file(&mut f, &dir, &e.name)
                    .await
                    .map_err(|e| storage("reading a record", e))?
                    .unwrap_or_default()
            } else {
                e.content.to_vec()
            };
            out.push((e.name, body));
        }
        Ok(out)
    }

    /// Writes (`Some`) or deletes (`None`) the record file `name` of `space`.
    pub(super) async fn put_record(
        &self,
        space: &str,
        name: &str,
        value: Option<Vec<u8>>,
    ) -> Result<(), KelpError> {
        let dir = self.records_dir(space);
        let mut f = self.filer_client()?;
        match value {
            Some(body) => filer::write_file(&mut f, &dir, name, body)
                .await
                .map_err(|e| storage("writing a record", e)),
            None => filer::delete(&mut f, &dir, name, false)
                .await
                .map_err(|e| storage("deleting a record", e)),
        }
    }
}
