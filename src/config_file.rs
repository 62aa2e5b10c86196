//! The policy file (`--config`): modes, exemptions, ignore rules, which releases are locked.

use std::path::{Path, PathBuf};

use crate::core::{validate_config, Config};

/// Why the policy file cannot be used; each names the file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigFileError {
    #[error("{}: cannot read it", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a policy file", .path.display())]
    Yaml {
        path: PathBuf,
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    #[error("{}: {reason}", .path.display())]
    Invalid { path: PathBuf, reason: String },
}

/// Reads and validates the policy file; the defaults without one.
pub(crate) fn load(path: Option<&Path>) -> Result<Config, ConfigFileError> {
    let Some(path) = path else {
        return Ok(Config::default());
    };
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let config: Config = serde_saphyr::from_str(&text).map_err(|source| ConfigFileError::Yaml {
        path: path.to_path_buf(),
        source: Box::new(source),
    })?;
    validate_config(&config).map_err(|reason| ConfigFileError::Invalid {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    })?;
    Ok(config)
}
