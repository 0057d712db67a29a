//! Producer ids unique across every Kelp over one SeaweedMQ: handed out in blocks from a
//! counter on the filer (`/topics/kafka/.meta/kelp/producer_ids`, the next free id in
//! decimal), moved under the filer lock `kelp/producer-ids` so that two nodes never read
//! the same value. A block is stored as taken before any id of it is used; ids of a block a
//! node did not use (a restart) are skipped, never reused. Runs on the forwarder thread;
//! `cluster/` hands the ids out.

use std::ops::Range;
use std::time::{Duration, Instant};

use kelp_storage_client::{filer, lock};

use super::client::{storage, unavailable, Forwarder};
use crate::error::KelpError;

/// Filer directory and file name of the counter.
const DIR: &str = "/topics/kafka/.meta/kelp";
const FILE: &str = "producer_ids";
/// The lock that serialises moves of the counter.
const LOCK: &str = "kelp/producer-ids";
/// How long the lock is held at most (a node dying while holding it delays others by this).
const LOCK_TTL: Duration = Duration::from_secs(5);
/// How long to wait for the lock before giving up (the client retries InitProducerId).
const WAIT: Duration = Duration::from_secs(10);

/// The first id when the counter does not exist yet: after every id a clock-seeded counter
/// (each broker's own, before blocks existed) handed out until now.
fn first_id() -> i64 {
    crate::clock::now_ms() << 10
}

/// The counter a file holds.
fn decode(body: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(body)
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|&v| v >= 0)
        .ok_or_else(|| {
            format!(
                "not a producer id counter: {:?}",
                String::from_utf8_lossy(body)
            )
        })
}

impl Forwarder {
    /// Takes the next `n` producer ids for this node.
    pub(super) async fn allocate_producer_ids(&self, n: i64) -> Result<Range<i64>, KelpError> {
        let mut f = self.filer_client()?;
        let owner = format!("kelp pid {}", std::process::id());
        let until = Instant::now() + WAIT;
        let mut backoff = Duration::from_millis(20);
        let lease = loop {
            match lock::acquire(&mut f, LOCK, &owner, LOCK_TTL).await {
                Ok(lock::Acquired::Held(l)) => break l,
                Ok(lock::Acquired::Busy(by)) if Instant::now() < until => {
                    tracing::debug!(holder = %by, "producer id counter busy");
                }
                Ok(lock::Acquired::Busy(by)) => {
                    return Err(unavailable("producer id lock", format!("held by {by}")))
                }
                Err(e) => return Err(unavailable("producer id lock", e)),
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(500));
        };
        let taken = async {
            let start = match filer::read_file(&mut f, DIR, FILE).await {
                Ok(Some(body)) => decode(&body).map_err(|e| storage("producer id counter", e))?,
                Ok(None) => first_id(),
                Err(e) => return Err(storage("reading the producer id counter", e)),
            };
            let end = start
                .checked_add(n)
                .ok_or_else(|| storage("producer id counter", "exhausted"))?;
            filer::write_file(&mut f, DIR, FILE, end.to_string().into_bytes())
                .await
                .map_err(|e| storage("writing the producer id counter", e))?;
            Ok(start..end)
        }
        .await;
        if let Err(e) = lock::release(&mut f, &lease).await {
            tracing::debug!(error = %e, "producer id lock not released; it expires");
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_is_a_decimal_id() {
        assert_eq!(decode(b"1234\n"), Ok(1234));
        assert!(decode(b"-5").is_err());
        assert!(decode(b"twelve").is_err());
        assert!(first_id() > 1 << 50, "after clock-seeded ids");
    }
}
