//! Whether the broker serves: `GET /health` and `kelp_ready` / `kelp_shard_up`.
//!
//! Ready means every shard core of the configuration has started and registered, bound its
//! listeners, and its executor is alive: each shard refreshes a heartbeat from a timer task
//! of its own every [`HEARTBEAT_EVERY`], and one older than [`HEARTBEAT_STALE`] means that
//! core stopped running tasks (a stuck or spinning task, a dead executor). The rule is a pure
//! function of the registry and a clock reading, so tests inject the time. Calls nothing.

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{Registry, ShardStats};

/// How often a shard refreshes its heartbeat.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
/// A heartbeat older than this marks its shard as not serving.
pub const HEARTBEAT_STALE: Duration = Duration::from_secs(5);

/// Milliseconds on the process's monotonic clock, from 1 (0 stands for "never").
pub fn mono_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_millis())
        .unwrap_or(u64::MAX)
        .saturating_add(1)
}

/// Why one shard does not serve, if it does not, at monotonic time `now_ms`.
fn shard_problem(s: &ShardStats, now_ms: u64) -> Option<String> {
    if !s.serving.load(Ordering::Relaxed) {
        return Some("not started".to_string());
    }
    let beat = s.heartbeat_ms.load(Ordering::Relaxed);
    if beat == 0 {
        return Some("no heartbeat yet".to_string());
    }
    let age = now_ms.saturating_sub(beat);
    (age > HEARTBEAT_STALE.as_millis() as u64)
        .then(|| format!("no heartbeat for {:.1} s", age as f64 / 1000.0))
}

/// What is not ready at monotonic time `now_ms`, one line each; empty when every shard
/// serves.
pub fn problems(reg: &Registry, now_ms: u64) -> Vec<String> {
    if reg.is_shutting_down() {
        return vec!["shutting down".to_string()];
    }
    let expected = reg.expected_cores();
    if expected.is_empty() {
        return vec!["starting: shards not launched yet".to_string()];
    }
    let shards = reg.shards();
    let mut out = Vec::new();
    // Each configured core once: a shard registers with its core as it starts.
    let mut registered = vec![false; shards.len()];
    for core in expected {
        let found = shards
            .iter()
            .enumerate()
            .find(|(i, s)| s.core == core && !registered[*i]);
        match found {
            None => out.push(format!("core {core}: shard not started")),
            Some((i, s)) => {
                registered[i] = true;
                if let Some(p) = shard_problem(s, now_ms) {
                    out.push(format!("shard {} (core {}): {p}", s.shard, s.core));
                }
            }
        }
    }
    out
}

/// The `/health` answer at monotonic time `now_ms`: (ready, body).
pub fn check(reg: &Registry, now_ms: u64) -> (bool, String) {
    let p = problems(reg, now_ms);
    if p.is_empty() {
        (true, "ready\n".to_string())
    } else {
        (false, p.iter().map(|l| format!("{l}\n")).collect())
    }
}

/// Renders `kelp_ready` and `kelp_shard_up` at monotonic time `now_ms`.
pub fn render(out: &mut String, reg: &Registry, now_ms: u64) {
    let ready = problems(reg, now_ms).is_empty();
    super::render::header(
        out,
        "kelp_ready",
        "gauge",
        "1 when every shard serves (started, listeners bound, heartbeat fresh), as GET /health answers 200.",
    );
    let _ = writeln!(out, "kelp_ready {}", u8::from(ready));
    super::render::header(
        out,
        "kelp_shard_up",
        "gauge",
        "1 when the shard serves: started, listeners bound and its executor's heartbeat fresh.",
    );
    let down = reg.is_shutting_down();
    for s in reg.shards() {
        let up = !down && shard_problem(&s, now_ms).is_none();
        let _ = writeln!(
            out,
            "kelp_shard_up{{shard=\"{}\",core=\"{}\"}} {}",
            s.shard,
            s.core,
            u8::from(up)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn ready_only_when_every_shard_serves_with_a_fresh_heartbeat() {
        let reg = Registry::default();
        let (ok, body) = check(&reg, 10);
        assert!(!ok);
        assert_eq!(body, "starting: shards not launched yet\n");
        reg.expect_cores(&[0, 1]);
        let a = Arc::new(ShardStats::new(0, 0));
        reg.register(a.clone());
        assert_eq!(
            check(&reg, 10).1,
            "shard 0 (core 0): not started\ncore 1: shard not started\n"
        );
        let b = Arc::new(ShardStats::new(1, 1));
        reg.register(b.clone());
        for s in [&a, &b] {
            s.serving.store(true, Ordering::Relaxed);
            s.heartbeat_ms.store(1_000, Ordering::Relaxed);
        }
        assert_eq!(check(&reg, 6_000), (true, "ready\n".to_string()));
        let mut text = String::new();
        render(&mut text, &reg, 6_000);
        assert!(text.contains("kelp_ready 1\n"));
        assert!(text.contains("kelp_shard_up{shard=\"1\",core=\"1\"} 1\n"));
        // Shard 1's executor stopped beating: stale after 5 s.
        a.heartbeat_ms.store(8_000, Ordering::Relaxed);
        let (ok, body) = check(&reg, 8_200);
        assert!(!ok);
        assert_eq!(body, "shard 1 (core 1): no heartbeat for 7.2 s\n");
        let mut text = String::new();
        render(&mut text, &reg, 8_200);
        assert!(text.contains("kelp_ready 0\n"));
        assert!(text.contains("kelp_shard_up{shard=\"0\",core=\"0\"} 1\n"));
        assert!(text.contains("kelp_shard_up{shard=\"1\",core=\"1\"} 0\n"));
        b.heartbeat_ms.store(8_100, Ordering::Relaxed);
        assert!(check(&reg, 8_200).0);
        reg.shutting_down.store(true, Ordering::Relaxed);
        assert_eq!(check(&reg, 8_200), (false, "shutting down\n".to_string()));
    }

    #[test]
    fn the_monotonic_clock_never_reads_never() {
        assert!(mono_ms() >= 1);
    }
}
