//! How a release watch reads what is stored when it starts, and again after it expires: one
//! paged list, or a watch that streams the stored objects first (`sendInitialEvents`, the
//! API server's WatchList feature, on by default from Kubernetes 1.34). A streamed start never
//! builds a whole list's response on the API server, and arrives object by object.

use kube::Client;

/// `--initial-list`: which way a release watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InitialList {
    /// Stream when the API server's version has WatchList on by default (1.34 and later), list
    /// otherwise; and list if the server refuses the streamed start before one completed.
    Auto,
    /// Always stream. A server without WatchList (before 1.27, the feature gate off, or on an
    /// etcd before 3.4.31 and 3.5.13) refuses the streamed start: the watch retries with
    /// backoff and the locker never gets ready.
    Stream,
    /// Always a paged list, then a watch: what every server answers.
    List,
}

/// The first minor version of Kubernetes 1 whose API server has WatchList on by default.
const STREAMS_FROM_MINOR: u32 = 34;

/// Whether a server of version `major`.`minor` (as `/version` reports them: `"1"`, `"36"`, or
/// `"36+"` on some distributions) streams an initial list by default.
fn streams_by_default(major: &str, minor: &str) -> bool {
    let digits = |text: &str| -> Option<u32> {
        let end = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        text[..end].parse().ok()
    };
    match (digits(major), digits(minor)) {
        (Some(1), Some(minor)) => minor >= STREAMS_FROM_MINOR,
        (Some(major), Some(_)) => major > 1,
        _ => false,
    }
}

/// Whether a release watch streams its initial list: `mode`, with `auto` decided by the API
/// server's version (a version that cannot be read lists, which every server answers).
pub(crate) async fn streams(client: &Client, mode: InitialList) -> bool {
    match mode {
        InitialList::Stream => true,
        InitialList::List => false,
        InitialList::Auto => match client.apiserver_version().await {
            Ok(info) => {
                let stream = streams_by_default(&info.major, &info.minor);
                tracing::info!(
                    version = %info.git_version,
                    initial_list = if stream { "stream" } else { "list" },
                    "release watches start by the API server's version"
                );
                stream
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not read the API server's version; release watches start with a list");
                false
            }
        },
    }
}

/// Whether `error`, from a watch that streams its start and has never completed one, is the
/// API server refusing the streamed start, after which `auto` lists instead: the request
/// refused (WatchList off: `sendInitialEvents` is invalid, 422, or a bad request, 400; 1.20
/// answers 422), or an error status inside the watch other than 410 Gone (which asks for a
/// start again). kube-apiserver 1.36.2 on etcd 3.4.23 answers the latter, 500: "the required
/// storage feature RequestWatchProgress is disabled" (etcd before 3.4.31 and 3.5.13).
pub(crate) fn refuses_streaming(error: &kube::runtime::watcher::Error) -> bool {
    use kube::runtime::watcher::Error;
    match error {
        Error::WatchStartFailed(kube::Error::Api(status)) => {
            status.code == 400 || status.code == 422
        }
        Error::WatchError(status) => status.code != 410,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_from_1_34_stream_by_default() {
        assert!(streams_by_default("1", "34"));
        assert!(streams_by_default("1", "36"));
        assert!(streams_by_default("1", "36+"));
        assert!(streams_by_default("2", "0"));
    }

    #[test]
    fn older_servers_and_unreadable_versions_list() {
        assert!(!streams_by_default("1", "33"));
        assert!(!streams_by_default("1", "20"));
        assert!(!streams_by_default("1", "27+"));
        assert!(!streams_by_default("", ""));
        assert!(!streams_by_default("1", "x"));
        assert!(!streams_by_default("0", "99"));
    }

    #[test]
    fn a_refused_start_is_a_400_or_422_when_the_watch_starts() {
        use kube::runtime::watcher::Error;
        let status = |code: u16| {
            kube::Error::Api(
                kube::core::Status::failure("sendInitialEvents is forbidden", "Invalid")
                    .with_code(code)
                    .boxed(),
            )
        };
        assert!(refuses_streaming(&Error::WatchStartFailed(status(422))));
        assert!(refuses_streaming(&Error::WatchStartFailed(status(400))));
        assert!(!refuses_streaming(&Error::WatchStartFailed(status(403))));
        assert!(!refuses_streaming(&Error::WatchFailed(status(422))));
    }

    #[test]
    fn an_error_inside_the_streamed_watch_refuses_it_but_gone_asks_for_a_start_again() {
        use kube::runtime::watcher::Error;
        let status = |code: u16| {
            kube::core::Status::failure(
                "a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled",
                "InternalError",
            )
            .with_code(code)
            .boxed()
        };
        assert!(refuses_streaming(&Error::WatchError(status(500))));
        assert!(!refuses_streaming(&Error::WatchError(status(410))));
    }
}
