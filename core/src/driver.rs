//! What a storage driver of Helm is, said once: the kind of object it keeps a release's
//! revisions in, that kind's API resource, Helm's name for it, what marks one of its objects as
//! a revision, how Helm's layer is kept in it and under which words its stamps are signed
//! ([`DriverSpec`]). Everything that reads, stamps, watches or asks about a revision goes
//! through [`Driver::spec`]; adding a driver is a variant, its spec and its entry in
//! [`Driver::ALL`] here (and, in the shell, the Kubernetes type that is its kind). Which
//! driver a release is kept by, and when another's revision counts, is
//! [`crate::release_driver`].

use std::fmt;

use base64::Engine;

/// Which kind of object Helm keeps a release's revisions in: its storage driver
/// (`HELM_DRIVER`). Both name a revision `sh.helm.release.v1.<name>.v<revision>` and label it
/// `owner=helm`; the Secret driver gives it `type: helm.sh/release.v1` and stores Helm's layer
/// (base64 of gzip of JSON) base64-encoded once more as Secret data, the ConfigMap driver
/// stores the same layer as a plain string. (Helm's SQL driver writes to a database, never
/// through the API server: nothing of it can be seen here.)
///
/// The order of the variants is the order among revisions created in the same second with the
/// same number: Secrets, Helm's default, first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Driver {
    #[default]
    Secret,
    ConfigMap,
    /// A driver of the tests only: a kind of no API server, to show that nothing outside this
    /// file assumes there are two.
    #[cfg(test)]
    Fake,
}

/// The Secret type Helm's Secret driver gives a revision.
pub(crate) const RELEASE_SECRET_TYPE: &str = "helm.sh/release.v1";

/// What a driver's objects are, in one place.
#[derive(Debug, PartialEq, Eq)]
pub struct DriverSpec {
    /// Helm's name for the driver (`HELM_DRIVER`, `--release-drivers`).
    pub name: &'static str,
    /// The other names Helm accepts for it.
    pub aliases: &'static [&'static str],
    /// The kind of object a revision is stored in.
    pub kind: &'static str,
    /// The API resource of that kind, in the core group.
    pub resource: &'static str,
    /// What says that an object of the kind is a revision.
    pub mark: ReleaseMark,
    /// How `data.release` holds Helm's layer.
    pub payload: Payload,
    /// The first part of what a stamp of one of its objects signs: without a time (`v1.`
    /// proofs) and with one. Distinct per driver, so a stamp never verifies on an object of
    /// another kind of the same namespace and name.
    pub stamp_domain: [&'static [u8]; 2],
}

/// What says that an object is a release revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseMark {
    /// The kind's `type` (a Secret's): a list selects by it, the stamp wants exactly it; a
    /// revision read from a file may leave it out.
    Type(&'static str),
    /// The kind has no type: the label `owner=helm` (the stamp asks for it) and a
    /// `data.release`.
    OwnerLabel,
}

/// How `data.release` holds Helm's layer (base64 of gzip of JSON).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// Base64 once more, as Secret data is on the wire.
    Base64,
    /// As it is, a string.
    Text,
}

impl Payload {
    /// Helm's layer of the wire value of `data.release`; `None` when it is not base64.
    pub fn helm_layer(self, data: &str) -> Option<Vec<u8>> {
        match self {
            Payload::Base64 => base64::engine::general_purpose::STANDARD.decode(data).ok(),
            Payload::Text => Some(data.as_bytes().to_vec()),
        }
    }
}

const SECRET: DriverSpec = DriverSpec {
    name: "secret",
    aliases: &["secrets"],
    kind: "Secret",
    resource: "secrets",
    mark: ReleaseMark::Type(RELEASE_SECRET_TYPE),
    payload: Payload::Base64,
    // A Secret's words are those from before ConfigMaps were stamped: its stamps still hold.
    stamp_domain: [b"helm-locker.io/author v1", b"helm-locker.io/author v2"],
};

const CONFIG_MAP: DriverSpec = DriverSpec {
    name: "configmap",
    aliases: &["configmaps"],
    kind: "ConfigMap",
    resource: "configmaps",
    mark: ReleaseMark::OwnerLabel,
    payload: Payload::Text,
    stamp_domain: [
        b"helm-locker.io/author v1 ConfigMap",
        b"helm-locker.io/author v2 ConfigMap",
    ],
};

#[cfg(test)]
const FAKE: DriverSpec = DriverSpec {
    name: "fakestore",
    aliases: &["fakestores"],
    kind: "FakeStore",
    resource: "fakestores",
    mark: ReleaseMark::OwnerLabel,
    payload: Payload::Text,
    stamp_domain: [
        b"helm-locker.io/author v1 FakeStore",
        b"helm-locker.io/author v2 FakeStore",
    ],
};

impl Driver {
    /// Every driver, in their order.
    #[cfg(not(test))]
    pub const ALL: &'static [Driver] = &[Driver::Secret, Driver::ConfigMap];
    /// Every driver, in their order (the tests' fake too).
    #[cfg(test)]
    pub const ALL: &'static [Driver] = &[Driver::Secret, Driver::ConfigMap, Driver::Fake];

    /// What this driver's objects are.
    pub const fn spec(self) -> &'static DriverSpec {
        match self {
            Driver::Secret => &SECRET,
            Driver::ConfigMap => &CONFIG_MAP,
            #[cfg(test)]
            Driver::Fake => &FAKE,
        }
    }

    /// The kind of object a revision is stored in (`Secret`, `ConfigMap`).
    pub fn kind(self) -> &'static str {
        self.spec().kind
    }

    /// The API resource of that kind (`secrets`, `configmaps`, in the core group).
    pub fn resource(self) -> &'static str {
        self.spec().resource
    }

    /// Helm's name for the driver (`HELM_DRIVER`, `--release-drivers`).
    pub fn as_str(self) -> &'static str {
        self.spec().name
    }

    /// The driver Helm calls `name` (`secret`/`secrets`, `configmap`/`configmaps`, any case).
    pub fn parse(name: &str) -> Option<Driver> {
        let name = name.trim().to_ascii_lowercase();
        Driver::ALL.iter().copied().find(|d| {
            let spec = d.spec();
            spec.name == name || spec.aliases.contains(&name.as_str())
        })
    }

    /// The driver that keeps revisions in objects of `kind`.
    pub fn of_kind(kind: &str) -> Option<Driver> {
        Driver::ALL.iter().copied().find(|d| d.kind() == kind)
    }

    /// The field selector a list or watch of its revisions adds to the labels (a Secret's
    /// type; `None` for a kind without one).
    pub fn field_selector(self) -> Option<String> {
        match self.spec().mark {
            ReleaseMark::Type(t) => Some(format!("type={t}")),
            ReleaseMark::OwnerLabel => None,
        }
    }

    /// Whether an object of this driver's kind, as read (its `type`, empty when it has none;
    /// whether it has a `data.release`), is a revision to decode: of the driver's type or of
    /// none (a revision read from a file), or, for a kind without types, one with data.
    pub fn reads_as_revision(self, object_type: &str, has_release_data: bool) -> bool {
        match self.spec().mark {
            ReleaseMark::Type(t) => object_type.is_empty() || object_type == t,
            ReleaseMark::OwnerLabel => has_release_data,
        }
    }

    /// Whether a write of an object of this driver's kind is a revision to stamp: exactly of
    /// the driver's type, or, for a kind without types, labelled `owner=helm` with data.
    pub fn stamps_as_revision(
        self,
        object_type: Option<&str>,
        owner: Option<&str>,
        has_release_data: bool,
    ) -> bool {
        match self.spec().mark {
            ReleaseMark::Type(t) => object_type == Some(t),
            ReleaseMark::OwnerLabel => owner == Some("helm") && has_release_data,
        }
    }

    /// The first part of what its stamps sign ([`DriverSpec::stamp_domain`]).
    pub fn stamp_domain(self, with_time: bool) -> &'static [u8] {
        self.spec().stamp_domain[usize::from(with_time)]
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_driver_is_found_by_each_of_its_names_and_its_kind() {
        for &driver in Driver::ALL {
            let spec = driver.spec();
            for name in std::iter::once(&spec.name).chain(spec.aliases) {
                assert_eq!(Driver::parse(name), Some(driver), "{name}");
                assert_eq!(
                    Driver::parse(&format!(" {} ", name.to_uppercase())),
                    Some(driver)
                );
            }
            assert_eq!(Driver::of_kind(spec.kind), Some(driver));
            assert_eq!(driver.to_string(), spec.name);
        }
        assert_eq!(Driver::parse("sql"), None);
        assert_eq!(Driver::of_kind("secret"), None, "a kind is case-sensitive");
    }

    #[test]
    fn no_two_drivers_share_a_name_a_kind_a_resource_or_the_words_of_a_stamp() {
        let words = |driver: Driver| {
            let spec = driver.spec();
            std::iter::once(spec.name)
                .chain(spec.aliases.iter().copied())
                .chain([spec.kind, spec.resource])
                .map(str::as_bytes)
                .chain(spec.stamp_domain)
                .collect::<std::collections::BTreeSet<_>>()
        };
        for &a in Driver::ALL {
            assert_ne!(a.stamp_domain(false), a.stamp_domain(true));
            for &b in Driver::ALL.iter().filter(|&&b| b != a) {
                let shared: Vec<_> = words(a).intersection(&words(b)).copied().collect();
                assert!(shared.is_empty(), "{a} and {b} share {shared:?}");
            }
        }
    }

    #[test]
    fn a_secret_is_marked_by_its_type_a_config_map_by_its_label_and_data() {
        assert_eq!(
            Driver::Secret.field_selector().as_deref(),
            Some("type=helm.sh/release.v1")
        );
        assert_eq!(Driver::ConfigMap.field_selector(), None);
        assert!(Driver::Secret.reads_as_revision("", true));
        assert!(Driver::Secret.reads_as_revision(RELEASE_SECRET_TYPE, false));
        assert!(!Driver::Secret.reads_as_revision("Opaque", true));
        assert!(Driver::ConfigMap.reads_as_revision("", true));
        assert!(!Driver::ConfigMap.reads_as_revision("", false));
        assert!(Driver::Secret.stamps_as_revision(Some(RELEASE_SECRET_TYPE), None, false));
        assert!(!Driver::Secret.stamps_as_revision(None, Some("helm"), true));
        assert!(Driver::ConfigMap.stamps_as_revision(None, Some("helm"), true));
        assert!(!Driver::ConfigMap.stamps_as_revision(None, Some("flux"), true));
        assert!(!Driver::ConfigMap.stamps_as_revision(None, Some("helm"), false));
        assert_eq!(Payload::Base64.helm_layer("aGk="), Some(b"hi".to_vec()));
        assert_eq!(Payload::Base64.helm_layer("!!"), None);
        assert_eq!(Payload::Text.helm_layer("aGk="), Some(b"aGk=".to_vec()));
    }
}
