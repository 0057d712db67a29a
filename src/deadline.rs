//! Waiting for a future with a deadline, on a shard's glommio executor.
//!
//! Calls nothing of Kelp's: shard, forwarder and api code all use it, so it sits below them.
//! The future is polled only when it is woken or when the single timer fires; nothing here
//! re-polls on a period. (A periodic re-poll of a glommio shared channel registers one more
//! waker clone per poll, never released while the channel stays empty: the task's 16-bit
//! reference count overflowed after ~3 minutes and the shard panicked.)

use std::future::Future;
use std::time::Instant;

/// Awaits `f` until `deadline`: `None` if the deadline passed first (checked before the first
/// poll too, so a deadline already gone never starts the work).
pub async fn until<F: Future>(f: F, deadline: Instant) -> Option<F::Output> {
    let now = Instant::now();
    if now >= deadline {
        return None;
    }
    let timer = glommio::timer::sleep(deadline - now);
    futures::pin_mut!(f);
    futures::pin_mut!(timer);
    match futures::future::select(f, timer).await {
        futures::future::Either::Left((out, _)) => Some(out),
        futures::future::Either::Right(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn returns_the_output_or_none_at_the_deadline() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let soon = Instant::now() + Duration::from_secs(5);
                assert_eq!(until(async { 7 }, soon).await, Some(7));
                let t0 = Instant::now();
                let never = futures::future::pending::<()>();
                assert_eq!(until(never, t0 + Duration::from_millis(30)).await, None);
                assert!(t0.elapsed() >= Duration::from_millis(30));
                assert_eq!(until(async { 1 }, t0).await, None);
            })
            .expect("executor")
            .join()
            .expect("join");
    }
}
