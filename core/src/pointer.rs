//! JSON pointers to owned values: built a segment at a time (escaped as RFC 6901 says), and
//! held against the ignored ones.

/// `/key`, `~` and `/` escaped (RFC 6901): one segment of a JSON pointer.
pub(crate) fn segment(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 1);
    push_segment(&mut out, key);
    out
}

/// Appends `/key` to a JSON pointer, `~` and `/` escaped (RFC 6901), without allocating.
/// The one escaping of JSON pointers in core: every pointer built from a key goes through it.
pub(crate) fn push_segment(path: &mut String, key: &str) {
    path.push('/');
    let mut rest = key;
    while let Some(at) = rest.find(['~', '/']) {
        path.push_str(&rest[..at]);
        path.push_str(if rest.as_bytes()[at] == b'~' {
            "~0"
        } else {
            "~1"
        });
        rest = &rest[at + 1..];
    }
    path.push_str(rest);
}

/// Appends `/i` (a list index) to a JSON pointer.
pub(super) fn push_index(path: &mut String, i: usize) {
    use std::fmt::Write;
    let _ = write!(path, "/{i}");
}

/// Whether `path` lies under one of the ignored pointers.
pub(crate) fn is_ignored(path: &str, ignore: &[&str]) -> bool {
    ignore.iter().any(|pattern| {
        let mut path_segments = path.split('/').skip(1);
        pattern
            .split('/')
            .skip(1)
            .all(|p| path_segments.next().is_some_and(|s| p == "*" || p == s))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointer_segments_are_escaped_as_rfc_6901_says() {
        for key in [
            "",
            "plain",
            "a/b",
            "~",
            "a~1b",
            "/~/",
            "meta.helm.sh/release-name",
        ] {
            let mut path = String::from("/metadata");
            push_segment(&mut path, key);
            let escaped = key.replace('~', "~0").replace('/', "~1");
            assert_eq!(path, format!("/metadata/{escaped}"));
            let value = json!({"metadata": {key: 1}});
            assert_eq!(value.pointer(&path), Some(&json!(1)), "{key:?}");
        }
        let mut path = String::from("/spec/containers");
        push_index(&mut path, 12);
        assert_eq!(path, "/spec/containers/12");
    }
}
