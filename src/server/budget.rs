//! The broker-wide budget for request bytes being read and handled (Kafka's
//! queued.max.request.bytes).
//!
//! One [`RequestMemory`] is shared by all shard cores. A request frame holds a [`Lease`] of
//! its length from it until its answer is ready: a big frame takes it before its body is read
//! (as Kafka reserves a request's buffer), a small one as it is taken off the read chunk. When
//! the budget is spent, a connection waits before reading more, so the kernel's socket buffers
//! and TCP flow control hold the clients back instead of Kelp's heap. Calls nothing of Kelp's;
//! `server::connection` is its user.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use event_listener::Event;

/// Read buffer of a connection with nothing in progress: idle connections hold only this.
pub const IDLE_CHUNK: usize = 1024;

/// What a request in progress holds besides its frame, leased with it: its task (the
/// handler's future, measured at 5,976 bytes), channels and the response being built. With
/// it the budget bounds requests in progress by their number as well as their bytes,
/// however many a connection pipelines (the default 512 MiB admits 65,536 tiny ones).
pub const REQUEST_OVERHEAD: usize = 8 * 1024;

/// The shared budget. Cheap to clone through `Arc`.
#[derive(Debug)]
pub struct RequestMemory {
    limit: usize,
    used: AtomicUsize,
    released: Event,
}

impl RequestMemory {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(RequestMemory {
            limit,
            used: AtomicUsize::new(0),
            released: Event::new(),
        })
    }

    /// Bytes currently held by leases.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The budget.
    pub fn limit(&self) -> usize {
        self.limit
    }

    fn try_take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|&t| t <= self.limit)
            })
            .is_ok()
    }

    /// Takes `n` bytes, waiting until other leases give enough back.
    async fn take(&self, n: usize) {
        loop {
            if self.try_take(n) {
                return;
            }
            // Listen before the second try, so a release in between is not missed.
            let listener = self.released.listen();
            if self.try_take(n) {
                return;
            }
            listener.await;
        }
    }

    fn give(&self, n: usize) {
        if n > 0 {
            self.used.fetch_sub(n, Ordering::AcqRel);
            self.released.notify(usize::MAX);
        }
    }
}

/// Bytes held from a [`RequestMemory`]; given back when dropped.
#[derive(Debug)]
pub struct Lease {
    pool: Arc<RequestMemory>,
    bytes: usize,
}

impl Lease {
    /// An empty lease on `pool`.
    pub fn empty(pool: &Arc<RequestMemory>) -> Self {
        Lease {
            pool: pool.clone(),
            bytes: 0,
        }
    }

    /// The lease of a request frame of `len` bytes: its length and the
    /// [`REQUEST_OVERHEAD`], waiting for the budget.
    pub async fn request(pool: &Arc<RequestMemory>, len: usize) -> Self {
        let mut lease = Lease::empty(pool);
        lease.resize(len + REQUEST_OVERHEAD).await;
        lease
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Grows or shrinks the lease to exactly `bytes`, waiting for the budget to grow it.
    pub async fn resize(&mut self, bytes: usize) {
        if bytes > self.bytes {
            self.pool.take(bytes - self.bytes).await;
        } else {
            self.pool.give(self.bytes - bytes);
        }
        self.bytes = bytes;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.pool.give(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn leases_wait_for_room_and_give_it_back() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let pool = RequestMemory::new(100);
                let mut a = Lease::empty(&pool);
                a.resize(50).await;
                let mut part = Lease::empty(&pool);
                part.resize(30).await;
                assert_eq!((a.bytes(), part.bytes(), pool.used()), (50, 30, 80));
                let mut b = Lease::empty(&pool);
                let p2 = pool.clone();
                let waiter = glommio::spawn_local(async move {
                    b.resize(40).await;
                    assert!(p2.used() <= 100);
                    b
                });
                glommio::timer::sleep(Duration::from_millis(20)).await;
                assert_eq!(pool.used(), 80, "the second lease must wait");
                drop(part);
                let b = waiter.await;
                assert_eq!((b.bytes(), pool.used()), (40, 90));
                drop((a, b));
                assert_eq!(pool.used(), 0);
            })
            .expect("executor")
            .join()
            .expect("join");
    }
}
