//! The content of a release revision, as far as who wrote it goes.
//!
//! The author stamp ([`crate::author`]) names who wrote a revision's **content**. Many writes
//! of a release Secret leave that content alone: `helm test` records each hook's last run, Helm
//! marks a revision `superseded` when the next one is deployed, Flux turns a stale `pending-*`
//! revision `failed`, plugins set a description. Such a write keeps the earlier author; a write
//! that changes the content is the writer's ([`crate::stamp`]).
//!
//! The content is the release JSON without `info` (status, description, notes, times) and
//! without each hook's `last_run`, except that a status change which brings a revision back to
//! life (a `superseded` or `uninstalled` revision turned `deployed` or `failed`, which the
//! locker would then follow) counts as a change of content: an old revision's author did not
//! choose to have it followed again.

use ring::digest;
use serde_json::Value;

use crate::release::{helm_payload_json, DecodeError, Status};

/// What of a revision's payload its author chose, reduced to what the comparison needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Content {
    /// SHA-256 of the content's canonical JSON (keys sorted, no `info`, no hooks' `last_run`).
    digest: [u8; 32],
    /// `info.status` (Unknown when absent).
    status: Status,
}

/// Writes into a running SHA-256, so the content is hashed without a second copy of it.
struct Hasher(digest::Context);

impl std::io::Write for Hasher {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The content of the revision whose Helm encoding (`data.release` after the Secret's own
/// base64) is `helm_base64`. Decoding goes through [`helm_payload_json`], so whatever bounds the
/// locker's reading of a release bounds this too. Errors: the payload is no release (not
/// Helm's encoding, too large, not a JSON object).
pub(crate) fn release_content(helm_base64: &[u8]) -> Result<Content, DecodeError> {
    let json = helm_payload_json(helm_base64)?;
    let mut release: Value = serde_json::from_slice(&json)
        .map_err(|e| DecodeError::NotJson(crate::release::describe_json_error(&e)))?;
    drop(json);
    let object = release
        .as_object_mut()
        .ok_or(DecodeError::NotJson("not an object".into()))?;
    let status = object
        .get("info")
        .and_then(|info| info.get("status"))
        .and_then(Value::as_str)
        .map_or(Status::Unknown, Status::parse);
    object.remove("info");
    if let Some(Value::Array(hooks)) = object.get_mut("hooks") {
        for hook in hooks.iter_mut().filter_map(Value::as_object_mut) {
            hook.remove("last_run");
        }
    }
    let mut hasher = Hasher(digest::Context::new(&digest::SHA256));
    // serde_json's maps are sorted (no `preserve_order`): the same content hashes the same,
    // whatever order its writer put the keys in.
    serde_json::to_writer(&mut hasher, &release)
        .map_err(|e| DecodeError::NotJson(crate::release::describe_json_error(&e)))?;
    let mut out = [0u8; 32];
    out.copy_from_slice(hasher.0.finish().as_ref());
    Ok(Content {
        digest: out,
        status,
    })
}

/// Whether a status change brings a revision back to be followed: it is now `deployed` or
/// `failed` (statuses the locker locks and reverts to), and it was neither of them nor on its
/// way to them (`pending-*`, which Helm or Flux finishes as `deployed` or `failed`).
fn revives(from: Status, to: Status) -> bool {
    to.locks()
        && !matches!(
            from,
            Status::Deployed
                | Status::Failed
                | Status::PendingInstall
                | Status::PendingUpgrade
                | Status::PendingRollback
        )
}

/// Whether rewriting a release Secret from `old` to `new` (each Helm's encoding, as in
/// [`release_content`]) leaves the revision's content as it was: both decode, their content is
/// the same, and the status change does not bring an old revision back. Anything that does not
/// decode counts as changed (a payload that is no release is no revision: the locker skips it,
/// so stamping it with its writer grants nothing).
pub(crate) fn content_kept(old: &[u8], new: &[u8]) -> bool {
    let Ok(old) = release_content(old) else {
        return false;
    };
    let Ok(new) = release_content(new) else {
        return false;
    };
    old.digest == new.digest && !revives(old.status, new.status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use serde_json::json;
    use std::io::Write as _;

    fn helm(release: &Value) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&serde_json::to_vec(release).unwrap()).unwrap();
        base64::engine::general_purpose::STANDARD
            .encode(gz.finish().unwrap())
            .into_bytes()
    }

    fn release(status: &str) -> Value {
        json!({
            "name": "ops", "namespace": "team", "version": 2,
            "info": {"status": status, "description": "Upgrade complete", "last_deployed": "2026-11-28T09:00:00Z"},
            "chart": {"metadata": {"name": "ops-agent", "version": "0.1.0"}},
            "config": {"setting": "x"},
            "manifest": "---\nkind: ConfigMap\n",
            "hooks": [{"name": "ops-test", "kind": "ConfigMap", "manifest": "kind: ConfigMap", "events": ["test"]}],
        })
    }

    #[test]
    fn status_and_hook_runs_are_not_content() {
        let before = release("deployed");
        // helm test: each hook's last run recorded.
        let mut tested = before.clone();
        tested["hooks"][0]["last_run"] =
            json!({"started_at": "2026-11-28T09:10:00Z", "phase": "Succeeded"});
        assert!(content_kept(&helm(&before), &helm(&tested)));
        // Helm superseding the revision; a description or notes set by a tool.
        let mut superseded = tested.clone();
        superseded["info"] =
            json!({"status": "superseded", "description": "Superseded", "notes": "n"});
        assert!(content_kept(&helm(&tested), &helm(&superseded)));
        // Flux unlocking a stale pending revision; Helm finishing one.
        for (from, to) in [
            ("pending-upgrade", "failed"),
            ("pending-install", "deployed"),
            ("pending-rollback", "deployed"),
            ("deployed", "failed"),
            ("failed", "deployed"),
            ("deployed", "uninstalling"),
            ("uninstalling", "uninstalled"),
        ] {
            assert!(
                content_kept(&helm(&release(from)), &helm(&release(to))),
                "{from} -> {to}"
            );
        }
        // Keys in another order are the same content.
        let reordered: Value = serde_json::from_str(
            r#"{"hooks":[{"events":["test"],"manifest":"kind: ConfigMap","kind":"ConfigMap","name":"ops-test"}],
                "manifest":"---\nkind: ConfigMap\n","config":{"setting":"x"},
                "chart":{"metadata":{"version":"0.1.0","name":"ops-agent"}},"version":2,"namespace":"team","name":"ops",
                "info":{"status":"deployed"}}"#,
        )
        .unwrap();
        assert!(content_kept(&helm(&before), &helm(&reordered)));
        // Plain JSON (no gzip) as Helm also reads it.
        let plain = base64::engine::general_purpose::STANDARD
            .encode(serde_json::to_vec(&before).unwrap())
            .into_bytes();
        assert!(content_kept(&plain, &helm(&before)));
    }

    #[test]
    fn anything_else_is_a_change_of_content() {
        let before = release("deployed");
        for change in [
            json!({"manifest": "---\nkind: ClusterRole\n"}),
            json!({"config": {"setting": "y"}}),
            json!({"version": 3}),
            json!({"name": "other"}),
            json!({"chart": {"metadata": {"name": "ops-agent", "version": "0.2.0"}}}),
            json!({"hooks": [{"name": "ops-test", "kind": "Pod", "manifest": "kind: Pod"}]}),
            json!({"apply_method": "ssa"}),
        ] {
            let mut after = before.clone();
            for (k, v) in change.as_object().unwrap() {
                after[k] = v.clone();
            }
            assert!(!content_kept(&helm(&before), &helm(&after)), "{change}");
        }
        // A hook's last run is not content; the rest of a hook is.
        let mut after = before.clone();
        after["hooks"][0]["manifest"] = json!("kind: Pod");
        after["hooks"][0]["last_run"] = json!({"phase": "Succeeded"});
        assert!(!content_kept(&helm(&before), &helm(&after)));
    }

    #[test]
    fn an_old_revision_brought_back_is_a_change_of_content() {
        for from in [
            "superseded",
            "uninstalled",
            "uninstalling",
            "unknown",
            "bogus",
        ] {
            for to in ["deployed", "failed"] {
                assert!(
                    !content_kept(&helm(&release(from)), &helm(&release(to))),
                    "{from} -> {to}"
                );
            }
        }
        let mut no_info = release("deployed");
        no_info.as_object_mut().unwrap().remove("info");
        assert!(!content_kept(&helm(&no_info), &helm(&release("deployed"))));
        assert!(content_kept(&helm(&release("deployed")), &helm(&no_info)));
    }

    #[test]
    fn what_does_not_decode_is_never_the_same_content() {
        let good = helm(&release("deployed"));
        let not_json = base64::engine::general_purpose::STANDARD
            .encode(b"{not json")
            .into_bytes();
        let not_object = helm(&json!([1, 2]));
        let truncated_gzip = {
            let mut g = base64::engine::general_purpose::STANDARD
                .decode(&good)
                .unwrap();
            g.truncate(g.len() / 2);
            base64::engine::general_purpose::STANDARD
                .encode(g)
                .into_bytes()
        };
        for bad in [
            b"".to_vec(),
            b"!!".to_vec(),
            not_json,
            not_object,
            truncated_gzip,
        ] {
            assert!(!content_kept(&bad, &good));
            assert!(!content_kept(&good, &bad));
            assert!(!content_kept(&bad, &bad));
        }
    }
}
