//! What a storage driver of Helm is: the kind of object it keeps a release's revisions in, that
//! kind's API resource and Helm's name for it. The words only; which driver a release is kept by,
//! and when another's revision counts, is [`crate::release_driver`].

use std::fmt;

/// Which kind of object Helm keeps a release's revisions in: its storage driver
/// (`HELM_DRIVER`). Both name a revision `sh.helm.release.v1.<name>.v<revision>` and label it
/// `owner=helm`; the Secret driver gives it `type: helm.sh/release.v1` and stores Helm's layer
/// (base64 of gzip of JSON) base64-encoded once more as Secret data, the ConfigMap driver
/// stores the same layer as a plain string. (Helm's SQL driver writes to a database, never
/// through the API server: nothing of it can be seen here.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Driver {
    #[default]
    Secret,
    ConfigMap,
}

impl Driver {
    pub const ALL: [Driver; 2] = [Driver::Secret, Driver::ConfigMap];

    /// The kind of object a revision is stored in (`Secret`, `ConfigMap`).
    pub fn kind(self) -> &'static str {
        match self {
            Driver::Secret => "Secret",
            Driver::ConfigMap => "ConfigMap",
        }
    }

    /// The API resource of that kind (`secrets`, `configmaps`, in the core group).
    pub fn resource(self) -> &'static str {
        match self {
            Driver::Secret => "secrets",
            Driver::ConfigMap => "configmaps",
        }
    }

    /// Helm's name for the driver (`HELM_DRIVER`, `--release-drivers`).
    pub fn as_str(self) -> &'static str {
        match self {
            Driver::Secret => "secret",
            Driver::ConfigMap => "configmap",
        }
    }

    /// The driver Helm calls `name` (`secret`/`secrets`, `configmap`/`configmaps`, any case).
    pub fn parse(name: &str) -> Option<Driver> {
        match name.trim().to_ascii_lowercase().as_str() {
            "secret" | "secrets" => Some(Driver::Secret),
            "configmap" | "configmaps" => Some(Driver::ConfigMap),
            _ => None,
        }
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
