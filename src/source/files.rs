//! Release Secrets from files and folders (`inspect`, `review`, `serve --releases-dir`).

use std::path::{Path, PathBuf};

use crate::core::{each_release_secret, ReleaseSecret, SecretRef};

/// A file or Secret that could not be used; the others still are.
#[derive(Debug)]
pub(crate) struct LoadProblem {
    pub file: PathBuf,
    pub secret: Option<SecretRef>,
    pub error: String,
}

impl std::fmt::Display for LoadProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.secret {
            Some(s) => write!(f, "{}: Secret {s}: {}", self.file.display(), self.error),
            None => write!(f, "{}: {}", self.file.display(), self.error),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub secrets: Vec<ReleaseSecret>,
    pub problems: Vec<LoadProblem>,
}

/// Files with these extensions are read from folders.
pub(crate) fn is_release_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("json" | "yaml" | "yml")
    )
}

/// The release files under `paths` (files as given, folders recursively), sorted.
pub(crate) fn release_files(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut stack = vec![path.clone()];
            while let Some(dir) = stack.pop() {
                for entry in std::fs::read_dir(&dir)? {
                    let entry = entry?.path();
                    let hidden = entry
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with('.'));
                    if entry.is_dir() && !hidden {
                        stack.push(entry);
                    } else if is_release_file(&entry) && !hidden {
                        files.push(entry);
                    }
                }
            }
        } else {
            files.push(path.clone());
        }
    }
    files.sort();
    Ok(files)
}

/// Reads every release Secret under `paths` (`-` reads standard input).
pub(crate) fn load(paths: &[PathBuf]) -> Loaded {
    let mut secrets = Vec::new();
    let problems = load_each(paths, |secret| secrets.push(secret));
    Loaded { secrets, problems }
}

/// [`load`], handing each release Secret to `each` as soon as it is decoded; returns the
/// files and Secrets that could not be used.
pub(crate) fn load_each(
    paths: &[PathBuf],
    mut each: impl FnMut(ReleaseSecret),
) -> Vec<LoadProblem> {
    let mut problems = Vec::new();
    let files = match release_files(paths) {
        Ok(files) => files,
        Err(e) => {
            problems.push(LoadProblem {
                file: paths.first().cloned().unwrap_or_default(),
                secret: None,
                error: e.to_string(),
            });
            return problems;
        }
    };
    for file in files {
        let text = if file.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())
        } else {
            std::fs::read_to_string(&file)
        };
        let text = match text {
            Ok(text) => text,
            Err(e) => {
                problems.push(LoadProblem {
                    file,
                    secret: None,
                    error: e.to_string(),
                });
                continue;
            }
        };
        let read = each_release_secret(&text, |entry| match entry {
            Ok(secret) => each(secret),
            Err((secret, error)) => problems.push(LoadProblem {
                file: file.clone(),
                secret,
                error: error.to_string(),
            }),
        });
        if let Err(e) = read {
            problems.push(LoadProblem {
                file,
                secret: None,
                error: e.to_string(),
            });
        }
    }
    problems
}
