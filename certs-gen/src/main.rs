use std::path::PathBuf;
use std::process::ExitCode;

use certs_gen::{expiry, generate, Validity};
use clap::Parser;

/// Generates the CA and serving certificate of helm-locker's webhook Service.
///
/// Writes ca.crt, tls.crt and tls.key to --out; the certificate is valid for
/// <service>.<namespace>.svc and <service>.<namespace>.svc.cluster.local plus any --dns/--ip.
/// Also writes ca-bundle.b64 (the caBundle) and webhook-configuration.yaml: the webhook
/// configurations of webhook-config/ for that Service, with the CA filled in
/// (kubectl apply -f certs/webhook-configuration.yaml).
#[derive(Parser)]
#[command(name = "certs-gen", version, about, long_about)]
struct Args {
    /// Name of the webhook's Service.
    #[arg(long, default_value = "helm-locker")]
    service: String,
    /// Namespace of the webhook's Service.
    #[arg(long, default_value = "helm-locker")]
    namespace: String,
    /// Extra DNS names.
    #[arg(long)]
    dns: Vec<String>,
    /// Extra IP addresses.
    #[arg(long)]
    ip: Vec<String>,
    /// Output folder.
    #[arg(long, default_value = "certs")]
    out: PathBuf,
    /// Lifetime of the CA, in days.
    #[arg(long, default_value_t = 3650)]
    ca_days: i64,
    /// Lifetime of the serving certificate, in days.
    #[arg(long, default_value_t = 365)]
    days: i64,
    /// Also write secret.yaml: a kubernetes.io/tls Secret of this name with the certificate.
    #[arg(long)]
    secret: Option<String>,
    /// Also put the mutating webhook configuration (repair mode) in webhook-configuration.yaml.
    #[arg(long)]
    repair: bool,
    /// Kubernetes version of the cluster (e.g. 1.30). From 1.28 on, every webhook in
    /// webhook-configuration.yaml carries matchConditions: the API server calls the locker only
    /// for writes that could concern an object a Helm release owns. Without it (or before
    /// 1.28) there are none, and every intercepted write is reviewed.
    #[arg(long, value_parser = certs_gen::parse_kube_version, value_name = "VERSION")]
    kube_version: Option<(u64, u64)>,
    /// Instead of generating, say when the PEM certificates in these files expire (exit 1 if
    /// one has expired or expires within --warn-days).
    #[arg(long, num_args = 1..)]
    check: Vec<PathBuf>,
    /// With --check: how many days ahead counts as expiring.
    #[arg(long, default_value_t = 30)]
    warn_days: i64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = if args.check.is_empty() {
        run_generate(&args)
    } else {
        run_check(&args)
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("certs-gen: {e}");
            ExitCode::from(2)
        }
    }
}

fn run_check(args: &Args) -> Result<ExitCode, String> {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let mut ok = true;
    for file in &args.check {
        let pem = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let (subject, not_after) = expiry(&pem).map_err(|e| format!("{}: {e}", file.display()))?;
        let days = (not_after - now).div_euclid(86400);
        let date = time::OffsetDateTime::from_unix_timestamp(not_after)
            .map(|t| t.date().to_string())
            .unwrap_or_default();
        let state = if days < 0 {
            ok = false;
            "EXPIRED"
        } else if days < args.warn_days {
            ok = false;
            "expires soon"
        } else {
            "ok"
        };
        println!(
            "{}: {subject}: expires {date} ({days} days): {state}",
            file.display()
        );
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn run_generate(args: &Args) -> Result<ExitCode, String> {
    let mut names = certs_gen::service_names(&args.service, &args.namespace);
    names.extend(args.dns.iter().cloned());
    for ip in &args.ip {
        ip.parse::<std::net::IpAddr>()
            .map_err(|_| format!("--ip {ip:?} is not an IP address"))?;
        names.push(ip.clone());
    }
    let pki = generate(
        &format!("{}.{}.svc", args.service, args.namespace),
        &names,
        &Validity {
            ca_days: args.ca_days,
            leaf_days: args.days,
        },
    )
    .map_err(|e| e.to_string())?;
    let files = certs_gen::outputs_for(
        &pki,
        &args.service,
        &args.namespace,
        args.secret.as_deref(),
        args.repair,
        args.kube_version,
    )?;
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    for (name, text) in &files {
        let path = args.out.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    restrict(&args.out.join("tls.key"))?;
    if args.secret.is_some() {
        restrict(&args.out.join("secret.yaml"))?;
    }
    let written: Vec<&str> = files.iter().map(|(name, _)| *name).collect();
    println!(
        "wrote {}/{{{}}} for {}",
        args.out.display(),
        written.join(","),
        names.join(", ")
    );
    let (major, minor) = certs_gen::MATCH_CONDITIONS_SINCE;
    println!(
        "{}",
        match args.kube_version {
            Some(v) if v >= certs_gen::MATCH_CONDITIONS_SINCE => format!(
                "webhook-configuration.yaml: matchConditions for Kubernetes {}.{}: only writes that could concern a Helm release's objects are sent",
                v.0, v.1
            ),
            Some(v) => format!(
                "webhook-configuration.yaml: no matchConditions (Kubernetes {}.{} is before {major}.{minor}): every intercepted write is sent",
                v.0, v.1
            ),
            None => format!(
                "webhook-configuration.yaml: no matchConditions; on Kubernetes {major}.{minor} or newer add --kube-version to send only writes that could concern a Helm release's objects"
            ),
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// Files with the private key are readable by their owner only.
fn restrict(path: &std::path::Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let _ = path;
    Ok(())
}
