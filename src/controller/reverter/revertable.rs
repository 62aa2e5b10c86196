//! Which objects the reverter may touch, as the policy in force says.

use crate::core::{Config, Index, LockedObject, Mode, ReleaseState, Status};

/// Which objects the reverter may touch: those of deployed releases whose mode is deny or
/// repair (warn only reports; off does nothing), while the reverter is not paused
/// (`ownership_returned`, which the `revert` switch turns off).
pub(super) fn revertable<'i>(
    config: &Config,
    index: &'i Index,
    object: &LockedObject,
) -> Option<(&'i ReleaseState, u64)> {
    if !config.ownership_returned {
        return None;
    }
    let state = index.release(&object.release)?;
    let newest = state.newest()?;
    if newest.status != Status::Deployed || state.objects.is_none() {
        return None;
    }
    let policy = config.policy(&state.key, &newest.labels, index.registration(&state.key));
    matches!(policy.mode, Mode::Deny | Mode::Repair).then_some((&**state, newest.revision))
}
