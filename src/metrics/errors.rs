//! Requests and request errors by Kafka API: `kelp_request_errors_total{api,error}` counts
//! every non-zero error code of every response sent (what Kafka's RequestMetrics
//! ErrorsPerSec counts), `kelp_requests_by_api_total{api}` every request.
//!
//! Errors go to one process-wide table of relaxed atomics, indexed by API key and code: no
//! allocation and no lock where a response is built, and errors are rare enough that
//! cores sharing the table cost nothing. Names are made at scrape. Calls nothing but the
//! API name table of `protocol::versions` and the error names of the kafka-protocol crate.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use kafka_protocol::error::ResponseError;

/// API keys with their own slot (Kafka's keys are below 100).
pub const API_SLOTS: usize = 100;
/// Lowest error code with a slot of its own (UNKNOWN_SERVER_ERROR).
const CODE_MIN: i16 = -1;
/// Slots for codes `CODE_MIN..CODE_MIN + CODE_SLOTS`; codes outside share the last one.
const CODE_SLOTS: usize = 200;

/// Counts per (API key, code slot); the last slot of a row counts codes out of range.
static ERRORS: [[AtomicU64; CODE_SLOTS + 1]; API_SLOTS] =
    [const { [const { AtomicU64::new(0) }; CODE_SLOTS + 1] }; API_SLOTS];

fn code_slot(code: i16) -> usize {
    let i = i32::from(code) - i32::from(CODE_MIN);
    usize::try_from(i)
        .ok()
        .filter(|&i| i < CODE_SLOTS)
        .unwrap_or(CODE_SLOTS)
}

/// Counts one error code `code` of a response to API `api_key` (0: nothing to count).
pub fn count(api_key: i16, code: i16) {
    if code == 0 {
        return;
    }
    if let Some(row) = usize::try_from(api_key).ok().and_then(|k| ERRORS.get(k)) {
        row[code_slot(code)].fetch_add(1, Ordering::Relaxed);
    }
}

/// Kafka's name of an error code in upper snake case (`UNKNOWN_TOPIC_OR_PARTITION`);
/// `CODE_<n>` for a code the crate does not know.
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".to_string(),
        Some(ResponseError::Unknown(c)) => format!("CODE_{c}"),
        Some(e) => upper_snake(&e.to_string()),
    }
}

/// `UnknownTopicOrPartition` as `UNKNOWN_TOPIC_OR_PARTITION`.
fn upper_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, ch) in camel.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    out
}

/// Kafka's name of an API (`Produce`, `OffsetCommit`); `API_<n>` for a key Kelp does not
/// serve.
pub fn api_name(key: i16) -> String {
    crate::protocol::versions::SUPPORTED
        .iter()
        .find(|a| a.key == key)
        .map_or_else(|| format!("API_{key}"), |a| a.name.to_string())
}

/// Renders `kelp_request_errors_total`: only the (api, error) pairs seen so far.
pub fn render_errors(out: &mut String) {
    super::render::header(
        out,
        "kelp_request_errors_total",
        "counter",
        "Non-zero error codes in responses sent, by Kafka API and error (every top-level, topic, partition and group code, as Kafka's ErrorsPerSec counts them).",
    );
    for (key, row) in ERRORS.iter().enumerate() {
        let mut api = None;
        for (slot, n) in row.iter().enumerate() {
            let n = n.load(Ordering::Relaxed);
            if n == 0 {
                continue;
            }
            let key = key as i16;
            let api = api.get_or_insert_with(|| api_name(key));
            let error = if slot == CODE_SLOTS {
                "CODE_OUT_OF_RANGE".to_string()
            } else {
                error_name(slot as i16 + CODE_MIN)
            };
            let _ = writeln!(
                out,
                "kelp_request_errors_total{{api=\"{api}\",error=\"{error}\"}} {n}"
            );
        }
    }
}

/// Renders `kelp_requests_by_api_total`, summed over the shards' counts (`per_shard`).
pub fn render_requests(out: &mut String, per_shard: &[&[AtomicU64; API_SLOTS]]) {
    super::render::header(
        out,
        "kelp_requests_by_api_total",
        "counter",
        "Requests received, by Kafka API.",
    );
    for key in 0..API_SLOTS {
        let n: u64 = per_shard
            .iter()
            .map(|s| s[key].load(Ordering::Relaxed))
            .sum();
        if n > 0 {
            let _ = writeln!(
                out,
                "kelp_requests_by_api_total{{api=\"{}\"}} {n}",
                api_name(key as i16)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(56), "KAFKA_STORAGE_ERROR");
        assert_eq!(error_name(17), "INVALID_TOPIC_EXCEPTION");
        assert_eq!(error_name(9999), "CODE_9999");
        assert_eq!(api_name(0), "Produce");
        assert_eq!(api_name(8), "OffsetCommit");
        assert_eq!(api_name(99), "API_99");
    }

    #[test]
    fn errors_are_counted_by_api_and_code() {
        // The table is process-wide: this test owns API key 97, which Kelp does not serve.
        count(97, 0);
        count(97, 3);
        count(97, 3);
        count(97, 9999);
        let mut out = String::new();
        render_errors(&mut out);
        assert!(out.contains(
            "kelp_request_errors_total{api=\"API_97\",error=\"UNKNOWN_TOPIC_OR_PARTITION\"} 2\n"
        ));
        assert!(out
            .contains("kelp_request_errors_total{api=\"API_97\",error=\"CODE_OUT_OF_RANGE\"} 1\n"));
        assert!(!out.contains("api=\"API_97\",error=\"NONE\""));
        count(-5, 3);
        count(500, 3);
    }
}
