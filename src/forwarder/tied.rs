//! Small JSON files on the filer that belong to one incarnation of a topic (its log starts,
//! its config overrides): `{"topic_id":"<uuid>", ...fields}`. A topic deleted and made again
//! (by anyone, even behind Kelp's back) has another id, so what the old one left is ignored.
//! The codec is pure (used by [`super::log_start`] and [`super::topic_configs`]); the
//! per-partition files (leader epochs, producer journals) are read and written through
//! `Forwarder::read_tied` and `Forwarder::write_tied`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use kelp_storage_client::filer;

use super::client::{storage, unavailable, Forwarder};
use crate::error::KelpError;

#[derive(Serialize, Deserialize)]
struct Tied<T> {
    topic_id: String,
    #[serde(flatten)]
    value: T,
}

/// The file body holding `value` for the topic incarnation `id`.
pub fn encode<T: Serialize>(value: T, id: uuid::Uuid) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&Tied {
        topic_id: id.to_string(),
        value,
    })
}

/// The value a file holds for the topic incarnation `id`; None for another incarnation or a
/// body that does not decode (logged: it is not this topic's either).
pub fn decode<T: DeserializeOwned>(body: &[u8], id: uuid::Uuid, what: &str) -> Option<T> {
    match serde_json::from_slice::<Tied<T>>(body) {
        Ok(t) if t.topic_id == id.to_string() => Some(t.value),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(what, error = %e, "undecodable file ignored");
            None
        }
    }
}

impl Forwarder {
    /// The value `dir/name` holds for the topic incarnation `id` (none, or another
    /// incarnation's: the default); `what` names it in errors and logs.
    pub(super) async fn read_tied<T: DeserializeOwned + Default>(
        &self,
        dir: &str,
        name: &str,
        id: uuid::Uuid,
        what: &str,
    ) -> Result<T, KelpError> {
        let mut f = self.filer_client()?;
        let body = filer::read_file(&mut f, dir, name)
            .await
            .map_err(|e| unavailable(what, e))?;
        Ok(body
            .and_then(|b| decode::<T>(&b, id, what))
            .unwrap_or_default())
    }

    /// Writes `value` for the topic incarnation `id` to `dir/name`.
    pub(super) async fn write_tied<T: Serialize>(
        &self,
        dir: &str,
        name: &str,
        value: T,
        id: uuid::Uuid,
        what: &str,
    ) -> Result<(), KelpError> {
        let body = encode(value, id).map_err(|e| storage(what, e))?;
        let mut f = self.filer_client()?;
        filer::write_file(&mut f, dir, name, body)
            .await
            .map_err(|e| storage(what, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
    struct V {
        n: i64,
    }

    #[test]
    fn a_value_belongs_to_one_topic_incarnation() {
        let id = uuid::Uuid::from_u128(7);
        let body = encode(V { n: 42 }, id).unwrap();
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            r#"{"topic_id":"00000000-0000-0000-0000-000000000007","n":42}"#
        );
        assert_eq!(decode::<V>(&body, id, "v"), Some(V { n: 42 }));
        assert_eq!(decode::<V>(&body, uuid::Uuid::from_u128(8), "v"), None);
        assert_eq!(decode::<V>(b"{not json", id, "v"), None);
    }
}
