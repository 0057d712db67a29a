//! Moving one member from its current assignment towards its target (KIP-848's
//! reconciliation): partitions it must give up are revoked first, at its old epoch; only once
//! the member reports them gone does it move to the target epoch, and partitions another
//! member still holds are handed over only once that member has let them go. So no partition
//! is ever owned by two members at once.
//!
//! Pure: the caller says which partitions others still hold. Calls nothing.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::Assignment;

/// Where a member is in reaching its target assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// It owns its whole target at the group's assignment epoch.
    Stable,
    /// It must first give up `revoking` partitions (its epoch stays the old one).
    UnrevokedPartitions,
    /// At the new epoch, waiting for partitions other members still hold.
    UnreleasedPartitions,
}

impl MemberState {
    /// The name ConsumerGroupDescribe and logs use.
    pub fn as_str(self) -> &'static str {
        match self {
            MemberState::Stable => "stable",
            MemberState::UnrevokedPartitions => "unrevoked_partitions",
            MemberState::UnreleasedPartitions => "unreleased_partitions",
        }
    }
}

/// A member's assignment state: what it owns and what it is giving up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// Where it is.
    pub state: MemberState,
    /// Its member epoch.
    pub epoch: i32,
    /// Partitions it owns and keeps (sent to it as its assignment).
    pub assigned: Assignment,
    /// Partitions it must give up before it moves on.
    pub revoking: Assignment,
}

/// The member's next progress, given the group's target epoch and the member's target,
/// what the member reports owning (`None`: not reported in this heartbeat) and
/// `held_elsewhere`, whether another member owns a partition.
pub fn advance(
    current: &Progress,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&Assignment>,
    held_elsewhere: impl Fn(&Uuid, i32) -> bool,
) -> Progress {
    match current.state {
        MemberState::Stable if current.epoch == target_epoch => current.clone(),
        MemberState::UnrevokedPartitions if still_owns_any(owned, &current.revoking) => {
            current.clone()
        }
        _ => next(current, target_epoch, target, held_elsewhere),
    }
}

/// Whether the member's report still names a partition it was asked to give up; no report
/// counts as still owning them.
fn still_owns_any(owned: Option<&Assignment>, revoking: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    revoking
        .iter()
        .any(|(topic, parts)| owned.get(topic).is_some_and(|o| !o.is_disjoint(parts)))
}

fn next(
    current: &Progress,
    target_epoch: i32,
    target: &Assignment,
    held_elsewhere: impl Fn(&Uuid, i32) -> bool,
) -> Progress {
    let mut keep = Assignment::new();
    let mut revoke = Assignment::new();
    let mut gain = Assignment::new();
    let mut unreleased = false;
    let empty = BTreeSet::new();
    let topics: BTreeSet<&Uuid> = target.keys().chain(current.assigned.keys()).collect();
    for topic in topics {
        let want = target.get(topic).unwrap_or(&empty);
        let have = current.assigned.get(topic).unwrap_or(&empty);
        let kept: BTreeSet<i32> = have.intersection(want).copied().collect();
        let gone: BTreeSet<i32> = have.difference(want).copied().collect();
        let mut new = BTreeSet::new();
        for p in want.difference(have) {
            if held_elsewhere(topic, *p) {
                unreleased = true;
            } else {
                new.insert(*p);
            }
        }
        if !kept.is_empty() {
            keep.insert(*topic, kept);
        }
        if !gone.is_empty() {
            revoke.insert(*topic, gone);
        }
        if !new.is_empty() {
            gain.insert(*topic, new);
        }
    }
    if !revoke.is_empty() {
        // Revocation first, at the old epoch: nothing new until the member lets go.
        return Progress {
            state: MemberState::UnrevokedPartitions,
            epoch: current.epoch,
            assigned: keep,
            revoking: revoke,
        };
    }
    for (topic, parts) in gain {
        keep.entry(topic).or_default().extend(parts);
    }
    Progress {
        state: if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        },
        epoch: target_epoch,
        assigned: keep,
        revoking: Assignment::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Uuid {
        Uuid::from_bytes([7; 16])
    }

    fn a(parts: &[i32]) -> Assignment {
        if parts.is_empty() {
            return Assignment::new();
        }
        Assignment::from([(t(), parts.iter().copied().collect())])
    }

    fn stable(epoch: i32, parts: &[i32]) -> Progress {
        Progress {
            state: MemberState::Stable,
            epoch,
            assigned: a(parts),
            revoking: Assignment::new(),
        }
    }

    #[test]
    fn revokes_before_taking_anything_new() {
        let p = advance(&stable(3, &[0, 1, 2]), 4, &a(&[0, 3]), None, |_, _| false);
        assert_eq!(p.state, MemberState::UnrevokedPartitions);
        assert_eq!((p.epoch, p.assigned, p.revoking), (3, a(&[0]), a(&[1, 2])));
    }

    #[test]
    fn moves_on_once_the_member_reports_the_revocation() {
        let p = advance(&stable(3, &[0, 1, 2]), 4, &a(&[0, 3]), None, |_, _| false);
        // Still reporting partition 1: nothing changes.
        let same = advance(&p, 4, &a(&[0, 3]), Some(&a(&[0, 1])), |_, _| false);
        assert_eq!(same, p);
        let done = advance(&p, 4, &a(&[0, 3]), Some(&a(&[0])), |_, _| false);
        assert_eq!(done, stable(4, &[0, 3]));
    }

    #[test]
    fn waits_for_partitions_another_member_still_holds() {
        let p = advance(&stable(3, &[0]), 4, &a(&[0, 1]), None, |_, p| p == 1);
        assert_eq!(p.state, MemberState::UnreleasedPartitions);
        assert_eq!((p.epoch, p.assigned.clone()), (4, a(&[0])));
        let freed = advance(&p, 4, &a(&[0, 1]), None, |_, _| false);
        assert_eq!(freed, stable(4, &[0, 1]));
    }

    #[test]
    fn a_stable_member_at_the_target_epoch_stays() {
        let s = stable(4, &[0]);
        assert_eq!(advance(&s, 4, &a(&[0, 1]), None, |_, _| false), s);
    }
}
