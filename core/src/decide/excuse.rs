//! Break glass in the decision: an open LockException turns a denial, warning or repair it
//! covers into an allow naming it ([`crate::exception`] says what an exception covers).

use super::{Allowed, Decision};

/// A denial, warning or repair that an open LockException covers becomes an allow naming it
/// (the first that covers, by name); any other decision stands. `exceptions` are the release's
/// ([`Index::exceptions`]), `now` in Unix seconds.
pub fn excuse(
    decision: Decision,
    exceptions: &[&crate::exception::Exception],
    user: &str,
    groups: &[impl AsRef<str>],
    now: i64,
) -> Decision {
    let (Decision::Deny(l) | Decision::Warn(l) | Decision::Repair(l, _)) = &decision else {
        return decision;
    };
    let write = crate::exception::Write {
        release: &l.release,
        kind: &l.target.kind,
        name: &l.target.name,
        delete: l.delete,
        paths: l.changes.iter().map(|c| c.path.as_str()).collect(),
    };
    let mut open: Vec<&crate::exception::Exception> = exceptions
        .iter()
        .copied()
        .filter(|e| e.is_open(now) && e.covers(&write, user, groups))
        .collect();
    open.sort_by(|a, b| a.name.cmp(&b.name));
    match open.first() {
        Some(e) => Decision::Allow(Allowed::Excepted {
            release: l.release.clone(),
            exception: e.name.clone(),
            user: user.to_string(),
            reason: e.reason.clone(),
            until: e.until,
        }),
        None => decision,
    }
}
