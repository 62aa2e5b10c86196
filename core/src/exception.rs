//! Time-boxed exceptions to the lock (break glass): a `LockException` in a release's namespace
//! opens that release, or some objects or paths of it, to named users or groups until a time,
//! for a stated reason. Who may create one is plain RBAC on the resource; like a release Secret,
//! it speaks only for releases of its own namespace.
//!
//! Pure: whether an exception is open at a time, and whether it covers a write the lock would
//! refuse ([`crate::decide::excuse`] applies it after the decision, as
//! [`crate::decide::confirm`] applies rule 7).

use crate::ownership::is_ignored;
use crate::release::ReleaseKey;

/// A write the lock refuses, as an exception reads it.
pub struct Write<'a> {
    pub release: &'a ReleaseKey,
    pub kind: &'a str,
    pub name: &'a str,
    pub delete: bool,
    /// The locked paths it changes (none for a delete, or for taking co-ownership).
    pub paths: Vec<&'a str>,
}

/// One exception, as the locker reads it (times in Unix seconds).
#[derive(Clone, Debug, PartialEq)]
pub struct Exception {
    /// `namespace/name` of the LockException.
    pub name: String,
    /// The release it opens: always in the exception's own namespace.
    pub release: ReleaseKey,
    pub users: Vec<String>,
    pub groups: Vec<String>,
    /// Objects it opens, by kind and name (any kind when the kind is empty); all of the
    /// release's when empty.
    pub objects: Vec<(String, String)>,
    /// JSON pointers it opens (a `*` segment matches any key or index); every path when empty.
    pub paths: Vec<String>,
    pub reason: String,
    /// When it was created.
    pub opened: i64,
    /// When it closes: its `until`, or `opened` plus the admin's maximum when that is sooner.
    pub until: i64,
}

impl Exception {
    /// Open at `now`: created, and not yet past its end.
    pub fn is_open(&self, now: i64) -> bool {
        self.opened <= now && now < self.until
    }

    /// Seconds left at `now` (0 once closed).
    pub fn remaining(&self, now: i64) -> i64 {
        (self.until - now).max(0)
    }

    fn names(&self, user: &str, groups: &[impl AsRef<str>]) -> bool {
        self.users.iter().any(|u| u == user)
            || groups
                .iter()
                .any(|g| self.groups.iter().any(|mine| mine == g.as_ref()))
    }

    fn covers_object(&self, kind: &str, name: &str) -> bool {
        self.objects.is_empty()
            || self
                .objects
                .iter()
                .any(|(k, n)| n == name && (k.is_empty() || k.eq_ignore_ascii_case(kind)))
    }

    /// Whether it lets `user` make `write`: the user or a group is named, the object is among
    /// its objects, and every changed path among its paths (a delete, or a write without paths
    /// such as taking co-ownership, needs an exception for every path).
    pub fn covers(&self, write: &Write<'_>, user: &str, groups: &[impl AsRef<str>]) -> bool {
        if write.release != &self.release || !self.names(user, groups) {
            return false;
        }
        if !self.covers_object(write.kind, write.name) {
            return false;
        }
        if self.paths.is_empty() {
            return true;
        }
        let paths: Vec<&str> = self.paths.iter().map(String::as_str).collect();
        !write.delete
            && !write.paths.is_empty()
            && write.paths.iter().all(|p| is_ignored(p, &paths))
    }

    /// The paths it leaves to the user for an object (the reverter's ignore rules while it is
    /// open): `None` when it does not reach the object, every path (`""`) when it names none.
    pub(crate) fn open_paths(&self, kind: &str, name: &str) -> Option<Vec<String>> {
        if !self.covers_object(kind, name) {
            return None;
        }
        Some(if self.paths.is_empty() {
            vec![String::new()]
        } else {
            self.paths.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn exception(paths: &[&str], objects: &[(&str, &str)]) -> Exception {
        Exception {
            name: "shop/oncall".into(),
            release: ReleaseKey::new("shop", "shop"),
            users: vec!["oncall".into()],
            groups: vec!["sre".into()],
            objects: objects
                .iter()
                .map(|(k, n)| (k.to_string(), n.to_string()))
                .collect(),
            paths: paths.iter().map(|p| p.to_string()).collect(),
            reason: "INC-42: scale for the sale".into(),
            opened: 1_000,
            until: 2_800,
        }
    }

    const NO_GROUPS: [&str; 0] = [];

    #[test]
    fn an_exception_covers_the_named_users_objects_and_paths() {
        let shop = ReleaseKey::new("shop", "shop");
        let write = |paths: Vec<&'static str>, delete| Write {
            release: Box::leak(Box::new(shop.clone())),
            kind: "Deployment",
            name: "shop-web",
            delete,
            paths,
        };
        let replicas = exception(&["/spec/replicas"], &[("Deployment", "shop-web")]);
        assert!(replicas.covers(&write(vec!["/spec/replicas"], false), "oncall", &NO_GROUPS));
        assert!(replicas.covers(&write(vec!["/spec/replicas"], false), "dev", &["sre"]));
        assert!(!replicas.covers(&write(vec!["/spec/replicas"], false), "mallory", &["devs"]));
        let image = write(
            vec!["/spec/replicas", "/spec/template/spec/containers/0/image"],
            false,
        );
        assert!(!replicas.covers(&image, "oncall", &NO_GROUPS));
        assert!(!replicas.covers(&write(vec![], true), "oncall", &NO_GROUPS));
        let other = exception(&[], &[("Deployment", "shop-api")]);
        assert!(!other.covers(&write(vec!["/spec/replicas"], false), "oncall", &NO_GROUPS));
        // Without paths or objects: the whole release, deletes included.
        assert!(exception(&[], &[]).covers(&write(vec![], true), "oncall", &NO_GROUPS));
        // Another namespace's release is another release.
        let mut elsewhere = exception(&[], &[]);
        elsewhere.release = ReleaseKey::new("tenant", "shop");
        assert!(!elsewhere.covers(&write(vec!["/spec/replicas"], false), "oncall", &NO_GROUPS));
        // Open from its creation until its end.
        assert!(!replicas.is_open(999) && replicas.is_open(1_000) && !replicas.is_open(2_800));
    }

    #[test]
    fn open_paths_are_what_the_reverter_leaves_alone() {
        let e = exception(&["/spec/replicas"], &[("", "shop-web")]);
        assert_eq!(
            e.open_paths("Deployment", "shop-web"),
            Some(vec!["/spec/replicas".to_string()])
        );
        assert_eq!(e.open_paths("Deployment", "shop-api"), None);
        assert_eq!(
            exception(&[], &[]).open_paths("Service", "x"),
            Some(vec![String::new()])
        );
        assert_eq!(e.remaining(2_000), 800);
        assert_eq!(e.remaining(3_000), 0);
    }
}
