//! `helm-locker review`: one AdmissionReview decided offline, exactly as the server would.

use std::path::{Path, PathBuf};

use super::{crds_in, inspected_charts, load_index, read_crds, OfflineError, SchemaChoice};
use crate::core::{decide, parse_review, render_response, validate_config, Config, Mode, Schema};
use crate::source::files;

/// The configuration `review` decides with: the file, then the flags, as `serve` builds its own
/// from the same file and flags (`app::serve_settings`), so both decide alike.
pub(crate) fn review_config(
    path: Option<&std::path::Path>,
    mode: Option<Mode>,
    revert: bool,
    own_release: Option<crate::core::ReleaseKey>,
) -> Result<Config, OfflineError> {
    let mut config = crate::config_file::load(path)
        .map_err(|e| OfflineError::Config(crate::error_chain::with_causes(&e)))?;
    if let Some(mode) = mode {
        config.mode = mode;
    }
    config.ownership_returned = revert;
    config.own_release = own_release;
    validate_config(&config).map_err(OfflineError::Config)?;
    Ok(config)
}

pub(crate) fn run_review(
    releases: &[PathBuf],
    review: &Path,
    config: Config,
    explain: bool,
    (openapi, version): SchemaChoice<'_>,
    crd_files: &[PathBuf],
) -> Result<(), OfflineError> {
    let index = load_index(releases)?;
    let body = if review.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(review)
    }
    .map_err(|e| OfflineError::read(review, e))?;
    let parsed = parse_review(body.as_bytes()).map_err(|e| OfflineError::invalid(review, e))?;
    // The CRDs given, those the releases render, and those of their charts' `crds/` folders.
    let mut crds = read_crds(crd_files)?;
    for state in index.releases() {
        for object in state.objects.iter().flatten() {
            if object.group.as_ref() == "apiextensions.k8s.io"
                && object.kind.as_ref() == "CustomResourceDefinition"
            {
                crds.push(object.content().to_json());
            }
        }
    }
    for files in inspected_charts(releases, &index).values() {
        for text in &files.crds {
            // A chart's file that is not YAML stops nothing: the API server would refuse it.
            crds.extend(crds_in(text).unwrap_or_default());
        }
    }
    let schema = match openapi {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| OfflineError::read(path, e))?;
            Schema::from_openapi_v2(&bytes).map_err(|e| OfflineError::invalid(path, e))?
        }
        None => {
            eprintln!("helm-locker: the embedded schema of Kubernetes {version} (--kube-version, --openapi)");
            Schema::snapshot(version).map_err(|e| OfflineError::Schema(e.to_string()))?
        }
    }
    .with_crds(crds.iter());
    let mut decision = decide(&index, &schema, &config, &parsed.request)
        .map_err(|e| OfflineError::invalid(review, e))?;
    // As the server does: the message says where the chart sets the fields.
    add_offline_advice(releases, &mut decision);
    let response = render_response(&parsed.api_version, &parsed.request.uid, decision.verdict());
    println!("{}", String::from_utf8_lossy(&response));
    if explain {
        eprintln!("{}", decision.explain());
    }
    Ok(())
}

/// For `review`: where the chart sets the denied fields, read from the chart stored in the
/// release files given (the server reads it from the release Secret).
fn add_offline_advice(releases: &[PathBuf], decision: &mut crate::core::Decision) {
    let Some(locked) = decision.traceable() else {
        return;
    };
    let files = files::release_files(releases).ok().and_then(|found| {
        found.iter().find_map(|file| {
            let text = std::fs::read_to_string(file).ok()?;
            crate::core::find_chart_files(&text, &locked.release, locked.revision)
        })
    });
    if let Some(files) = files {
        locked.add_chart_advice(&files);
    }
}
