//! A snapshot every shard reads without locking, of records other nodes change too: it is
//! replaced by each re-read of the stored records and changed in place by this node's own
//! changes, which are counted so that a re-read begun before a change cannot undo it
//! (the next re-read has it). Holds SCRAM credentials and ACL bindings; calls nothing.

use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, Guard};

/// The snapshot and the count of this node's changes.
#[derive(Default)]
pub struct Refreshed<T> {
    current: ArcSwap<T>,
    /// Locked around a change and around a re-read's replacement, so the check of the count
    /// and the replacement are one step against a change on another shard.
    changes: Mutex<u64>,
}

impl<T> Refreshed<T> {
    /// The snapshot now.
    pub fn load(&self) -> Guard<Arc<T>> {
        self.current.load()
    }

    /// Replaces the snapshot (the first read of the records).
    pub fn set(&self, value: T) {
        let _changes = self.lock();
        self.current.store(Arc::new(value));
    }

    /// How many changes this node made: taken before a re-read and handed to
    /// [`Refreshed::refresh`].
    pub fn changes(&self) -> u64 {
        *self.lock()
    }

    /// Replaces the snapshot with `value`, read after [`Refreshed::changes`] returned
    /// `since`, unless a change was made meanwhile. True if replaced.
    pub fn refresh(&self, value: T, since: u64) -> bool {
        let changes = self.lock();
        if *changes != since {
            return false;
        }
        self.current.store(Arc::new(value));
        true
    }

    /// This node's own change (once stored): the snapshot becomes `f(snapshot)`.
    pub fn change(&self, f: impl Fn(&T) -> T) {
        let mut changes = self.lock();
        *changes += 1;
        self.current.rcu(|cur| f(cur));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, u64> {
        self.changes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reread_older_than_a_change_does_not_undo_it() {
        let r: Refreshed<Vec<u8>> = Refreshed::default();
        r.set(vec![1]);
        let since = r.changes();
        r.change(|v| [v.as_slice(), &[2]].concat());
        assert!(!r.refresh(vec![1], since));
        assert_eq!(**r.load(), [1, 2]);
        assert!(r.refresh(vec![3], r.changes()));
        assert_eq!(**r.load(), [3]);
    }
}
