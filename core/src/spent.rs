//! Stamps this process has seen, each bound to the object it was first seen on.
//!
//! A stamp ([`crate::author`]) names its writer only on a release object created at most
//! [`STAMP_WINDOW_SECONDS`] after it: a saved copy created again later names nobody. Inside the
//! window the proof cannot tell the object it was made for from a copy of it created again
//! (deleted, then written back while the author webhook was away), since both have the same
//! namespace, name and content. The running process can: it saw the stamp on the first object
//! (its uid), and a re-created object has another uid. So **a stamp is spent on the object it
//! was first seen on**: on any other object it is a replay ([`crate::author::Unknown::Replayed`]),
//! whatever happened in between (the object deleted, superseded out of the watch, replaced).
//!
//! Bounded: a stamp can verify only on an object created within the window, so once the
//! window and [`SPENT_SLACK_SECONDS`] (the clock skew between the locker and the API server)
//! have passed since it was made, no object created from then on can carry it, and it is
//! forgotten. At most [`MAX_SPENT_STAMPS`] are kept (each entered by a verified stamp, that is a
//! release write through the author webhook); past that, the one nearest its end goes first.

use std::collections::{BTreeSet, HashMap};

use ring::digest;

/// How much later than its stamp a Secret may have been created for the stamp to be its own.
/// The webhook stamps a CREATE before the API server sets `metadata.creationTimestamp` (after
/// mutating admission, from the API server's clock, over whatever the writer sent), so an
/// honest stamp is older than its Secret by one admission round trip, the whole-second
/// rounding of the timestamp and the clock skew between the locker's node and the API server.
/// A stamp older than that was made for an earlier write: the Secret was deleted and created
/// again (or restored) with a saved stamp, a replay.
pub const STAMP_WINDOW_SECONDS: i64 = 60;

/// How long after the window a stamp is kept: the clock skew allowed between the locker that
/// checks and the API server that sets `metadata.creationTimestamp`.
pub const SPENT_SLACK_SECONDS: i64 = 60;
/// The most stamps kept (about 100 bytes each with a uid).
pub const MAX_SPENT_STAMPS: usize = 65_536;

type ProofDigest = [u8; 32];

#[derive(Debug)]
struct Seen {
    uid: String,
    until: i64,
}

/// The stamps seen in the window, with the uid of the object each was first seen on.
#[derive(Debug)]
pub struct SpentStamps {
    seen: HashMap<ProofDigest, Seen>,
    by_end: BTreeSet<(i64, ProofDigest)>,
    cap: usize,
}

impl Default for SpentStamps {
    fn default() -> Self {
        SpentStamps::with_cap(MAX_SPENT_STAMPS)
    }
}

impl SpentStamps {
    pub fn with_cap(cap: usize) -> SpentStamps {
        SpentStamps {
            seen: HashMap::new(),
            by_end: BTreeSet::new(),
            cap: cap.max(1),
        }
    }

    /// How many stamps are kept.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Whether the verified stamp `proof`, made at `stamped_at`, is the object `uid`'s, at `now`
    /// (Unix seconds, the locker's clock): the first object it is seen on (from now on bound to
    /// it), or that one again. `false`: it was seen on another object, so this one carries it
    /// from there. A stamp past its window and slack is not kept (nothing created from now on
    /// can verify with it).
    pub fn first_seen_on(&mut self, proof: &str, stamped_at: i64, uid: &str, now: i64) -> bool {
        self.forget_ended(now);
        let until = stamped_at
            .saturating_add(STAMP_WINDOW_SECONDS)
            .saturating_add(SPENT_SLACK_SECONDS);
        let digest = proof_digest(proof);
        if let Some(seen) = self.seen.get(&digest) {
            return seen.uid == uid;
        }
        if until < now || uid.is_empty() {
            return true;
        }
        while self.seen.len() >= self.cap {
            let Some(first) = self.by_end.pop_first() else {
                break;
            };
            self.seen.remove(&first.1);
        }
        self.seen.insert(
            digest,
            Seen {
                uid: uid.to_string(),
                until,
            },
        );
        self.by_end.insert((until, digest));
        true
    }

    fn forget_ended(&mut self, now: i64) {
        while let Some(&(until, digest)) = self.by_end.first() {
            if until >= now {
                break;
            }
            self.by_end.pop_first();
            if self.seen.get(&digest).is_some_and(|s| s.until == until) {
                self.seen.remove(&digest);
            }
        }
    }
}

fn proof_digest(proof: &str) -> ProofDigest {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, proof.as_bytes()).as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_800_000_000;

    #[test]
    fn a_stamp_is_its_first_objects_and_on_any_other_a_replay() {
        let mut spent = SpentStamps::default();
        assert!(spent.first_seen_on("v2.1.a", T, "uid-1", T + 1));
        // The same object again (a re-list, an update that kept it): still its own.
        assert!(spent.first_seen_on("v2.1.a", T, "uid-1", T + 30));
        // Deleted and created again with the saved stamp, inside the window: another object.
        assert!(!spent.first_seen_on("v2.1.a", T, "uid-2", T + 40));
        // Another stamp on the new object is its own.
        assert!(spent.first_seen_on("v2.1.b", T + 40, "uid-2", T + 41));
    }

    #[test]
    fn spent_stamps_are_forgotten_once_no_object_created_later_can_carry_them() {
        let mut spent = SpentStamps::default();
        let end = T + STAMP_WINDOW_SECONDS + SPENT_SLACK_SECONDS;
        assert!(spent.first_seen_on("v2.1.a", T, "uid-1", T));
        assert!(!spent.first_seen_on("v2.1.a", T, "uid-2", end));
        assert_eq!(spent.len(), 1);
        // Past the end: forgotten (a copy created now is refused by the window itself).
        assert!(spent.first_seen_on("v2.1.c", T + 500, "uid-3", end + 1));
        assert_eq!(spent.len(), 1);
        // A stamp first seen after its end is not kept.
        assert!(spent.first_seen_on("v2.1.d", T, "uid-4", end + 1));
        assert_eq!(spent.len(), 1);
        // No uid (not read from the API server): nothing to bind to.
        assert!(spent.first_seen_on("v2.1.e", T + 500, "", end + 1));
        assert_eq!(spent.len(), 1);
    }

    #[test]
    fn spent_stamps_are_bounded_in_number_the_nearest_their_end_going_first() {
        let mut spent = SpentStamps::with_cap(3);
        for i in 0..3 {
            assert!(spent.first_seen_on(&format!("p{i}"), T + i, &format!("u{i}"), T));
        }
        assert!(spent.first_seen_on("p3", T + 10, "u3", T));
        assert_eq!(spent.len(), 3);
        // p0 (nearest its end) went; the others are still bound.
        assert!(spent.first_seen_on("p0", T, "other", T));
        assert!(!spent.first_seen_on("p3", T + 10, "other", T));
        assert!(!spent.first_seen_on("p2", T + 2, "other", T));
    }
}
