//! The offline commands (`review`, `inspect`, `owned-fields`): each reads files a user gives
//! (release Secrets as kubectl prints them, an AdmissionReview, live objects, a schema) and
//! prints what the server would decide or lock. What they share is here: reading the releases,
//! the CustomResourceDefinitions and the schema, and the error each reports.

mod inspect;
mod owned_fields;
mod review;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::core::{ChartsByRevision, Index, KubeVersion, Schema};
use crate::source::files;

pub(crate) use inspect::run_inspect;
pub(crate) use owned_fields::run_owned_fields;
pub(crate) use review::{review_config, run_review};

/// Why an offline command could not run: the input is unusable (exit status 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum OfflineError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    #[error("no release Secret could be read")]
    NoRelease,
    #[error("{0}")]
    Config(String),
    #[error("the embedded schema: {0}")]
    Schema(String),
    #[error("give the AdmissionReview file after the release paths")]
    NoReview,
    #[error("give the live objects' file after the release paths")]
    NoObjects,
    #[error("writing JSON: {0}")]
    Output(#[from] serde_json::Error),
}

impl OfflineError {
    fn read(path: &Path, source: std::io::Error) -> Self {
        OfflineError::Read {
            path: path.to_path_buf(),
            source,
        }
    }

    fn invalid(path: &Path, reason: impl std::fmt::Display) -> Self {
        OfflineError::Invalid {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        }
    }
}

pub(crate) fn load_index(paths: &[PathBuf]) -> Result<Index, OfflineError> {
    let loaded = files::load(paths);
    for problem in &loaded.problems {
        eprintln!("helm-locker: skipped {problem}");
    }
    if loaded.secrets.is_empty() && !loaded.problems.is_empty() {
        return Err(OfflineError::NoRelease);
    }
    Ok(Index::from_secrets(loaded.secrets))
}

/// The CustomResourceDefinitions in files and folders (`.yaml`, `.yml`, `.json`, every level).
pub(crate) fn read_crds(paths: &[PathBuf]) -> Result<Vec<serde_json::Value>, OfflineError> {
    let mut out = Vec::new();
    let mut pending: Vec<PathBuf> = paths.to_vec();
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            let entries = std::fs::read_dir(&path).map_err(|e| OfflineError::read(&path, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| OfflineError::read(&path, e))?.path();
                let named = entry
                    .extension()
                    .is_some_and(|e| e == "yaml" || e == "yml" || e == "json");
                if entry.is_dir() || named {
                    pending.push(entry);
                }
            }
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| OfflineError::read(&path, e))?;
        out.extend(crds_in(&text).map_err(|e| OfflineError::invalid(&path, e))?);
    }
    Ok(out)
}

/// The CustomResourceDefinitions of a YAML or JSON text (several documents, or a List).
pub(crate) fn crds_in(text: &str) -> Result<Vec<serde_json::Value>, serde_saphyr::Error> {
    let mut pending: Vec<serde_json::Value> = serde_saphyr::from_multiple(text)?;
    let mut out = Vec::new();
    while let Some(document) = pending.pop() {
        match document.get("kind").and_then(|k| k.as_str()) {
            Some("List") => pending.extend(
                document
                    .get("items")
                    .and_then(|i| i.as_array())
                    .cloned()
                    .unwrap_or_default(),
            ),
            Some("CustomResourceDefinition") => out.push(document),
            _ => {}
        }
    }
    Ok(out)
}

/// Which schema an offline command reads: the given `/openapi/v2`, else a version's embedded
/// one. Said on standard error, as the answers depend on it.
pub(crate) type SchemaChoice<'a> = (Option<&'a std::path::Path>, KubeVersion);

pub(crate) fn load_schema(choice: SchemaChoice<'_>) -> Result<Arc<Schema>, OfflineError> {
    let (openapi, version) = choice;
    match openapi {
        None => {
            eprintln!("helm-locker: the embedded schema of Kubernetes {version} (--kube-version, --openapi)");
            Ok(Schema::embedded(version))
        }
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| OfflineError::read(path, e))?;
            Schema::from_openapi_v2(&bytes)
                .map(Arc::new)
                .map_err(|e| OfflineError::invalid(path, e))
        }
    }
}

/// The chart files of each release's newest revision, from the same files (not standard input,
/// which was read once already).
pub(crate) fn inspected_charts(paths: &[PathBuf], index: &crate::core::Index) -> ChartsByRevision {
    // Every Secret's data, read once by name; decoded only for the revisions listed.
    let mut by_name = std::collections::HashMap::new();
    for file in files::release_files(paths).unwrap_or_default() {
        if file.as_os_str() == "-" {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for entry in crate::core::release_data(&text) {
            if let Some(secret) = entry.secret {
                by_name.insert((secret.namespace, secret.name), entry.data);
            }
        }
    }
    let mut charts = ChartsByRevision::new();
    for state in index.releases() {
        let Some(revision) = state.newest().map(|r| r.revision) else {
            continue;
        };
        let name = format!("sh.helm.release.v1.{}.v{revision}", state.key.name);
        let data = by_name
            .get(&(state.key.namespace.clone(), name.clone()))
            .or_else(|| by_name.get(&(String::new(), name)));
        if let Some(files) = data.and_then(|d| crate::core::decode_chart_files(d).ok()) {
            charts.insert((state.key.clone(), revision), files);
        }
    }
    charts
}
