//! The server-side assignors of KIP-848 consumer groups: `uniform` (the default; sticky and
//! balanced) and `range` (per topic, contiguous ranges, so co-partitioned topics line up).
//!
//! Pure functions of the members' subscriptions, the topics' partition counts and (uniform)
//! the previous target assignment. Calls nothing.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::Assignment;

/// The assignor a member names when it names none (Kafka's default).
pub const DEFAULT: &str = "uniform";

/// The assignors served, as members name them in `server_assignor`.
pub const NAMES: &[&str] = &["uniform", "range"];

/// One member as an assignor sees it.
pub struct Subscriber<'a> {
    /// Member id; assignments are keyed by it and ties broken by it.
    pub id: &'a str,
    /// Ids of the existing topics it subscribes to.
    pub topics: BTreeSet<Uuid>,
    /// Its previous target assignment (uniform keeps what it can).
    pub previous: Option<&'a Assignment>,
}

/// The target assignment of every member, by member id.
pub fn assign(
    assignor: &str,
    members: &[Subscriber<'_>],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    match assignor {
        "range" => range(members, partitions),
        _ => uniform(members, partitions),
    }
}

/// Each topic's partitions split into contiguous ranges over its subscribers in member-id
/// order, the first `partitions % subscribers` getting one more.
fn range(
    members: &[Subscriber<'_>],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.id.to_string(), Assignment::new()))
        .collect();
    for (topic, &count) in partitions {
        let mut subs: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.contains(topic))
            .map(|m| m.id)
            .collect();
        if subs.is_empty() || count <= 0 {
            continue;
        }
        subs.sort_unstable();
        let n = subs.len() as i32;
        let (each, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, id) in subs.iter().enumerate() {
            let take = each + i32::from((i as i32) < extra);
            if take > 0 {
                let set = out.get_mut(*id).map(|a| a.entry(*topic).or_default());
                if let Some(set) = set {
                    set.extend(next..next + take);
                }
            }
            next += take;
        }
    }
    out
}

/// Balanced and sticky: a partition stays with its previous owner while that member still
/// subscribes to its topic; the rest go to the least-loaded subscriber; then partitions move
/// from a member to an eligible one holding at least two fewer until no such move is left,
/// so counts differ by at most one wherever subscriptions allow.
fn uniform(
    members: &[Subscriber<'_>],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut order: Vec<&Subscriber<'_>> = members.iter().collect();
    order.sort_by_key(|m| m.id);
    // Owner (index into `order`) of every partition to assign.
    let mut owner: BTreeMap<(Uuid, i32), Option<usize>> = BTreeMap::new();
    for (topic, &count) in partitions {
        if order.iter().any(|m| m.topics.contains(topic)) {
            for p in 0..count.max(0) {
                owner.insert((*topic, p), None);
            }
        }
    }
    let mut load = vec![0usize; order.len()];
    for (i, m) in order.iter().enumerate() {
        let Some(prev) = m.previous else { continue };
        for (topic, parts) in prev {
            if !m.topics.contains(topic) {
                continue;
            }
            for p in parts {
                if let Some(slot @ None) = owner.get_mut(&(*topic, *p)) {
                    *slot = Some(i);
                    load[i] += 1;
                }
            }
        }
    }
    // Members keep at most a fair share of their old partitions: the excess is freed first,
    // so a joining member gets partitions without a long chain of moves.
    let eligible = |t: &Uuid| -> Vec<usize> {
        (0..order.len())
            .filter(|&i| order[i].topics.contains(t))
            .collect()
    };
    let total = owner.len();
    if !order.is_empty() {
        let cap = total.div_ceil(order.len());
        for slot in owner.values_mut().rev() {
            if let Some(i) = *slot {
                if load[i] > cap {
                    load[i] -= 1;
                    *slot = None;
                }
            }
        }
    }
    for ((topic, _), slot) in owner.iter_mut() {
        if slot.is_none() {
            *slot = eligible(topic).into_iter().min_by_key(|&i| (load[i], i));
            if let Some(i) = *slot {
                load[i] += 1;
            }
        }
    }
    // Even out what subscriptions that differ left uneven.
    loop {
        let mut moved = false;
        for ((topic, _), slot) in owner.iter_mut() {
            let Some(from) = *slot else { continue };
            let to = eligible(topic).into_iter().min_by_key(|&i| (load[i], i));
            if let Some(to) = to {
                if load[to] + 1 < load[from] {
                    load[from] -= 1;
                    load[to] += 1;
                    *slot = Some(to);
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
    }
    let mut out: BTreeMap<String, Assignment> = order
        .iter()
        .map(|m| (m.id.to_string(), Assignment::new()))
        .collect();
    for ((topic, p), slot) in owner {
        if let Some(i) = slot {
            if let Some(a) = out.get_mut(order[i].id) {
                a.entry(topic).or_default().insert(p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u8) -> Uuid {
        Uuid::from_bytes([n; 16])
    }

    fn sub<'a>(id: &'a str, topics: &[Uuid], previous: Option<&'a Assignment>) -> Subscriber<'a> {
        Subscriber {
            id,
            topics: topics.iter().copied().collect(),
            previous,
        }
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    #[test]
    fn range_gives_contiguous_ranges_first_members_one_more() {
        let parts = BTreeMap::from([(t(1), 5), (t(2), 5)]);
        let m = [sub("b", &[t(1), t(2)], None), sub("a", &[t(1), t(2)], None)];
        let out = assign("range", &m, &parts);
        assert_eq!(out["a"][&t(1)], BTreeSet::from([0, 1, 2]));
        assert_eq!(out["b"][&t(1)], BTreeSet::from([3, 4]));
        // Co-partitioned: the same partitions of both topics go to the same member.
        assert_eq!(out["a"][&t(2)], out["a"][&t(1)]);
    }

    #[test]
    fn uniform_balances_and_covers_every_partition_once() {
        let parts = BTreeMap::from([(t(1), 7), (t(2), 3)]);
        let m = [
            sub("a", &[t(1), t(2)], None),
            sub("b", &[t(1), t(2)], None),
            sub("c", &[t(1), t(2)], None),
        ];
        let out = assign("uniform", &m, &parts);
        let counts: Vec<usize> = out.values().map(count).collect();
        assert_eq!(counts.iter().sum::<usize>(), 10);
        assert!(
            counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
            "{counts:?}"
        );
        let mut seen = BTreeSet::new();
        for a in out.values() {
            for (topic, ps) in a {
                for p in ps {
                    assert!(seen.insert((*topic, *p)), "assigned twice");
                }
            }
        }
    }

    #[test]
    fn uniform_is_sticky_when_a_member_joins() {
        let parts = BTreeMap::from([(t(1), 6)]);
        let first = assign(
            "uniform",
            &[sub("a", &[t(1)], None), sub("b", &[t(1)], None)],
            &parts,
        );
        let m = [
            sub("a", &[t(1)], Some(&first["a"])),
            sub("b", &[t(1)], Some(&first["b"])),
            sub("c", &[t(1)], None),
        ];
        let out = assign("uniform", &m, &parts);
        assert_eq!(count(&out["c"]), 2);
        for id in ["a", "b"] {
            assert_eq!(count(&out[id]), 2);
            // Nothing moves between the old members: each keeps a subset of what it had.
            assert!(out[id][&t(1)].is_subset(&first[id][&t(1)]), "{id} moved");
        }
    }

    #[test]
    fn uniform_respects_subscriptions_that_differ() {
        let parts = BTreeMap::from([(t(1), 4), (t(2), 4)]);
        let m = [
            sub("a", &[t(1)], None),
            sub("b", &[t(1), t(2)], None),
            sub("c", &[t(2)], None),
        ];
        let out = assign("uniform", &m, &parts);
        assert!(!out["a"].contains_key(&t(2)));
        assert!(!out["c"].contains_key(&t(1)));
        let counts: Vec<usize> = ["a", "b", "c"].iter().map(|i| count(&out[*i])).collect();
        assert_eq!(counts.iter().sum::<usize>(), 8);
        assert!(
            counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
            "{counts:?}"
        );
    }
}
