//! `helm-locker`: see `helm-locker --help`. Everything lives in the library; [`app`] is the
//! composition root.
//!
//! [`app`]: helm_locker::app

/// mimalloc instead of glibc's malloc: a locked write allocates and frees a few hundred small
/// blocks, and under load glibc spent ~15% of the server's CPU in malloc/free and waited on its
/// arena locks (docs/performance.md, "Where the time goes").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    helm_locker::app::main()
}
