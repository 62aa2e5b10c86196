use std::path::PathBuf;
use std::process::ExitCode;

use base64::Engine;
use certs_gen::{expiry, generate, Validity};
use clap::Parser;

/// Generates the CA and serving certificate of helm-locker's webhook Service.
///
/// Writes ca.crt, tls.crt and tls.key to --out; the certificate is valid for
/// <service>.<namespace>.svc and <service>.<namespace>.svc.cluster.local plus any --dns/--ip.
/// Give ca.crt (base64) as the caBundle of the webhook configurations.
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
    let mut names = vec![
        args.service.clone(),
        format!("{}.{}", args.service, args.namespace),
        format!("{}.{}.svc", args.service, args.namespace),
        format!("{}.{}.svc.cluster.local", args.service, args.namespace),
    ];
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
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let write = |name: &str, text: &str| {
        std::fs::write(args.out.join(name), text)
            .map_err(|e| format!("{}: {e}", args.out.join(name).display()))
    };
    write("ca.crt", &pki.ca_pem)?;
    write("tls.crt", &pki.cert_pem)?;
    write("tls.key", &pki.key_pem)?;
    restrict(&args.out.join("tls.key"))?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    if let Some(secret) = &args.secret {
        write(
            "secret.yaml",
            &format!(
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {secret}\n  namespace: {}\ntype: kubernetes.io/tls\ndata:\n  ca.crt: {}\n  tls.crt: {}\n  tls.key: {}\n",
                args.namespace,
                b64(&pki.ca_pem),
                b64(&pki.cert_pem),
                b64(&pki.key_pem)
            ),
        )?;
    }
    write("ca-bundle.b64", &b64(&pki.ca_pem))?;
    println!(
        "wrote {}/{{ca.crt,tls.crt,tls.key,ca-bundle.b64{}}} for {}",
        args.out.display(),
        if args.secret.is_some() {
            ",secret.yaml"
        } else {
            ""
        },
        names.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

/// The private key is readable by its owner only.
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
