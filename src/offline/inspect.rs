//! `helm-locker inspect`: each release and the objects it locks, as text or JSON.

use std::path::PathBuf;

use super::{inspected_charts, load_index, OfflineError};
use crate::cli::Output;
use crate::core::{inspect, inspect_text};

pub(crate) fn run_inspect(paths: &[PathBuf], output: Output) -> Result<(), OfflineError> {
    let index = load_index(paths)?;
    let charts = inspected_charts(paths, &index);
    match output {
        Output::Text => print!("{}", inspect_text(&index, &charts)),
        Output::Json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&inspect(&index, &charts))?
            )
        }
    }
    Ok(())
}
