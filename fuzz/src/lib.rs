//! The fuzz targets' bodies, shared by the libFuzzer binaries in `fuzz_targets/` and by the
//! core crate's `core/tests/fuzz_corpus.rs`, which replays the committed corpora through exactly these
//! functions on every `cargo test` (no libFuzzer, no nightly flags).
//!
//! Each function takes arbitrary bytes and must neither panic nor hang nor allocate without
//! bound; where an invariant is cheap to state it is asserted, so a violation is a crash too.

use std::sync::OnceLock;

use base64::Engine;
use helm_locker_core::{
    confirm, decide, decide_found, decode_data_release, decode_helm_payload, decode_release_json,
    find, parse_head, parse_manifest, parse_release_file, parse_review, read_head, render_response,
    split_documents, Config, Decision, Found, Index, Mode, Quantity, ReleaseSecret, SecretRef,
    Status,
};
use serde_json::Value;

/// The `shop` release as recorded after `helm upgrade` (revision 2 deployed: a Deployment,
/// ConfigMap, Service, ServiceAccount, ClusterRole and a custom resource are locked).
const RELEASE: &str =
    include_str!("../../tests/fixtures/cluster-capture/releases/02-after-upgrade.json");

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        Index::from_secrets(
            parse_release_file(RELEASE)
                .expect("the fixture parses")
                .into_iter()
                .map(|s| s.expect("the fixture decodes")),
        )
    })
}

fn configs() -> &'static [Config; 2] {
    static CONFIGS: OnceLock<[Config; 2]> = OnceLock::new();
    CONFIGS.get_or_init(|| {
        [
            Config::default(),
            Config {
                mode: Mode::Repair,
                ..Config::default()
            },
        ]
    })
}

/// (a) An AdmissionReview body, decided as `POST /validate` and `POST /mutate` decide it
/// against the recorded `shop` release, in deny mode and in repair mode: the fast path
/// (`parse_head`, `decide_head`: an object no release owns is answered from the review's head), then
/// `parse_review`, `decide`, `for_validation`/`for_mutation`, `confirm`, `render_response`.
/// What the fast path allows, the full path must not deny, warn about or repair.
pub fn review(data: &[u8]) {
    let schema = helm_locker_core::Schema::builtin();
    let head = parse_head(data);
    let mut fast = [false; 2];
    if let Some(head) = &head {
        let found = find(index(), &schema, &head.request);
        if let Some(decision) = found.answer(index(), &head.request) {
            fast = [true; 2];
            let body = render_response(&head.api_version, &head.request.uid, decision.verdict());
            let parsed: Value = serde_json::from_slice(&body).expect("the response is JSON");
            assert_eq!(parsed["response"]["allowed"], true);
        }
    }
    // With the user read after the head, rules 2 to 4 only ever allow; what they leave locked,
    // the whole review decides from what was found and checked (as the server carries it).
    let mut with_user = read_head(data);
    let mut carried: [Option<Found<'static>>; 2] = [None, None];
    if let Some(head) = with_user.as_mut() {
        let read = head.read_user();
        for ((config, fast), carried) in configs()
            .iter()
            .zip(&mut fast)
            .zip(&mut carried)
            .filter(|_| read)
        {
            let request = &head.review.request;
            let mut found = find(index(), &schema, request);
            match found.check_user(index(), config, request) {
                Some(decision) => {
                    assert!(decision.is_allowed() && matches!(decision, Decision::Allow(_)));
                    *fast = true;
                }
                None => *carried = Some(found),
            }
        }
    }
    // Reading on from the head (with or without the user) gives the review a read from the
    // start gives, or the same refusal.
    let parsed = parse_review(data);
    for head in [read_head(data), with_user].into_iter().flatten() {
        match (head.rest(), &parsed) {
            (Ok(rest), Ok(whole)) => assert_eq!(format!("{rest:?}"), format!("{whole:?}")),
            (Err(rest), Err(whole)) => assert_eq!(&rest, whole),
            (rest, whole) => panic!("read on from the head: {rest:?}, from the start: {whole:?}"),
        }
    }
    let Ok(review) = parsed else {
        return;
    };
    let request = &review.request;
    let _ = request.field_manager();
    for ((config, fast), carried) in configs().iter().zip(fast).zip(carried) {
        let decided = decide(index(), &schema, config, request);
        // What the server carries from the head and the user decides what a decision from the
        // start decides.
        if let Some(found) = carried {
            let carried = decide_found(index(), &schema, config, request, found);
            assert_eq!(format!("{carried:?}"), format!("{decided:?}"));
        }
        let decision = match decided {
            Ok(decision) => decision,
            Err(e) => {
                let _ = e.to_string();
                continue;
            }
        };
        assert!(
            !fast
                || !matches!(
                    decision,
                    Decision::Deny(_) | Decision::Warn(_) | Decision::Repair(..)
                ),
            "the fast path allowed what the full review locks: {}",
            decision.explain()
        );
        if let Decision::Repair(locked, patch) = &decision {
            repaired_write_is_allowed(config, request, patch);
            assert!(!locked.changes.is_empty());
        }
        if let Decision::Deny(locked) | Decision::Warn(locked) = &decision {
            assert!(locked.delete || !locked.changes.is_empty());
            assert!(!locked.message.is_empty());
        }
        for decision in [decision.clone().for_validation(), decision.for_mutation()] {
            let pending = confirm(decision.clone(), Some(Status::PendingUpgrade));
            assert!(pending.is_allowed());
            let decision = confirm(decision, Some(Status::Deployed));
            let _ = decision.explain();
            let body = render_response(&review.api_version, &request.uid, decision.verdict());
            let parsed: Value = serde_json::from_slice(&body).expect("the response is JSON");
            assert_eq!(parsed["response"]["allowed"], decision.is_allowed());
        }
    }
}

/// Repair mode's patch applies to the request's object, and the patched write has nothing left
/// to repair (the API server would reject a patch that does not apply, failing the user's write).
fn repaired_write_is_allowed(
    config: &Config,
    request: &helm_locker_core::Request<'_>,
    patch: &json_patch::Patch,
) {
    let mut object: Value = request
        .object()
        .map(|o| serde_json::from_str(o.get()).expect("decide parsed it"))
        .unwrap_or(Value::Null);
    json_patch::patch(&mut object, patch).expect("the repair patch applies to the object");
    let text = object.to_string();
    let mut repaired = request.clone();
    repaired.object =
        Some(helm_locker_core::RawObject::from_json(&text).expect("a Value serializes to JSON"));
    let again = decide(
        index(),
        &helm_locker_core::Schema::builtin(),
        config,
        &repaired,
    )
    .expect("the repaired object is an object");
    assert!(
        !matches!(again, Decision::Repair(..) | Decision::Deny(..)),
        "the repaired write is still changed: {}",
        again.explain()
    );
}

/// (b) Release decoding: the bytes as a Secret's `data.release` (both base64 layers), as the
/// decoded Helm layer, as the payload under Helm's base64 (gzip or JSON), as release JSON, and
/// as a release file (`--releases-dir`, `inspect`); every release decoded is indexed.
pub fn release(data: &[u8]) {
    let mut decoded = Vec::new();
    if let Ok(text) = std::str::from_utf8(data) {
        decoded.push(decode_data_release(text));
        if let Ok(entries) = parse_release_file(text) {
            let secrets: Vec<_> = entries.into_iter().filter_map(Result::ok).collect();
            let _ = Index::from_secrets(secrets).object_count();
        }
    }
    decoded.push(decode_helm_payload(data));
    let helm_layer = base64::engine::general_purpose::STANDARD.encode(data);
    decoded.push(decode_helm_payload(helm_layer.as_bytes()));
    decoded.push(decode_release_json(data));
    for result in decoded {
        match result {
            Ok(release) => {
                // Bounded before decoded: nothing decoded is longer than the limit, and notes
                // are cut to what is kept.
                assert!(release.manifest.len() as u64 <= helm_locker_core::max_release_bytes());
                assert!(release.notes.len() <= helm_locker_core::NOTES_KEPT_BYTES);
                let _ = parse_manifest(&release.manifest).objects.len();
                let secret = ReleaseSecret {
                    secret: SecretRef::secret(
                        release.namespace.clone(),
                        format!("sh.helm.release.v1.{}.v{}", release.name, release.revision),
                    ),
                    labels: Default::default(),
                    release,
                    author: helm_locker_core::Authorship::Unknown(
                        helm_locker_core::UnknownAuthor::NotRead,
                    ),
                    created: None,
                    counts_beside: false,
                };
                let _ = Index::from_secrets([secret]).object_count();
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
}

/// (c) A release manifest: Helm's document splitter, then the YAML parser and object extraction.
pub fn manifest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let documents: Vec<&str> = split_documents(text).collect();
    // The documents are pieces of the manifest, in order.
    let total: usize = documents.iter().map(|d| d.len()).sum();
    assert!(total <= text.len());
    let manifest = parse_manifest(text);
    for object in &manifest.objects {
        assert!(!object.kind.is_empty() && !object.name.is_empty());
        let _ = object.api_version();
    }
    for skipped in &manifest.skipped {
        assert!(skipped.document >= 1 && skipped.document <= documents.len());
    }
}

/// (e) One YAML document, differentially: what the line-oriented block parser accepts, it must
/// read exactly as the reference parser (serde-saphyr) does; `parse_document` never panics.
pub fn yaml(data: &[u8]) {
    let Ok(doc) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(tree) = helm_locker_core::parse_yaml_block(doc) {
        match helm_locker_core::parse_yaml_reference(doc) {
            Ok(reference) => assert_eq!(tree, reference, "block and the reference disagree"),
            Err(e) => panic!("block accepted what the reference rejects: {e:?}"),
        }
    }
    let _ = helm_locker_core::parse_yaml(doc);
}

/// (d) The quantity parser, directly and as the comparison uses it (a JSON string or number).
pub fn quantity(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = Quantity::parse(text);
    let as_json = Value::String(text.to_string());
    assert_eq!(Quantity::from_json(&as_json), parsed);
    // A value always equals itself where the schema says quantity.
    let chart = helm_locker_core::Tree::from(
        &serde_json::json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": as_json.clone()}}}]}}),
    );
    let live = chart.to_json();
    let schema = helm_locker_core::Schema::builtin();
    let root = schema.root_or_deduced("v1", "Pod");
    assert!(helm_locker_core::drifted_fields(&schema, root, &chart, &live, &[]).is_empty());
    if let Ok(number) = serde_json::from_str::<Value>(text) {
        if number.is_number() {
            assert!(
                Quantity::from_json(&number).is_some(),
                "a JSON number is a quantity: {text}"
            );
        }
    }
    if let Some(q) = parsed {
        // A sign or surrounding whitespace changes nothing else.
        let trimmed = text.trim();
        if !trimmed.starts_with(['+', '-']) {
            assert_eq!(Quantity::parse(&format!("+{trimmed}")), Some(q));
        }
    }
}
