//! What the API's schema says about each field: which maps and lists are merged item by item and
//! which are replaced whole, which items are keyed by what, which strings are quantities or
//! int-or-strings.
//!
//! This is the same information, read the same way, as the API server's server-side apply uses to
//! attribute fields to a field manager (kube-openapi `schemaconv`, structured-merge-diff): from
//! the OpenAPI v2 document the API server serves (`/openapi/v2`, built-in kinds and the schemas of
//! custom resources), or from the snapshot of Kubernetes 1.20's built-in kinds embedded in the
//! binary ([`Schema::builtin`]) for offline use and until the API server has been read.
//!
//! List semantics, as `schemaconv` reads them: `x-kubernetes-list-type` (`atomic`, `set`, `map`
//! with `x-kubernetes-list-map-keys`) when present; otherwise `x-kubernetes-patch-strategy:
//! merge` makes a map-list keyed by `x-kubernetes-patch-merge-key`, or a set without one;
//! anything else is atomic. Maps and structs are granular unless `x-kubernetes-map-type: atomic`.
//! A field no schema describes (a custom resource without a schema, `x-kubernetes-preserve-
//! unknown-fields`) is *deduced*: maps granular, lists atomic.

use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

/// Index of a type in a [`Schema`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TypeId(u32);

impl TypeId {
    /// Anything, replaced whole (`RawExtension`, a schema-less value).
    pub(crate) const UNTYPED: TypeId = TypeId(0);
    /// Anything, maps merged key by key, lists replaced whole.
    pub(crate) const DEDUCED: TypeId = TypeId(1);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scalar {
    String,
    Number,
    Boolean,
    /// `format: int-or-string` (`80` and `"80"` are different values to the API server, but a
    /// chart's `80` for a field the API server stores as a number is the same number).
    IntOrString,
    /// A resource quantity, stored canonically (`"0.5"` is stored as `500m`).
    Quantity,
    /// Any other format (`date-time`...): compared as written.
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ListType {
    /// Replaced whole: one value.
    Atomic,
    /// Items are scalars, each owned on its own.
    Set,
    /// Items are objects identified by these keys (and owned item by item).
    Map(Box<[Box<str>]>),
}

#[derive(Clone, Debug)]
pub struct Field {
    pub name: Box<str>,
    pub ty: TypeId,
    /// The schema's default, used when a map-list item omits a key field.
    pub default: Option<Value>,
}

#[derive(Clone, Debug)]
pub(crate) enum Atom {
    Scalar(Scalar),
    /// An object with declared fields (sorted by name); `extra` types undeclared fields
    /// (preserve-unknown).
    Struct {
        fields: Box<[Field]>,
        atomic: bool,
        extra: Option<TypeId>,
    },
    /// `additionalProperties`: any key, values of one type.
    Map {
        values: TypeId,
        atomic: bool,
    },
    List {
        items: TypeId,
        list_type: ListType,
    },
    Untyped,
    Deduced,
}

type GroupKind = (Box<str>, Box<str>);

/// A pair of names looked up in a map keyed by [`GroupKind`] without allocating the key.
trait NamePair {
    fn names(&self) -> (&str, &str);
}

impl NamePair for GroupKind {
    fn names(&self) -> (&str, &str) {
        (&self.0, &self.1)
    }
}

impl NamePair for (&str, &str) {
    fn names(&self) -> (&str, &str) {
        (self.0, self.1)
    }
}

impl<'a> std::borrow::Borrow<dyn NamePair + 'a> for GroupKind {
    fn borrow(&self) -> &(dyn NamePair + 'a) {
        self
    }
}

// As a `(Box<str>, Box<str>)` hashes and compares: so a borrowed pair finds an owned one.
impl std::hash::Hash for dyn NamePair + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let (a, b) = self.names();
        a.hash(state);
        b.hash(state);
    }
}

impl PartialEq for dyn NamePair + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.names() == other.names()
    }
}

impl Eq for dyn NamePair + '_ {}

/// The key of a (group, kind) or (group, resource) lookup.
fn pair<'a>(a: &'a str, b: &'a str) -> impl NamePair + 'a {
    (a, b)
}

/// The schema of every kind the API serves.
#[derive(Debug)]
pub struct Schema {
    types: Vec<Atom>,
    /// (group, kind) -> (version, root type), in the order found.
    kinds: HashMap<GroupKind, Vec<(Box<str>, TypeId)>>,
    /// A kind the schema does not know: its `metadata` is still an ObjectMeta, the rest deduced.
    unknown_kind: TypeId,
    /// Per type: whether a value of it may hold a set or a map-list (else there is nothing in
    /// it for server-side apply to key).
    keyed: Vec<bool>,
    /// Per type: whether it is a built-in kind's Go struct, which the API server encodes with
    /// Go's `omitempty` ([`Schema::omits_zero`]); a custom resource is stored as written.
    go_structs: Vec<bool>,
    /// Per built-in Go struct with any: the JSON names of its pointer scalar fields
    /// ([`pointer_fields`]), whose zero the API server keeps.
    pointer_fields: HashMap<TypeId, &'static [&'static str]>,
    /// Custom resources whose `scale` subresource writes another field than `/spec/replicas`
    /// (their CRD's `specReplicasPath`), as JSON pointers.
    replicas_pointers: HashMap<GroupKind, Box<str>>,
    /// (group, plural resource) -> kind, as the API server serves them: the paths of its
    /// `/openapi/v2` and each CRD's `names`. A `scale` request names only the resource.
    resources: HashMap<(Box<str>, Box<str>), Box<str>>,
}

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("the OpenAPI document is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the OpenAPI document has no `definitions`")]
    NoDefinitions,
    #[error("the embedded schema snapshot cannot be read: {0}")]
    Snapshot(std::io::Error),
}

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const RAW_EXTENSION: &str = "io.k8s.apimachinery.pkg.runtime.RawExtension";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
/// The definitions of Kubernetes' own Go types (a custom resource's are named after its group,
/// `com.example.v1.Widget`, `io.k8s.networking.gateway.v1.Gateway`).
const GO_PACKAGES: [&str; 4] = [
    "io.k8s.api.",
    "io.k8s.apimachinery.",
    "io.k8s.kube-aggregator.",
    "io.k8s.apiextensions-apiserver.",
];

/// (group, plural) -> kind from an `/openapi/v2` document's `paths`: each object path
/// (`/apis/apps/v1/namespaces/{namespace}/deployments/{name}`, `/api/v1/nodes/{name}`) names its
/// resource, and its operations the kind (`x-kubernetes-group-version-kind`).
fn resources_of_paths(paths: Option<&Value>) -> HashMap<(Box<str>, Box<str>), Box<str>> {
    let mut out = HashMap::new();
    for (path, item) in paths.and_then(Value::as_object).into_iter().flatten() {
        let Some(rest) = path.strip_suffix("/{name}") else {
            continue;
        };
        let Some(resource) = rest.rsplit('/').next().filter(|r| !r.starts_with('{')) else {
            continue;
        };
        let gvk = item
            .as_object()
            .into_iter()
            .flat_map(|ops| ops.values())
            .find_map(|op| op.get("x-kubernetes-group-version-kind"));
        let (Some(group), Some(kind)) = (
            gvk.and_then(|g| g.get("group")).and_then(Value::as_str),
            gvk.and_then(|g| g.get("kind")).and_then(Value::as_str),
        ) else {
            continue;
        };
        out.insert((group.into(), resource.into()), kind.into());
    }
    out
}

/// The Kubernetes versions whose built-in kinds' schema is embedded: each one's `/openapi/v2`,
/// definitions only, descriptions removed, gzip (`scripts/openapi_snapshot.py` makes them from
/// a running API server). What Helm owns follows the markers, which change between versions
/// (a Service's `selector` is a granular map on 1.20 and atomic on 1.28 and later).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KubeVersion {
    V1_20,
    V1_28,
    V1_34,
    V1_36,
}

impl KubeVersion {
    pub const ALL: [KubeVersion; 4] = [
        KubeVersion::V1_20,
        KubeVersion::V1_28,
        KubeVersion::V1_34,
        KubeVersion::V1_36,
    ];
    /// What the offline commands use unless told otherwise.
    pub const NEWEST: KubeVersion = KubeVersion::V1_36;

    pub fn as_str(self) -> &'static str {
        match self {
            KubeVersion::V1_20 => "1.20",
            KubeVersion::V1_28 => "1.28",
            KubeVersion::V1_34 => "1.34",
            KubeVersion::V1_36 => "1.36",
        }
    }

    /// `1.34`, `v1.34.9`: the embedded version of that minor release, or the nearest older one
    /// (`1.30` reads as 1.28); `None` before 1.20 or for anything else.
    pub fn parse(text: &str) -> Option<KubeVersion> {
        let text = text.trim().trim_start_matches('v');
        let mut parts = text.split('.');
        let (major, minor) = (parts.next()?, parts.next()?);
        let minor: u32 = minor.parse().ok()?;
        if major != "1" || minor < 20 {
            return None;
        }
        KubeVersion::ALL
            .into_iter()
            .rev()
            .find(|v| v.minor() <= minor)
    }

    fn minor(self) -> u32 {
        self.as_str()[2..].parse().expect("a number")
    }

    fn snapshot(self) -> &'static [u8] {
        match self {
            KubeVersion::V1_20 => include_bytes!("schema/kubernetes-1.20-openapi-v2.json.gz"),
            KubeVersion::V1_28 => include_bytes!("schema/kubernetes-1.28-openapi-v2.json.gz"),
            KubeVersion::V1_34 => include_bytes!("schema/kubernetes-1.34-openapi-v2.json.gz"),
            KubeVersion::V1_36 => include_bytes!("schema/kubernetes-1.36-openapi-v2.json.gz"),
        }
    }
}

impl std::fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Schema {
    /// Kubernetes 1.20's embedded schema (read once, shared): the version this project's test
    /// control plane runs, which the unit tests are written against.
    pub fn builtin() -> Arc<Schema> {
        Schema::embedded(KubeVersion::V1_20)
    }

    /// The embedded schema of a Kubernetes version's built-in kinds (read once, shared).
    pub fn embedded(version: KubeVersion) -> Arc<Schema> {
        static EMBEDDED: OnceLock<[OnceLock<Arc<Schema>>; 4]> = OnceLock::new();
        let slots = EMBEDDED.get_or_init(Default::default);
        let slot = KubeVersion::ALL
            .iter()
            .position(|v| *v == version)
            .expect("every version has a slot");
        slots[slot]
            .get_or_init(|| {
                let schema = Self::decode_snapshot(version).unwrap_or_else(|e| {
                    // Only a build with a damaged snapshot gets here; the unit tests read it.
                    tracing::error!(error = %e, version = %version, "embedded schema snapshot unusable; every field is deduced");
                    Schema::empty()
                });
                Arc::new(schema)
            })
            .clone()
    }

    /// An embedded snapshot as a schema of its own, to extend ([`Schema::with_scale_paths`]).
    pub fn snapshot(version: KubeVersion) -> Result<Schema, SchemaError> {
        Self::decode_snapshot(version)
    }

    fn decode_snapshot(version: KubeVersion) -> Result<Schema, SchemaError> {
        let mut json = Vec::new();
        flate2::read::GzDecoder::new(version.snapshot())
            .read_to_end(&mut json)
            .map_err(SchemaError::Snapshot)?;
        Self::from_openapi_v2(&json)
    }

    /// A schema that knows no kind: everything is deduced.
    pub fn empty() -> Schema {
        Schema {
            types: vec![Atom::Untyped, Atom::Deduced],
            kinds: HashMap::new(),
            unknown_kind: TypeId::DEDUCED,
            keyed: vec![false, false],
            go_structs: Vec::new(),
            pointer_fields: HashMap::new(),
            replicas_pointers: HashMap::new(),
            resources: HashMap::new(),
        }
    }

    /// Reads an OpenAPI v2 document (`/openapi/v2`) as the API server's server-side apply does.
    pub fn from_openapi_v2(document: &[u8]) -> Result<Schema, SchemaError> {
        let doc: Value = serde_json::from_slice(document)?;
        let definitions = doc
            .get("definitions")
            .and_then(Value::as_object)
            .ok_or(SchemaError::NoDefinitions)?;
        let mut builder = Builder {
            types: vec![Atom::Untyped, Atom::Deduced],
            named: HashMap::with_capacity(definitions.len()),
        };
        // Every definition gets its id first, so references resolve in one pass.
        for (name, _) in definitions {
            let id = builder.reserve();
            builder.named.insert(name.as_str(), id);
        }
        let mut kinds: HashMap<GroupKind, Vec<(Box<str>, TypeId)>> = HashMap::new();
        for (name, definition) in definitions {
            let id = builder.named[name.as_str()];
            let atom = match name.as_str() {
                QUANTITY => Atom::Scalar(Scalar::Quantity),
                RAW_EXTENSION => Atom::Untyped,
                _ => builder.atom(definition, false),
            };
            builder.types[id.0 as usize] = atom;
            for gvk in definition
                .get("x-kubernetes-group-version-kind")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let field = |f: &str| gvk.get(f).and_then(Value::as_str).unwrap_or_default();
                kinds
                    .entry((field("group").into(), field("kind").into()))
                    .or_default()
                    .push((field("version").into(), id));
            }
        }
        let unknown_kind = match builder.named.get(OBJECT_META) {
            Some(&metadata) => builder.push(Atom::Struct {
                fields: Box::new([Field {
                    name: "metadata".into(),
                    ty: metadata,
                    default: None,
                }]),
                atomic: false,
                extra: Some(TypeId::DEDUCED),
            }),
            None => TypeId::DEDUCED,
        };
        let keyed = keyed_types(&builder.types);
        let mut go_structs = vec![false; builder.types.len()];
        for (name, id) in &builder.named {
            go_structs[id.0 as usize] = GO_PACKAGES.iter().any(|p| name.starts_with(p))
                && matches!(builder.types[id.0 as usize], Atom::Struct { .. });
        }
        let pointers = pointer_fields();
        let pointer_fields = builder
            .named
            .iter()
            .filter(|(_, id)| go_structs[id.0 as usize])
            .filter_map(|(name, id)| Some((*id, *pointers.get(name)?)))
            .collect();
        Ok(Schema {
            types: builder.types,
            kinds,
            unknown_kind,
            keyed,
            go_structs,
            pointer_fields,
            replicas_pointers: HashMap::new(),
            resources: resources_of_paths(doc.get("paths")),
        })
    }

    /// Adds what custom resource definitions say their `scale` subresource writes: the
    /// `specReplicasPath` (`.spec.size`) of each CRD that serves one, in `apiextensions.k8s.io/v1`
    /// (per version) or `v1beta1` (`spec.subresources`) form. A path that is not plain field
    /// names (`.spec.sizes[0]`) is left out, and that kind's scale falls back to `/spec/replicas`.
    pub fn with_scale_paths<'a>(mut self, crds: impl IntoIterator<Item = &'a Value>) -> Schema {
        for crd in crds {
            let spec = crd.get("spec");
            let group = spec.and_then(|s| s.get("group")).and_then(Value::as_str);
            let kind = spec
                .and_then(|s| s.pointer("/names/kind"))
                .and_then(Value::as_str);
            let (Some(group), Some(kind)) = (group, kind) else {
                continue;
            };
            if let Some(plural) = spec
                .and_then(|s| s.pointer("/names/plural"))
                .and_then(Value::as_str)
            {
                self.resources
                    .insert((group.into(), plural.into()), kind.into());
            }
            let per_version = spec
                .and_then(|s| s.get("versions"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.pointer("/subresources/scale/specReplicasPath"));
            let paths = per_version
                .chain(spec.and_then(|s| s.pointer("/subresources/scale/specReplicasPath")));
            // Every served version of a kind shares one storage, so one path stands for all.
            if let Some(pointer) = paths.filter_map(Value::as_str).find_map(replicas_pointer) {
                if pointer != "/spec/replicas" {
                    self.replicas_pointers
                        .insert((group.into(), kind.into()), pointer.into());
                }
            }
        }
        self
    }

    /// Adds custom resource definitions as the API server reads them for server-side apply:
    /// each served version's `openAPIV3Schema` (its list types, map keys and atomic maps) with
    /// `metadata` as an ObjectMeta, its resource name, and its `scale` path
    /// ([`Self::with_scale_paths`]). A kind and version the schema already has (an
    /// `/openapi/v2` publishes served CRDs) keeps its type. `apiextensions.k8s.io/v1`
    /// (`spec.versions[].schema`) and `v1beta1` (`spec.validation`) forms are read.
    pub fn with_crds<'a>(mut self, crds: impl IntoIterator<Item = &'a Value> + Clone) -> Schema {
        let metadata = self.field(self.unknown_kind, "metadata");
        let mut builder = Builder {
            types: std::mem::take(&mut self.types),
            named: HashMap::new(),
        };
        for crd in crds.clone() {
            let spec = crd.get("spec");
            let text = |pointer: &str| {
                spec.and_then(|s| s.pointer(pointer))
                    .and_then(Value::as_str)
            };
            let (Some(group), Some(kind)) = (text("/group"), text("/names/kind")) else {
                continue;
            };
            let shared = spec.and_then(|s| s.pointer("/validation/openAPIV3Schema"));
            let mut versions: Vec<(&str, &Value)> = spec
                .and_then(|s| s.get("versions"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|v| v.get("served") != Some(&Value::Bool(false)))
                .filter_map(|v| {
                    let name = v.get("name")?.as_str()?;
                    let schema = v.pointer("/schema/openAPIV3Schema").or(shared)?;
                    Some((name, schema))
                })
                .collect();
            if let (true, Some(version), Some(schema)) =
                (versions.is_empty(), text("/version"), shared)
            {
                versions.push((version, schema));
            }
            for (version, schema) in versions {
                let key: GroupKind = (group.into(), kind.into());
                let known = self
                    .kinds
                    .get(&key)
                    .is_some_and(|vs| vs.iter().any(|(v, _)| &**v == version));
                if known {
                    continue;
                }
                let root = match builder.atom(schema, false) {
                    Atom::Struct {
                        fields,
                        atomic,
                        extra,
                    } => {
                        let mut fields: Vec<Field> = fields
                            .into_vec()
                            .into_iter()
                            .filter(|f| &*f.name != "metadata")
                            .collect();
                        fields.push(Field {
                            name: "metadata".into(),
                            ty: metadata,
                            default: None,
                        });
                        fields.sort_by(|a, b| a.name.cmp(&b.name));
                        Atom::Struct {
                            fields: fields.into_boxed_slice(),
                            atomic,
                            extra,
                        }
                    }
                    _ => continue,
                };
                let id = builder.push(root);
                self.kinds
                    .entry(key)
                    .or_default()
                    .push((version.into(), id));
            }
        }
        self.types = builder.types;
        self.keyed = keyed_types(&self.types);
        self.with_scale_paths(crds)
    }

    /// The kind the API server serves as `resource` (plural) in `group`: from its `/openapi/v2`
    /// paths, the CRDs given, and the built-in kinds with a `scale` subresource (the embedded
    /// snapshot has no paths). `None` when nothing says.
    pub(crate) fn kind_of_resource(&self, group: &str, resource: &str) -> Option<&str> {
        self.resources
            .get(&pair(group, resource) as &dyn NamePair)
            .map(|k| &**k)
            .or_else(|| crate::kinds::builtin_kind_of_resource(group, resource))
    }

    /// The field a write through `scale` changes on an object of this kind.
    pub(crate) fn replicas_pointer(&self, group: &str, kind: &str) -> &str {
        self.replicas_pointers
            .get(&pair(group, kind) as &dyn NamePair)
            .map_or("/spec/replicas", |p| p)
    }

    /// The root type of a kind in a version, or in another version of the same kind when that
    /// one is not served (list semantics rarely change between versions).
    pub fn root(&self, group: &str, version: &str, kind: &str) -> Option<TypeId> {
        let versions = self.kinds.get(&pair(group, kind) as &dyn NamePair)?;
        versions
            .iter()
            .find(|(v, _)| &**v == version)
            .or_else(|| versions.last())
            .map(|(_, id)| *id)
    }

    /// The root type for an object; for a kind the schema does not know, an object whose
    /// `metadata` is an ObjectMeta and whose other fields are deduced.
    pub fn root_or_deduced(&self, api_version: &str, kind: &str) -> TypeId {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        self.root_of(group, version, kind)
    }

    /// [`Schema::root_or_deduced`] of a group and version given apart.
    pub fn root_of(&self, group: &str, version: &str, kind: &str) -> TypeId {
        self.root(group, version, kind).unwrap_or(self.unknown_kind)
    }

    pub(crate) fn atom(&self, id: TypeId) -> &Atom {
        self.types.get(id.0 as usize).unwrap_or(&Atom::Deduced)
    }

    /// The type of field `name` in an object of type `id`.
    pub fn field(&self, id: TypeId, name: &str) -> TypeId {
        match self.atom(id) {
            Atom::Struct { fields, extra, .. } => find_field(fields, name)
                .map(|f| f.ty)
                .or(*extra)
                .unwrap_or(TypeId::DEDUCED),
            Atom::Map { values, .. } => *values,
            Atom::Untyped => TypeId::UNTYPED,
            _ => TypeId::DEDUCED,
        }
    }

    /// The default of a declared field, if the schema has one.
    pub(crate) fn field_default(&self, id: TypeId, name: &str) -> Option<&Value> {
        match self.atom(id) {
            Atom::Struct { fields, .. } => {
                find_field(fields, name).and_then(|f| f.default.as_ref())
            }
            _ => None,
        }
    }

    /// Whether `name` is a declared field of a struct (fieldsV1 makes undeclared keys, such as a
    /// label's, members of the set even when they hold objects).
    pub(crate) fn is_declared_field(&self, id: TypeId, name: &str) -> bool {
        matches!(self.atom(id), Atom::Struct { fields, .. } if find_field(fields, name).is_some())
    }

    /// Whether the API server leaves field `name` of an object of type `id` out when it holds its
    /// zero value (`""`, `false`, `0`): a string, number or boolean field of a built-in kind's Go
    /// struct, encoded with `omitempty` (`hostIPC: false`, an env var's `value: ""`, a probe's
    /// `initialDelaySeconds: 0`). Measured on 1.20 and 1.36 (`tests/e2e/test_restore.py`). A
    /// pointer field (`allowPrivilegeEscalation`, `automountServiceAccountToken`, `runAsUser`)
    /// keeps its zero, and its absence is the default: not this ([`Schema::is_pointer_field`]).
    pub(crate) fn omits_zero(&self, id: TypeId, name: &str) -> bool {
        self.is_go_struct(id)
            && matches!(
                self.atom(self.field(id, name)),
                Atom::Scalar(Scalar::String | Scalar::Number | Scalar::Boolean)
            )
            && self.is_declared_field(id, name)
            && !self.is_pointer_field(id, name)
    }

    /// Whether field `name` of a built-in kind's Go struct `id` is a pointer (`*bool`, `*int64`,
    /// `*string`), which the OpenAPI document does not say: from the Go types
    /// ([`pointer_fields`]).
    pub(crate) fn is_pointer_field(&self, id: TypeId, name: &str) -> bool {
        self.pointer_fields
            .get(&id)
            .is_some_and(|fields| fields.binary_search(&name).is_ok())
    }

    /// Whether values of this type are a built-in kind's Go struct, decoded and encoded by the API
    /// server (which fills defaults in and leaves zero values out).
    pub(crate) fn is_go_struct(&self, id: TypeId) -> bool {
        self.go_structs.get(id.0 as usize).copied().unwrap_or(false)
    }

    /// Whether a value of this type may hold a set or a map-list anywhere inside.
    pub(crate) fn may_hold_keyed_lists(&self, id: TypeId) -> bool {
        self.keyed.get(id.0 as usize).copied().unwrap_or(false)
    }

    pub fn kind_count(&self) -> usize {
        self.kinds.len()
    }
}

/// The pointer scalar fields of the built-in kinds' Go types (`k8s.io/api`, `apimachinery`,
/// `apiextensions-apiserver`, `kube-aggregator` of Kubernetes 1.20 and 1.36), one line per type:
/// its OpenAPI definition name, then its fields' JSON names, sorted. Made, and checked against
/// the Go types, by `scripts/pointer_fields.py`; `tests/e2e/test_trust_pointers.py` asks the API
/// server that it keeps their zero.
const POINTER_FIELDS: &str = include_str!("schema/pointer-fields.txt");

/// [`POINTER_FIELDS`] by definition name (read once).
fn pointer_fields() -> &'static HashMap<&'static str, &'static [&'static str]> {
    static TABLE: OnceLock<HashMap<&'static str, &'static [&'static str]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        POINTER_FIELDS
            .lines()
            .filter_map(|line| {
                let mut words = line.split_ascii_whitespace();
                let name = words.next()?;
                let mut fields: Vec<&'static str> = words.collect();
                fields.sort_unstable();
                Some((name, &*Vec::leak(fields)))
            })
            .collect()
    })
}

/// `.spec.size` as `/spec/size`; `None` for a path that is not plain field names.
fn replicas_pointer(path: &str) -> Option<String> {
    let rest = path.strip_prefix('.')?;
    let mut pointer = String::with_capacity(path.len());
    for name in rest.split('.') {
        if name.is_empty() || name.contains(['[', ']']) {
            return None;
        }
        crate::pointer::push_segment(&mut pointer, name);
    }
    Some(pointer)
}

/// For each type, whether it may hold a set or a map-list (a fixed point over the type graph,
/// which has cycles: JSONSchemaProps holds itself).
fn keyed_types(types: &[Atom]) -> Vec<bool> {
    let mut keyed: Vec<bool> = types
        .iter()
        .map(|atom| {
            matches!(
                atom,
                Atom::List {
                    list_type: ListType::Set | ListType::Map(_),
                    ..
                }
            )
        })
        .collect();
    loop {
        let mut changed = false;
        for (i, atom) in types.iter().enumerate() {
            if keyed[i] {
                continue;
            }
            let holds = match atom {
                Atom::Struct { fields, extra, .. } => {
                    fields.iter().any(|f| keyed[f.ty.0 as usize])
                        || extra.is_some_and(|e| keyed[e.0 as usize])
                }
                Atom::Map { values, .. } => keyed[values.0 as usize],
                Atom::List { items, .. } => keyed[items.0 as usize],
                _ => false,
            };
            if holds {
                keyed[i] = true;
                changed = true;
            }
        }
        if !changed {
            return keyed;
        }
    }
}

fn find_field<'f>(fields: &'f [Field], name: &str) -> Option<&'f Field> {
    fields
        .binary_search_by(|f| (*f.name).cmp(name))
        .ok()
        .map(|i| &fields[i])
}

struct Builder<'d> {
    types: Vec<Atom>,
    named: HashMap<&'d str, TypeId>,
}

impl<'d> Builder<'d> {
    fn reserve(&mut self) -> TypeId {
        self.types.push(Atom::Untyped);
        TypeId(self.types.len() as u32 - 1)
    }

    fn push(&mut self, atom: Atom) -> TypeId {
        self.types.push(atom);
        TypeId(self.types.len() as u32 - 1)
    }

    /// A reference or an inline schema, as a type id.
    fn type_ref(&mut self, schema: &Value, preserve_unknown: bool) -> TypeId {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            let name = reference.rsplit('/').next().unwrap_or_default();
            return match name {
                RAW_EXTENSION => TypeId::UNTYPED,
                _ => self.named.get(name).copied().unwrap_or(TypeId::UNTYPED),
            };
        }
        let atom = self.atom(schema, preserve_unknown);
        self.push(atom)
    }

    fn atom(&mut self, schema: &Value, inherited_preserve_unknown: bool) -> Atom {
        let extension = |name: &str| schema.get(name);
        let preserve_unknown = inherited_preserve_unknown
            || extension("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        if extension("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
            return Atom::Scalar(Scalar::IntOrString);
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let atomic_map =
            extension("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
        let properties = schema.get("properties").and_then(Value::as_object);
        match types.as_slice() {
            [] | ["object"] => {
                if let Some(properties) = properties {
                    self.structure(properties, atomic_map, preserve_unknown)
                } else if types.is_empty() {
                    if preserve_unknown {
                        Atom::Deduced
                    } else {
                        Atom::Untyped
                    }
                } else {
                    let values = match schema.get("additionalProperties") {
                        Some(v @ Value::Object(_)) => self.type_ref(v, preserve_unknown),
                        _ if preserve_unknown => TypeId::DEDUCED,
                        _ => TypeId::UNTYPED,
                    };
                    Atom::Map {
                        values,
                        atomic: atomic_map,
                    }
                }
            }
            ["array"] => {
                let items = match schema.get("items") {
                    Some(items @ Value::Object(_)) => self.type_ref(items, preserve_unknown),
                    _ => TypeId::UNTYPED,
                };
                Atom::List {
                    items,
                    list_type: list_type(schema),
                }
            }
            ["string"] => Atom::Scalar(match schema.get("format").and_then(Value::as_str) {
                None | Some("") | Some("byte") => Scalar::String,
                Some("int-or-string") => Scalar::IntOrString,
                Some(_) => Scalar::Other,
            }),
            ["integer"] | ["number"] => Atom::Scalar(Scalar::Number),
            ["boolean"] => Atom::Scalar(Scalar::Boolean),
            _ => Atom::Untyped,
        }
    }

    fn structure(
        &mut self,
        properties: &Map<String, Value>,
        atomic: bool,
        preserve_unknown: bool,
    ) -> Atom {
        let mut fields: Vec<Field> = properties
            .iter()
            .map(|(name, field)| Field {
                name: name.as_str().into(),
                ty: self.type_ref(field, preserve_unknown),
                default: field.get("default").cloned(),
            })
            .collect();
        // Sorted by name: looked up by binary search on every locked write.
        fields.sort_by(|a, b| a.name.cmp(&b.name));
        let fields = fields.into_boxed_slice();
        Atom::Struct {
            fields,
            atomic,
            extra: preserve_unknown.then_some(TypeId::DEDUCED),
        }
    }
}

fn list_type(schema: &Value) -> ListType {
    let extension = |name: &str| schema.get(name);
    if let Some(list_type) = extension("x-kubernetes-list-type").and_then(Value::as_str) {
        return match list_type {
            "set" => ListType::Set,
            "map" => {
                let keys: Box<[Box<str>]> = extension("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(Box::from)
                    .collect();
                if keys.is_empty() {
                    ListType::Atomic
                } else {
                    ListType::Map(keys)
                }
            }
            _ => ListType::Atomic,
        };
    }
    match extension("x-kubernetes-patch-strategy").and_then(Value::as_str) {
        Some("merge" | "merge,retainKeys") => {
            match extension("x-kubernetes-patch-merge-key").and_then(Value::as_str) {
                Some(key) => ListType::Map(Box::new([Box::from(key)])),
                None => ListType::Set,
            }
        }
        _ => ListType::Atomic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_path(schema: &Schema, root: TypeId, path: &[&str]) -> TypeId {
        path.iter().fold(root, |ty, name| match schema.atom(ty) {
            Atom::List { items, .. } if *name == "*" => *items,
            _ => schema.field(ty, name),
        })
    }

    #[test]
    fn a_crds_spec_replicas_path_is_what_its_scale_writes() {
        let crds = serde_json::json!([
            {"spec": {"group": "example.com", "names": {"kind": "Cache"},
                "versions": [{"name": "v1", "subresources": {"scale": {
                    "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}}}]}},
            {"spec": {"group": "example.com", "names": {"kind": "Old"},
                "subresources": {"scale": {"specReplicasPath": ".spec.nodes.count"}}}},
            {"spec": {"group": "example.com", "names": {"kind": "Plain"},
                "versions": [{"name": "v1", "subresources": {"scale": {
                    "specReplicasPath": ".spec.replicas"}}}]}},
            {"spec": {"group": "example.com", "names": {"kind": "Indexed"},
                "versions": [{"name": "v1", "subresources": {"scale": {
                    "specReplicasPath": ".spec.sizes[0]"}}}]}},
            {"spec": {"group": "example.com"}},
            "not a CRD"
        ]);
        let schema = Schema::empty().with_scale_paths(crds.as_array().unwrap());
        assert_eq!(
            schema.replicas_pointer("example.com", "Cache"),
            "/spec/size"
        );
        assert_eq!(
            schema.replicas_pointer("example.com", "Old"),
            "/spec/nodes/count"
        );
        assert_eq!(
            schema.replicas_pointer("example.com", "Plain"),
            "/spec/replicas"
        );
        assert_eq!(
            schema.replicas_pointer("example.com", "Indexed"),
            "/spec/replicas"
        );
        assert_eq!(
            schema.replicas_pointer("apps", "Deployment"),
            "/spec/replicas"
        );
        assert_eq!(
            replicas_pointer(".spec.a/b"),
            Some("/spec/a~1b".to_string())
        );
        assert_eq!(replicas_pointer("spec.size"), None);
    }

    #[test]
    fn the_builtin_snapshot_knows_list_and_map_semantics_as_the_api_server_does() {
        let schema = Schema::builtin();
        assert!(schema.kind_count() > 100, "{} kinds", schema.kind_count());
        let deployment = schema.root("apps", "v1", "Deployment").unwrap();
        let pod_spec = field_path(&schema, deployment, &["spec", "template", "spec"]);
        let list = |ty: TypeId| match schema.atom(ty) {
            Atom::List { list_type, .. } => list_type.clone(),
            other => panic!("not a list: {other:?}"),
        };
        let keys = |names: &[&str]| ListType::Map(names.iter().map(|n| Box::from(*n)).collect());
        assert_eq!(list(schema.field(pod_spec, "containers")), keys(&["name"]));
        assert_eq!(list(schema.field(pod_spec, "volumes")), keys(&["name"]));
        assert_eq!(
            list(schema.field(pod_spec, "tolerations")),
            ListType::Atomic
        );
        let container = field_path(&schema, pod_spec, &["containers", "*"]);
        assert_eq!(list(schema.field(container, "args")), ListType::Atomic);
        assert_eq!(list(schema.field(container, "env")), keys(&["name"]));
        assert_eq!(
            list(schema.field(container, "ports")),
            keys(&["containerPort", "protocol"])
        );
        // A LabelSelector is one value.
        assert!(matches!(
            schema.atom(field_path(&schema, deployment, &["spec", "selector"])),
            Atom::Struct { atomic: true, .. }
        ));
        let binding = schema
            .root("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding")
            .unwrap();
        assert_eq!(list(schema.field(binding, "subjects")), ListType::Atomic);
        let meta = schema.field(binding, "metadata");
        assert_eq!(list(schema.field(meta, "finalizers")), ListType::Set);
        assert_eq!(list(schema.field(meta, "ownerReferences")), keys(&["uid"]));
        assert!(matches!(
            schema.atom(field_path(
                &schema,
                container,
                &["resources", "limits", "cpu"]
            )),
            Atom::Scalar(Scalar::Quantity)
        ));
        let service = schema.root("", "v1", "Service").unwrap();
        assert!(matches!(
            schema.atom(field_path(
                &schema,
                service,
                &["spec", "ports", "*", "targetPort"]
            )),
            Atom::Scalar(Scalar::IntOrString)
        ));
    }

    #[test]
    fn custom_resource_schemas_follow_the_same_rules() {
        let doc = serde_json::json!({"definitions": {"com.example.v1.Widget": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Widget"}],
            "properties": {
                "spec": {"type": "object", "properties": {
                    "hosts": {"type": "array", "items": {"type": "string"}},
                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "port": {"x-kubernetes-int-or-string": true},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}
            }
        }}});
        let schema = Schema::from_openapi_v2(doc.to_string().as_bytes()).unwrap();
        let root = schema.root_or_deduced("example.com/v1", "Widget");
        let spec = schema.field(root, "spec");
        assert!(matches!(
            schema.atom(schema.field(spec, "hosts")),
            Atom::List {
                list_type: ListType::Atomic,
                ..
            }
        ));
        assert!(matches!(
            schema.atom(schema.field(spec, "tags")),
            Atom::List {
                list_type: ListType::Set,
                ..
            }
        ));
        assert!(matches!(
            schema.atom(schema.field(spec, "port")),
            Atom::Scalar(Scalar::IntOrString)
        ));
        let extra = schema.field(spec, "extra");
        assert_eq!(schema.field(extra, "anything"), TypeId::DEDUCED);
        assert_eq!(
            schema.root_or_deduced("example.com/v1", "Gadget"),
            TypeId::DEDUCED
        );
        assert!(Schema::from_openapi_v2(b"{}").is_err());
        assert!(Schema::from_openapi_v2(b"not json").is_err());
    }

    /// A pointer field's zero is kept by the API server, a plain field's left out: on every
    /// embedded version, for the fields the chart of issue 67 locks at `false`.
    #[test]
    fn a_pointer_fields_zero_is_not_omitted() {
        for version in KubeVersion::ALL {
            let schema = Schema::embedded(version);
            let pod = schema.field(
                schema.field(
                    schema.field(schema.root_or_deduced("apps/v1", "Deployment"), "spec"),
                    "template",
                ),
                "spec",
            );
            let item = |list: TypeId| match schema.atom(list) {
                Atom::List { items, .. } => *items,
                _ => panic!("{version}: not a list"),
            };
            let container = item(schema.field(pod, "containers"));
            let security = schema.field(container, "securityContext");
            assert!(schema.omits_zero(pod, "hostNetwork"), "{version}");
            assert!(
                !schema.omits_zero(pod, "automountServiceAccountToken"),
                "{version}"
            );
            assert!(
                !schema.omits_zero(security, "allowPrivilegeEscalation"),
                "{version}"
            );
            assert!(!schema.omits_zero(security, "runAsUser"), "{version}");
            let account = schema.root_or_deduced("v1", "ServiceAccount");
            assert!(!schema.omits_zero(account, "automountServiceAccountToken"));
            let owner = item(schema.field(schema.field(account, "metadata"), "ownerReferences"));
            assert!(!schema.omits_zero(owner, "controller"), "{version}");
            assert!(schema.omits_zero(owner, "name"), "{version}");
        }
        let schema = Schema::embedded(KubeVersion::V1_36);
        let pod = schema.field(schema.root_or_deduced("v1", "Pod"), "spec");
        assert!(!schema.omits_zero(pod, "hostUsers"));
        // The table's every line is a definition name and at least one field.
        assert!(POINTER_FIELDS
            .lines()
            .all(|l| l.starts_with("io.k8s.") && l.split_ascii_whitespace().count() >= 2));
    }
}
