//! A release manifest (multi-document YAML with `# Source:` comments) -> the objects it owns.

use crate::packed::Packed;
use crate::tree::Tree;

/// One object a chart renders, with the chart's content for comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct ManifestObject {
    pub group: String,
    pub version: String,
    pub kind: String,
    /// `metadata.namespace` as the chart wrote it (often absent).
    pub namespace: Option<String>,
    pub name: String,
    /// Packed as soon as it is parsed: a cluster's worth of parsed trees would not fit the
    /// memory the index is allowed.
    pub content: Packed,
}

impl ManifestObject {
    pub fn api_version(&self) -> String {
        api_version(&self.group, &self.version)
    }
}

/// `v1` for the core group, `group/version` otherwise.
pub fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// A document of the manifest that could not be used; the rest of the release still is.
#[derive(Clone, Debug, PartialEq)]
pub struct SkippedDocument {
    /// 1-based position of the document in the manifest.
    pub document: usize,
    /// The `# Source:` template the document came from, when present.
    pub source: Option<String>,
    pub reason: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Manifest {
    pub objects: Vec<ManifestObject>,
    pub skipped: Vec<SkippedDocument>,
}

/// Splits documents the way Helm's `releaseutil.SplitManifests` does: at lines starting
/// with `---`.
pub fn split_documents(manifest: &str) -> impl Iterator<Item = &str> {
    let mut rest = manifest;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let mut offset = 0;
        loop {
            let line_end = rest[offset..]
                .find('\n')
                .map_or(rest.len(), |i| offset + i + 1);
            let line = &rest[offset..line_end];
            let is_separator =
                line.starts_with("---") && line[3..].chars().next().is_none_or(char::is_whitespace);
            if is_separator {
                let doc = &rest[..offset];
                rest = &rest[line_end..];
                return Some(doc);
            }
            // Only a line that starts with `---` can be a separator: the next such line is
            // found with `memmem`, not line by line.
            match memchr::memmem::find(&rest.as_bytes()[offset..], b"\n---") {
                Some(i) => offset += i + 1,
                None => {
                    done = true;
                    return Some(rest);
                }
            }
        }
    })
}

fn source_comment(doc: &str) -> Option<String> {
    doc.lines()
        .find_map(|l| l.trim().strip_prefix("# Source:"))
        .map(|s| s.trim().to_string())
}

/// Parses a manifest. Duplicate keys keep the last value (as `kubectl`/Helm's YAML decoding
/// does); empty documents are skipped; a `List` is expanded into its items.
pub fn parse_manifest(manifest: &str) -> Manifest {
    let mut out = Manifest::default();
    for (i, doc) in split_documents(manifest).enumerate() {
        parse_document_into(i, doc, &mut out, 0);
    }
    out
}

/// Document `i` (0-based) of a manifest into `out`; `counted`: objects of the release
/// already counted outside `out` (a `List`'s items stop at the release's limit).
fn parse_document_into(i: usize, doc: &str, out: &mut Manifest, counted: usize) {
    if doc
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return;
    }
    let skip = |reason: String| SkippedDocument {
        document: i + 1,
        source: source_comment(doc),
        reason,
    };
    match crate::yaml::parse_document(doc) {
        Ok(Tree::Null) => {}
        Ok(tree) => collect_objects(tree, out, counted, &skip),
        Err(e) => out.skipped.push(skip(format!(
            "not valid YAML{}",
            e.line.map(|l| format!(" (line {l})")).unwrap_or_default()
        ))),
    }
}

/// An object of a manifest as the index reads it at start: its identity, and where its
/// content is ([`crate::object_content`]).
pub(crate) struct ScannedObject {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub held: crate::object_content::Held,
}

/// Kinds whose fields the index reads at once: a `List`'s items are objects, an autoscaler's
/// `scaleTargetRef` frees its target's replicas ([`crate::index`]'s `mark_scaled`).
fn parsed_at_once(kind: &str) -> bool {
    kind.ends_with("List") || kind == "HorizontalPodAutoscaler"
}

/// [`parse_manifest`] for the index: a document whose identity reads on its lines
/// ([`crate::identity`]) is not parsed (its bytes are kept), any other as `parse_manifest`
/// does. The objects and skipped documents are those `parse_manifest` gives, in its order
/// (a document it would skip as invalid YAML is found when first parsed instead).
pub(crate) fn scan_manifest(manifest: &str) -> (Vec<ScannedObject>, Vec<SkippedDocument>) {
    use crate::object_content::Held;
    let mut objects = Vec::new();
    let mut skipped = Vec::new();
    for (i, doc) in split_documents(manifest).enumerate() {
        let start = doc.as_ptr() as usize - manifest.as_ptr() as usize;
        let range = u32::try_from(start)
            .ok()
            .zip(u32::try_from(start + doc.len()).ok());
        let identity = crate::identity::identity(doc).filter(|id| !parsed_at_once(id.kind));
        if let (Some(id), Some((start, end))) = (identity, range) {
            let (group, version) = id
                .api_version
                .rsplit_once('/')
                .unwrap_or(("", id.api_version));
            objects.push(ScannedObject {
                group: group.to_string(),
                version: version.to_string(),
                kind: id.kind.to_string(),
                namespace: id.namespace.map(str::to_string),
                name: id.name.to_string(),
                held: Held::Document { start, end },
            });
            continue;
        }
        // Parsed whole, as `parse_manifest` parses it.
        let mut one = Manifest::default();
        parse_document_into(i, doc, &mut one, objects.len());
        objects.extend(one.objects.into_iter().map(|o| ScannedObject {
            group: o.group,
            version: o.version,
            kind: o.kind,
            namespace: o.namespace,
            name: o.name,
            held: Held::Parsed(o.content),
        }));
        skipped.extend(one.skipped);
    }
    (objects, skipped)
}

fn collect_objects(
    tree: Tree,
    out: &mut Manifest,
    counted: usize,
    skip: &dyn Fn(String) -> SkippedDocument,
) {
    let kind = tree
        .get("kind")
        .and_then(Tree::as_str)
        .unwrap_or_default()
        .to_string();
    if kind == "List"
        || (kind.ends_with("List") && matches!(tree.get("items"), Some(Tree::List(_))))
    {
        if let Some(Tree::List(items)) = tree.get("items") {
            for item in items.iter() {
                // A `List` is one document to the count before parsing
                // ([`crate::release::manifest_documents`]): its items stop at the same limit.
                if (counted + out.objects.len()) as u64 >= crate::limits::max_release_objects() {
                    out.skipped.push(skip(format!(
                        "a List with more items than --max-release-objects ({}); the rest is not locked",
                        crate::limits::max_release_objects()
                    )));
                    break;
                }
                collect_objects(item.clone(), out, counted, skip);
            }
        }
        return;
    }
    match object_from_tree(tree) {
        Ok(object) => out.objects.push(object),
        Err(reason) => out.skipped.push(skip(reason.to_string())),
    }
}

fn object_from_tree(content: Tree) -> Result<ManifestObject, &'static str> {
    let api_version = content
        .get("apiVersion")
        .and_then(Tree::as_str)
        .ok_or("no apiVersion")?;
    let kind = content
        .get("kind")
        .and_then(Tree::as_str)
        .filter(|k| !k.is_empty())
        .ok_or("no kind")?;
    let name = content
        .pointer("/metadata/name")
        .and_then(Tree::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("no metadata.name (generateName objects cannot be locked)")?;
    let namespace = content
        .pointer("/metadata/namespace")
        .and_then(Tree::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Ok(ManifestObject {
        group: group.to_string(),
        version: version.to_string(),
        kind: kind.to_string(),
        namespace,
        name: name.to_string(),
        content: Packed::pack(&content),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_helm() {
        let docs: Vec<_> =
            split_documents("---\na: 1\n---\n# Source: x\nb: 2\n--- \nc: 3\n----\nd: 4").collect();
        assert_eq!(
            docs,
            ["", "a: 1\n", "# Source: x\nb: 2\n", "c: 3\n----\nd: 4"]
        );
        assert_eq!(split_documents("").collect::<Vec<_>>(), [""]);
    }

    /// Helm's rule read literally, a line at a time: what [`split_documents`] must agree with.
    fn split_line_by_line(manifest: &str) -> Vec<&str> {
        let (mut docs, mut start, mut at) = (Vec::new(), 0, 0);
        while at <= manifest.len() {
            let end = manifest[at..]
                .find('\n')
                .map_or(manifest.len(), |i| at + i + 1);
            let line = &manifest[at..end];
            if line.starts_with("---") && line[3..].chars().next().is_none_or(char::is_whitespace) {
                docs.push(&manifest[start..at]);
                start = end;
            }
            if end == manifest.len() {
                break;
            }
            at = end;
        }
        docs.push(&manifest[start..]);
        docs
    }

    #[test]
    fn splits_as_a_line_by_line_reading_does() {
        for manifest in [
            "",
            "---",
            "---\n",
            "a\n---",
            "a\n---\n",
            "a: 1\n---x\nb: 2\n--- # c\nc: 3\n",
            "----\n---\t\n---\u{a0}\nx\n",
            "a: \"---\"\n  ---\n---\n---\n",
            "\n---\n\n---",
            "x---\n---y\n---",
        ] {
            assert_eq!(
                split_documents(manifest).collect::<Vec<_>>(),
                split_line_by_line(manifest),
                "{manifest:?}"
            );
        }
    }

    #[test]
    fn parses_objects_with_source_comments_and_empty_documents() {
        let m = parse_manifest(
            "---\n# Source: shop/templates/a.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  replicas: 3\n---\n# Source: shop/templates/empty.yaml\n---\n\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: \"1\"}\n",
        );
        assert_eq!(m.skipped, []);
        assert_eq!(m.objects.len(), 2);
        let d = &m.objects[0];
        assert_eq!(
            (
                d.group.as_str(),
                d.version.as_str(),
                d.kind.as_str(),
                d.name.as_str()
            ),
            ("apps", "v1", "Deployment", "web")
        );
        assert_eq!(d.namespace.as_deref(), Some("shop"));
        assert_eq!(
            d.content.unpack().pointer("/spec/replicas"),
            Some(&Tree::Int(3))
        );
        let c = &m.objects[1];
        assert_eq!((c.group.as_str(), c.api_version()), ("", "v1".to_string()));
        assert_eq!(c.namespace, None);
    }

    #[test]
    fn duplicate_keys_keep_the_last_and_do_not_fail_the_release() {
        let m = parse_manifest("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: one\ndata:\n  a: two\n");
        assert_eq!(m.skipped, []);
        assert_eq!(
            m.objects[0]
                .content
                .unpack()
                .pointer("/data/a")
                .and_then(Tree::as_str),
            Some("two")
        );
    }

    #[test]
    fn lists_are_expanded_and_bad_documents_skipped_with_a_reason() {
        let m = parse_manifest(
            "# Source: c/templates/list.yaml\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n---\n# Source: c/templates/broken.yaml\nkind: [\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: x-}\n",
        );
        let names: Vec<_> = m
            .objects
            .iter()
            .map(|o| (o.kind.as_str(), o.name.as_str()))
            .collect();
        assert_eq!(names, [("ConfigMap", "a"), ("Secret", "b")]);
        assert_eq!(m.skipped.len(), 2);
        assert_eq!(
            m.skipped[0].source.as_deref(),
            Some("c/templates/broken.yaml")
        );
        assert!(m.skipped[0].reason.starts_with("not valid YAML"));
        assert!(m.skipped[1].reason.contains("generateName"));
    }

    #[test]
    fn a_list_stops_at_the_limit_on_a_releases_objects() {
        let limit = crate::limits::DEFAULT_MAX_RELEASE_OBJECTS as usize;
        let items: String = (0..limit + 10)
            .map(|i| format!("- {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{i}}}}}\n"))
            .collect();
        let m = parse_manifest(&format!(
            "# Source: c/templates/list.yaml\napiVersion: v1\nkind: List\nitems:\n{items}"
        ));
        assert_eq!(m.objects.len(), limit);
        assert_eq!(m.skipped.len(), 1);
        assert!(m.skipped[0].reason.contains("--max-release-objects"));
    }

    #[test]
    fn yaml_1_1_booleans_and_quoted_numbers_are_kept_as_kubernetes_reads_them() {
        let m = parse_manifest("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nspec:\n  on: yes\n  port: \"80\"\n  num: 80\n");
        let c = &m.objects[0].content.unpack();
        assert_eq!(c.pointer("/spec/port"), Some(&Tree::Str("80".into())));
        assert_eq!(c.pointer("/spec/num"), Some(&Tree::Int(80)));
        // go-yaml v2 (Kubernetes, Helm) reads `on`/`yes` as booleans: so does the index.
        assert_eq!(c.pointer("/spec/true"), Some(&Tree::Bool(true)));
    }
}
