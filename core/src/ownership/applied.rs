//! The chart's object as Helm applies it (with the release annotations and `managed-by` label
//! Helm adds to every object) and as the API server stores it (a Secret's `stringData` folded
//! into `data`).

use base64::Engine;

use crate::tree::Tree;

/// The annotations and label Helm adds to every object it applies (not in the manifest).
pub(crate) const RELEASE_NAME_ANNOTATION: &str = "meta.helm.sh/release-name";
pub(crate) const RELEASE_NAMESPACE_ANNOTATION: &str = "meta.helm.sh/release-namespace";
pub(crate) const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// The chart's object as Helm applies it: with Helm's release metadata (server-side apply
/// attributes a Secret's `stringData` to Helm as `stringData`, though only `data` is stored).
pub fn applied_object(chart: &Tree, release: (&str, &str)) -> Tree {
    let Tree::Map(entries) = chart else {
        return chart.clone();
    };
    let mut entries: Vec<(Box<str>, Tree)> = entries.to_vec();
    let (name, namespace) = release;
    let metadata = entries
        .iter()
        .position(|(k, _)| &**k == "metadata")
        .unwrap_or_else(|| {
            entries.push(("metadata".into(), Tree::Map(Box::new([]))));
            entries.len() - 1
        });
    let with = |map: &Tree, key: &str, extra: &[(&str, &str)]| -> Tree {
        let mut inner: Vec<(Box<str>, Tree)> = match map.get(key) {
            Some(Tree::Map(e)) => e.to_vec(),
            _ => Vec::new(),
        };
        for (k, v) in extra {
            if !inner.iter().any(|(ik, _)| &**ik == *k) {
                inner.push(((*k).into(), Tree::Str((*v).into())));
            }
        }
        Tree::map_from(inner)
    };
    let meta = &entries[metadata].1;
    let mut meta_entries: Vec<(Box<str>, Tree)> = match meta {
        Tree::Map(e) => e
            .iter()
            .filter(|(k, _)| !matches!(&**k, "annotations" | "labels"))
            .cloned()
            .collect(),
        _ => Vec::new(),
    };
    meta_entries.push((
        "annotations".into(),
        with(
            meta,
            "annotations",
            &[
                (RELEASE_NAME_ANNOTATION, name),
                (RELEASE_NAMESPACE_ANNOTATION, namespace),
            ],
        ),
    ));
    meta_entries.push((
        "labels".into(),
        with(meta, "labels", &[(MANAGED_BY_LABEL, "Helm")]),
    ));
    entries[metadata].1 = Tree::map_from(meta_entries);
    Tree::map_from(entries)
}

/// `stringData` entries become base64 `data` entries (they win over `data`, as on the server).
fn fold_string_data(entries: &mut Vec<(Box<str>, Tree)>) {
    let Some(position) = entries.iter().position(|(k, _)| &**k == "stringData") else {
        return;
    };
    let (_, string_data) = entries.remove(position);
    let Tree::Map(strings) = string_data else {
        return;
    };
    let mut data: Vec<(Box<str>, Tree)> = match entries.iter().find(|(k, _)| &**k == "data") {
        Some((_, Tree::Map(d))) => d.to_vec(),
        _ => Vec::new(),
    };
    for (key, value) in strings.iter() {
        let text = match value {
            Tree::Str(s) => s.to_string(),
            Tree::Null => continue,
            other => other.to_json().to_string(),
        };
        let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
        data.retain(|(k, _)| k != key);
        data.push((key.clone(), Tree::Str(encoded.into())));
    }
    entries.retain(|(k, _)| &**k != "data");
    entries.push(("data".into(), Tree::map_from(data)));
}

/// The chart's object as the API server stores it: a Secret's `stringData` folded into `data`
/// (borrowed unchanged for everything else).
pub(crate) fn stored_form<'t>(
    chart: &'t Tree,
    group: &str,
    kind: &str,
) -> std::borrow::Cow<'t, Tree> {
    match chart {
        Tree::Map(entries)
            if group.is_empty() && kind == "Secret" && chart.get("stringData").is_some() =>
        {
            let mut entries = entries.to_vec();
            fold_string_data(&mut entries);
            std::borrow::Cow::Owned(Tree::map_from(entries))
        }
        _ => std::borrow::Cow::Borrowed(chart),
    }
}
