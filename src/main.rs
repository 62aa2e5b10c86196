use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use helm_locker::admission::{parse_review, render_response};
use helm_locker::config::{self, Config, Mode};
use helm_locker::decide::decide;
use helm_locker::index::Index;
use helm_locker::inspect;
use helm_locker::source::files;

/// Makes Helm the only way to change what Helm installed.
///
/// helm-locker is a Kubernetes admission webhook: it indexes the objects that deployed Helm
/// releases own (from their release Secrets) and denies writes to them from anyone but Helm.
#[derive(Parser)]
#[command(name = "helm-locker", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print each release (name, namespace, revision, status) and the objects it locks.
    ///
    /// Reads release Secrets as `kubectl get secret -l owner=helm -o json|yaml` prints them
    /// (one Secret, a List, several YAML documents) or a bare `data.release` value.
    /// Example: kubectl get secret -A -l owner=helm -o json | helm-locker inspect -
    Inspect {
        /// Files or folders of release Secrets; `-` reads standard input.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// Decide one AdmissionReview offline, exactly as the server would, and print the response.
    ///
    /// Exit status is 0 for allow and deny alike; non-zero only when the input is unusable.
    Review {
        /// Files or folders of release Secrets (.json/.yaml); the last path given here is
        /// taken as REVIEW when REVIEW is not given separately.
        #[arg(long = "releases", required = true, num_args = 1..)]
        releases: Vec<PathBuf>,
        /// The AdmissionReview JSON (`-` reads standard input).
        review: Option<PathBuf>,
        /// Configuration file (YAML): mode, exemptions, ignore rules, which releases are locked.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override the configured mode.
        #[arg(long, value_enum)]
        mode: Option<Mode>,
        /// Explain the decision in one sentence on standard error.
        #[arg(long)]
        explain: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect { paths, output } => run_inspect(&paths, output),
        Command::Review {
            mut releases,
            review,
            config,
            mode,
            explain,
        } => {
            // `review --releases A B REVIEW.json`: the greedy list holds the review last.
            match review.or_else(|| {
                if releases.len() > 1 {
                    releases.pop()
                } else {
                    None
                }
            }) {
                Some(review) => run_review(&releases, &review, config.as_deref(), mode, explain),
                None => Err("give the AdmissionReview file after the release paths".into()),
            }
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("helm-locker: {message}");
            ExitCode::from(2)
        }
    }
}

fn load_index(paths: &[PathBuf]) -> Result<Index, String> {
    let loaded = files::load(paths);
    for problem in &loaded.problems {
        eprintln!("helm-locker: skipped {problem}");
    }
    if loaded.secrets.is_empty() && !loaded.problems.is_empty() {
        return Err("no release Secret could be read".into());
    }
    Ok(Index::from_secrets(loaded.secrets))
}

fn run_inspect(paths: &[PathBuf], output: Output) -> Result<(), String> {
    let index = load_index(paths)?;
    match output {
        Output::Text => print!("{}", inspect::render_text(&index)),
        Output::Json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&inspect::inspect(&index))
                    .map_err(|e| e.to_string())?
            )
        }
    }
    Ok(())
}

fn load_config(path: Option<&std::path::Path>) -> Result<Config, String> {
    let Some(path) = path else {
        return Ok(Config::default());
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let config: Config =
        serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    config::validate(&config).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(config)
}

fn run_review(
    releases: &[PathBuf],
    review: &PathBuf,
    config: Option<&std::path::Path>,
    mode: Option<Mode>,
    explain: bool,
) -> Result<(), String> {
    let mut config = load_config(config)?;
    if let Some(mode) = mode {
        config.mode = mode;
    }
    let index = load_index(releases)?;
    let body = if review.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(review)
    }
    .map_err(|e| format!("{}: {e}", review.display()))?;
    let parsed = parse_review(body.as_bytes()).map_err(|e| format!("{}: {e}", review.display()))?;
    let decision = decide(&index, &config, &parsed.request)
        .map_err(|e| format!("{}: {e}", review.display()))?;
    let response = render_response(&parsed.api_version, &parsed.request.uid, &decision);
    println!("{}", String::from_utf8_lossy(&response));
    if explain {
        eprintln!("{}", decision.explain());
    }
    Ok(())
}
