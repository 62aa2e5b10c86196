//! `helm-locker`: see `helm-locker --help`. Everything lives in the library; [`app`] is the
//! composition root.
//!
//! [`app`]: helm_locker::app

fn main() -> std::process::ExitCode {
    helm_locker::app::main()
}
