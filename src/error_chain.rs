//! An error as the command line prints it: the error and every cause under it, on one line.

/// `no usable Kubernetes configuration: failed to infer config: ...`.
pub(crate) fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text.push_str(&format!(": {next}"));
        cause = next.source();
    }
    text
}
