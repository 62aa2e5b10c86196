//! `helm-locker owned-fields`: what helm-locker locks in live objects against what the API
//! server attributes to Helm's field manager.

use std::path::PathBuf;

use super::{load_index, load_schema, OfflineError, SchemaChoice};

/// `owned-fields`: true when every object's ownership matches Helm's managedFields entry.
pub(crate) fn run_owned_fields(
    releases: &[PathBuf],
    objects: &[PathBuf],
    openapi: SchemaChoice<'_>,
    manager: Option<&str>,
) -> Result<bool, OfflineError> {
    use crate::core::{applied_object, attribution_of, helm_fields, owned_fields};
    let index = load_index(releases)?;
    let schema = load_schema(openapi)?;
    let mut all_match = true;
    for path in objects {
        let text = std::fs::read_to_string(path).map_err(|e| OfflineError::read(path, e))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| OfflineError::invalid(path, e))?;
        let items = match value.get("items").and_then(|i| i.as_array()) {
            Some(items) => items.clone(),
            None => vec![value],
        };
        for live in &items {
            let field = |p: &str| live.pointer(p).and_then(|v| v.as_str()).unwrap_or_default();
            let (api_version, kind, name) = (
                field("/apiVersion"),
                field("/kind"),
                field("/metadata/name"),
            );
            let namespace = live.pointer("/metadata/namespace").and_then(|v| v.as_str());
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            let Some(object) = index.owned(group, kind, namespace, name, || {
                crate::core::live_owner(live)
            }) else {
                println!(
                    "{}",
                    serde_json::json!({"object": format!("{kind} {name}"), "error": "no release locks this object"})
                );
                all_match = false;
                continue;
            };
            let Some((helm_manager, fields)) = helm_fields(live, manager) else {
                println!(
                    "{}",
                    serde_json::json!({"object": object.describe(), "error": "no Apply entry of Helm in managedFields"})
                );
                all_match = false;
                continue;
            };
            let release = &object.release;
            let applied = applied_object(&object.content(), (&release.name, &release.namespace));
            let root = schema.root_or_deduced(&object.api_version(), &object.kind);
            let owned = owned_fields(&schema, root, &applied).len();
            let found = attribution_of(&schema, root, &applied, helm_manager, fields);
            all_match &= found.matches();
            println!(
                "{}",
                serde_json::json!({"object": object.describe(), "manager": helm_manager,
                    "owned": owned, "missing": found.missing, "extra": found.extra,
                    "empty": found.empty})
            );
        }
    }
    Ok(all_match)
}
