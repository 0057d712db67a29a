//! The wall clock as Kafka speaks of it: milliseconds since the Unix epoch. Calls nothing.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in ms since the epoch (0 if the clock is set before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
