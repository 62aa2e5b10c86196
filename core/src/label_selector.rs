//! Label selectors (`k=v,k!=v,k,!k`) over a release's labels, parsed once when the
//! configuration is read: the configuration's `releaseSelector` and a writer rule's release.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
#[error("invalid label selector {0:?}: use k=v, k!=v, k or !k, separated by commas")]
pub struct SelectorError(String);

/// A label selector (`k=v,k!=v,k,!k`), parsed once when the configuration is read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LabelSelector {
    text: String,
    requirements: Vec<Requirement>,
}

impl TryFrom<String> for LabelSelector {
    type Error = SelectorError;

    fn try_from(text: String) -> Result<Self, SelectorError> {
        let requirements = parse_selector(&text)?;
        Ok(LabelSelector { text, requirements })
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Self, SelectorError> {
        LabelSelector::try_from(text.to_string())
    }
}

impl From<LabelSelector> for String {
    fn from(selector: LabelSelector) -> String {
        selector.text
    }
}

impl LabelSelector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
}

fn parse_selector(selector: &str) -> Result<Vec<Requirement>, SelectorError> {
    selector
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|part| {
            let valid = |k: &str| !k.is_empty() && !k.contains(['=', '!', ' ']);
            let req = if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some(k) = part.strip_prefix('!') {
                Requirement::NotExists(k.trim().into())
            } else {
                Requirement::Exists(part.into())
            };
            let key = match &req {
                Requirement::Equals(k, _)
                | Requirement::NotEquals(k, _)
                | Requirement::Exists(k)
                | Requirement::NotExists(k) => k,
            };
            if valid(key) {
                Ok(req)
            } else {
                Err(SelectorError(selector.into()))
            }
        })
        .collect()
}
