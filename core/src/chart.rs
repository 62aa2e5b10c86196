//! A release's chart files: what Helm keeps of the chart besides the manifest (the templates,
//! the chart's default values and the release's config), read from a release on demand.
//!
//! The files are decoded with [`crate::release`]'s reading of Helm's storage format, and
//! [`crate::trace`] follows a field to its values key in them: release.rs knows nothing of chart
//! files, and trace.rs takes them from here, not from release.rs.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::release::{
    decode_base64, decode_data_release, describe_json_error, helm_payload_json, release_data,
    DecodeError, Layer, RawChartMetadata, ReleaseKey,
};

/// The chart's templates by name as Helm stores them (`templates/deployment.yaml`,
/// `templates/_helpers.tpl`). Read from a release, it also holds the chart's default values
/// ([`CHART_VALUES`]) and the release's config ([`RELEASE_CONFIG`]) as JSON: names no
/// template has (Helm's all start with `templates/`).
pub(crate) type Templates = BTreeMap<String, String>;

/// The name under which [`Templates`] holds the chart's default values (`chart.values` of
/// the release JSON), as JSON.
pub(crate) const CHART_VALUES: &str = "(release)/chart.values.json";
/// The name under which [`Templates`] holds the release's user-supplied values (`config`),
/// as JSON.
pub(crate) const RELEASE_CONFIG: &str = "(release)/config.json";

/// What a release keeps of its chart besides the manifest: the templates, for tracing a field
/// to its values key ([`crate::trace`]). Decoded on demand (a denial, `review --explain`), never
/// kept in the index.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChartFiles {
    /// The chart's name (`metadata.name`).
    pub chart: String,
    pub manifest: String,
    /// By name as Helm stores them: `templates/deployment.yaml`.
    pub templates: Templates,
    /// The chart's `crds/` files (YAML or JSON text), which Helm installs before the templates
    /// and keeps out of the manifest.
    pub crds: Vec<String>,
}

/// The chart files of a Secret's `data.release` value (both base64 layers).
pub fn decode_chart_files(data_release: &str) -> Result<ChartFiles, DecodeError> {
    let helm_layer =
        decode_base64(data_release.as_bytes()).ok_or(DecodeError::NotBase64(Layer::Secret))?;
    decode_chart_files_payload(&helm_layer)
}

/// The chart files of Helm's own encoding (what a Secret's `data.release` holds once the
/// Secret's base64 is undone, as a Kubernetes client hands it over).
pub fn decode_chart_files_payload(helm_base64: &[u8]) -> Result<ChartFiles, DecodeError> {
    let json = helm_payload_json(helm_base64)?;
    #[derive(Deserialize)]
    struct Raw {
        chart: Option<RawChartFiles>,
        manifest: Option<String>,
        /// The release's user-supplied values.
        config: Option<Value>,
    }
    #[derive(Deserialize)]
    struct RawChartFiles {
        metadata: Option<RawChartMetadata>,
        /// `null` for a chart without templates (CRDs only).
        templates: Option<Vec<RawFile>>,
        /// The chart's other files, `crds/` among them (`null` when it has none: Go's nil).
        files: Option<Vec<RawFile>>,
        /// The chart's default values.
        values: Option<Value>,
    }
    #[derive(Deserialize)]
    struct RawFile {
        name: String,
        /// `null` for an empty file.
        data: Option<String>,
    }
    let raw: Raw =
        serde_json::from_slice(&json).map_err(|e| DecodeError::NotJson(describe_json_error(&e)))?;
    let chart = raw.chart.ok_or(DecodeError::MissingField("chart"))?;
    let text = |f: &RawFile| {
        String::from_utf8(decode_base64(f.data.as_deref().unwrap_or("").as_bytes())?).ok()
    };
    let mut templates: Templates = chart
        .templates
        .iter()
        .flatten()
        .filter_map(|f| Some((f.name.clone(), text(f)?)))
        .collect();
    let crds = chart
        .files
        .iter()
        .flatten()
        .filter(|f| {
            f.name.starts_with("crds/")
                && [".yaml", ".yml", ".json"]
                    .iter()
                    .any(|e| f.name.ends_with(e))
        })
        .filter_map(text)
        .collect();
    // The values, so that a values-key hint can be checked against them (trace.rs).
    for (name, values) in [(CHART_VALUES, chart.values), (RELEASE_CONFIG, raw.config)] {
        if let Some(values) = values.filter(|v| !v.is_null()) {
            templates.insert(name.to_string(), values.to_string());
        }
    }
    Ok(ChartFiles {
        chart: chart.metadata.and_then(|m| m.name).unwrap_or_default(),
        manifest: raw.manifest.unwrap_or_default(),
        templates,
        crds,
    })
}

/// The chart files of revision `revision` of `release` in a release file (as
/// [`crate::release::parse_release_file`] reads it); `None` when the file does not hold it.
pub fn find_chart_files(text: &str, release: &ReleaseKey, revision: u64) -> Option<ChartFiles> {
    let secret_name = format!("sh.helm.release.v1.{}.v{revision}", release.name);
    release_data(text).into_iter().find_map(|entry| {
        let matches = match &entry.secret {
            Some(secret) => {
                secret.name == secret_name
                    && (secret.namespace.is_empty() || secret.namespace == release.namespace)
            }
            None => decode_data_release(&entry.data).is_ok_and(|r| {
                r.name == release.name && r.namespace == release.namespace && r.revision == revision
            }),
        };
        matches
            .then(|| decode_chart_files(&entry.data).ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use serde_json::json;

    /// Helm writes a chart without other files as `"files": null` (Go's nil slice): the chart
    /// still decodes, and a chart's `crds/` files are read.
    #[test]
    fn chart_files_decode_with_null_or_crd_files() {
        let mut release =
            crate::test_util::release_json("shop", "shop", 1, crate::release::Status::Deployed, "");
        release["chart"]["templates"] = json!([{"name": "templates/a.yaml",
            "data": base64::engine::general_purpose::STANDARD.encode("a: 1")}]);
        release["chart"]["files"] = Value::Null;
        let mut no_templates = release.clone();
        no_templates["chart"]["templates"] = Value::Null;
        let files =
            decode_chart_files_payload(crate::test_util::helm_payload(&no_templates).as_bytes())
                .unwrap();
        assert!(files.templates.keys().all(|k| !k.starts_with("templates/")));
        let files = decode_chart_files_payload(crate::test_util::helm_payload(&release).as_bytes())
            .unwrap();
        assert_eq!(
            files.templates.get("templates/a.yaml").map(String::as_str),
            Some("a: 1")
        );
        assert!(files.crds.is_empty());
        release["chart"]["files"] = json!([
            {"name": "crds/x.yaml", "data": base64::engine::general_purpose::STANDARD.encode("kind: CustomResourceDefinition")},
            {"name": "README.md", "data": base64::engine::general_purpose::STANDARD.encode("# x")}]);
        let files = decode_chart_files_payload(crate::test_util::helm_payload(&release).as_bytes())
            .unwrap();
        assert_eq!(files.crds, ["kind: CustomResourceDefinition"]);
    }
}
