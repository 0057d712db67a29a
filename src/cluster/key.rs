//! A partition's name, `(topic, partition)`, as the key of maps that own it, looked up from
//! a borrowed `(&str, i32)` without building an owned key.
//!
//! A shard looks its partitions up several times per append, and on several nodes checks
//! the partition's lease once per append; with `(String, i32)` keys each lookup copied the
//! topic's name into a fresh `String` (allocations that contended on malloc's lock with the
//! other core's frees: perf/results/allocs-ad39327). Maps keyed by `(String, i32)` or
//! `(Rc<str>, i32)` answer a [`Key`] instead: `map.get(key(&(topic, p)))`. Here, below both
//! the shards and the leases (`ownership`), so both can use it. Leaf module: calls only std.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::rc::Rc;

/// A `(topic, partition)` pair, however its topic is held.
pub trait TopicPartition {
    /// The topic's name and the partition's index.
    fn parts(&self) -> (&str, i32);
}

/// The borrowed form maps are looked up with.
pub type Key<'a> = dyn TopicPartition + 'a;

/// The lookup key for `(topic, partition)`.
pub fn key<'a>(pair: &'a (&'a str, i32)) -> &'a Key<'a> {
    pair
}

impl TopicPartition for (&str, i32) {
    fn parts(&self) -> (&str, i32) {
        (self.0, self.1)
    }
}

impl TopicPartition for (String, i32) {
    fn parts(&self) -> (&str, i32) {
        (&self.0, self.1)
    }
}

impl TopicPartition for (Rc<str>, i32) {
    fn parts(&self) -> (&str, i32) {
        (&self.0, self.1)
    }
}

// Hashes as the tuples do (the name as a `str`, then the index), which `Borrow` requires:
// an owned key and its borrowed form must land in the same bucket.
impl Hash for Key<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialEq for Key<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Key<'_> {}

impl<'a> Borrow<Key<'a>> for (String, i32) {
    fn borrow(&self) -> &Key<'a> {
        self
    }
}

impl<'a> Borrow<Key<'a>> for (Rc<str>, i32) {
    fn borrow(&self) -> &Key<'a> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn borrowed_lookups_find_owned_keys() {
        let mut by_string: HashMap<(String, i32), u8> = HashMap::new();
        let mut by_rc: HashMap<(Rc<str>, i32), u8> = HashMap::new();
        for (i, topic) in ["a", "orders", "orders.v2", ""].into_iter().enumerate() {
            for p in [0, 1, 7, i32::MAX] {
                by_string.insert((topic.to_string(), p), i as u8);
                by_rc.insert((Rc::from(topic), p), i as u8);
            }
        }
        for (i, topic) in ["a", "orders", "orders.v2", ""].into_iter().enumerate() {
            for p in [0, 1, 7, i32::MAX] {
                assert_eq!(by_string.get(key(&(topic, p))), Some(&(i as u8)));
                assert_eq!(by_rc.get(key(&(topic, p))), Some(&(i as u8)));
            }
        }
        assert_eq!(by_string.get(key(&("orders", 2))), None);
        assert_eq!(by_rc.get(key(&("order", 0))), None);
        assert_eq!(by_rc.get(key(&("ordersv2", 0))), None);
    }
}
