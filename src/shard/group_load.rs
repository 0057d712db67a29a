//! Which groups' offsets this shard has read from the store every node shares (SeaweedMQ's
//! filer), and the reads under way. A group new here (after a restart, or moved from
//! another node) has its offsets read once before any request of it is handled; requests
//! that arrive meanwhile wait for that read instead of starting their own. Two reads could
//! otherwise overlap with a commit between them: the later read, having fetched the stored
//! offsets before the commit, would put them back in memory over the committed ones, and
//! the group's consumers would resume from there — after a restart under a Kafka Streams
//! exactly-once application (its offsets committed by the transactions the restart
//! finished), records counted twice. Bookkeeping only; the caller does the reading.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::future::Future;

use futures::channel::oneshot;

use crate::error::KelpError;

/// The groups read since they last moved here, and the reads under way with their waiters.
#[derive(Default)]
pub struct GroupLoads {
    fresh: RefCell<HashSet<String>>,
    loading: RefCell<HashMap<String, Vec<oneshot::Sender<()>>>>,
}

impl GroupLoads {
    /// Returns once `group`'s offsets were read: at once if they were, after the read under
    /// way if there is one, else after `load` (called here). A failed read fails the caller
    /// that made it; those waiting on it then read themselves.
    pub async fn ensure<F, Fut>(&self, group: &str, load: F) -> Result<(), KelpError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<(), KelpError>>,
    {
        loop {
            if self.fresh.borrow().contains(group) {
                return Ok(());
            }
            let wait = {
                let mut loading = self.loading.borrow_mut();
                match loading.get_mut(group) {
                    Some(waiters) => {
                        let (tx, rx) = oneshot::channel();
                        waiters.push(tx);
                        Some(rx)
                    }
                    None => {
                        loading.insert(group.to_string(), Vec::new());
                        None
                    }
                }
            };
            let Some(rx) = wait else {
                // Wakes the waiters however this ends, the read future dropped included.
                let _wake = Loading { loads: self, group };
                let read = load().await;
                if read.is_ok() {
                    self.fresh.borrow_mut().insert(group.to_string());
                }
                return read;
            };
            // Read, failed or abandoned: look again.
            let _ = rx.await;
        }
    }

    /// Whether `group`'s offsets were read since it last moved here.
    #[cfg(test)]
    pub fn is_fresh(&self, group: &str) -> bool {
        self.fresh.borrow().contains(group)
    }

    /// The groups read here that `stays` no longer keeps here, forgotten: their offsets are
    /// read again if they come back.
    pub fn take_moved(&self, stays: impl Fn(&str) -> bool) -> Vec<String> {
        let mut fresh = self.fresh.borrow_mut();
        let moved: Vec<String> = fresh.iter().filter(|g| !stays(g)).cloned().collect();
        for g in &moved {
            fresh.remove(g);
        }
        moved
    }
}

/// A read under way; its end (or its future dropped) wakes the requests waiting on it.
struct Loading<'a> {
    loads: &'a GroupLoads,
    group: &'a str,
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        let waiters = self.loads.loading.borrow_mut().remove(self.group);
        for tx in waiters.unwrap_or_default() {
            let _ = tx.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use futures::executor::block_on;
    use futures::future::{join3, FutureExt};

    use super::*;

    /// A read that finishes when its gate is opened, with `result`.
    fn gated(
        calls: &Cell<u32>,
        gate: &RefCell<Option<oneshot::Receiver<()>>>,
        result: Result<(), KelpError>,
    ) -> impl Future<Output = Result<(), KelpError>> {
        calls.set(calls.get() + 1);
        let rx = gate.borrow_mut().take();
        async move {
            if let Some(rx) = rx {
                let _ = rx.await;
            }
            result
        }
    }

    #[test]
    fn requests_during_a_read_wait_for_it_instead_of_reading_again() {
        let loads = GroupLoads::default();
        let calls = Cell::new(0);
        let (open, gate) = oneshot::channel();
        let gate = RefCell::new(Some(gate));
        let load = || gated(&calls, &gate, Ok(()));
        let (a, b, ()) = block_on(join3(
            loads.ensure("g", load),
            loads.ensure("g", load),
            async {
                let _ = open.send(());
            },
        ));
        assert_eq!((a, b), (Ok(()), Ok(())));
        assert_eq!(calls.get(), 1, "one read for both requests");
        assert!(loads.is_fresh("g"));
        // Read already: no read at all.
        block_on(loads.ensure("g", load)).unwrap();
        assert_eq!(calls.get(), 1);
        // Another group is read on its own.
        block_on(loads.ensure("h", load)).unwrap();
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn a_failed_or_abandoned_read_leaves_the_waiters_to_read_themselves() {
        let loads = GroupLoads::default();
        let calls = Cell::new(0);
        let (open, gate) = oneshot::channel();
        let gate = RefCell::new(Some(gate));
        let failing = || gated(&calls, &gate, Err(KelpError::CoordinatorLoadInProgress));
        let (a, b, ()) = block_on(join3(
            loads.ensure("g", failing),
            loads.ensure("g", || gated(&calls, &RefCell::new(None), Ok(()))),
            async {
                let _ = open.send(());
            },
        ));
        assert!(a.is_err());
        assert_eq!(b, Ok(()));
        assert_eq!(calls.get(), 2);
        assert!(loads.is_fresh("g"));

        // A read whose request went away (its future dropped) wakes its waiters too.
        let (_never, gate) = oneshot::channel::<()>();
        let gate = RefCell::new(Some(gate));
        let calls = Cell::new(0);
        let mut first = Box::pin(loads.ensure("k", || gated(&calls, &gate, Ok(()))));
        assert!((&mut first).now_or_never().is_none());
        let mut second = Box::pin(loads.ensure("k", || gated(&calls, &RefCell::new(None), Ok(()))));
        assert!(
            (&mut second).now_or_never().is_none(),
            "waits for the first read"
        );
        drop(first);
        assert_eq!(block_on(second), Ok(()));
        assert_eq!(calls.get(), 2);

        // Moved away: read again when it comes back.
        assert_eq!(loads.take_moved(|g| g != "k"), vec!["k".to_string()]);
        assert!(!loads.is_fresh("k") && loads.is_fresh("g"));
    }
}
