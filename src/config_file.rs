//! The policy file (`--config`): modes, exemptions, ignore rules, which releases are locked.

use crate::core::policy::{self, Config};

/// Reads and validates the policy file; the defaults without one.
pub(crate) fn load(path: Option<&std::path::Path>) -> Result<Config, String> {
    let Some(path) = path else {
        return Ok(Config::default());
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let config: Config =
        serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    policy::validate(&config).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(config)
}
