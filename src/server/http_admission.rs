//! The TLS port's routes: `POST /validate`, `POST /mutate`, and `POST /stamp` (the author
//! stamp on release Secret writes, [`crate::core::stamp_review`]).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, StatusCode};

use crate::confirm::StoredObject;
use crate::core::Endpoint;
use crate::core::{
    confirm, decide_found, find, parse_review, prove, read_head, render_response, Decision,
    OwnerProof, Review, ReviewHead,
};
use crate::metrics::{ConfirmResult, DenialLabels};
use crate::server::state::AppState;
use tracing::Instrument as _;

/// Every answer of the TLS port: a small JSON document, whole.
type Response = hyper::Response<Full<Bytes>>;

/// The TLS port's service: the three routes matched by hand. axum's `Router` clones a boxed
/// service and maps its future on every request; this costs one boxed future.
#[derive(Clone)]
pub(crate) struct Webhook {
    state: Arc<AppState>,
}

impl Webhook {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Webhook { state }
    }
}

type Answer = std::pin::Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Webhook {
    type Response = Response;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, request: Request<Incoming>) -> Answer {
        let state = self.state.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let route = match parts.uri.path() {
                "/validate" => Some(Route::Admit(Endpoint::Validate)),
                "/mutate" => Some(Route::Admit(Endpoint::Mutate)),
                "/stamp" => Some(Route::Stamp),
                _ => None,
            };
            Ok(match (route, parts.method == Method::POST) {
                (Some(Route::Admit(endpoint)), true) => {
                    // Every log line of one review carries its uid, operation and object, and
                    // once decided, the decision and what decided it (`record_decision`).
                    let span = tracing::info_span!(
                        "admission",
                        uid = tracing::field::Empty,
                        operation = tracing::field::Empty,
                        object = tracing::field::Empty,
                        decision = tracing::field::Empty,
                        reason = tracing::field::Empty,
                        by = tracing::field::Empty,
                    );
                    admit(&state, endpoint, &parts.headers, body)
                        .instrument(span)
                        .await
                }
                (Some(Route::Stamp), true) => stamp(&state, &parts.headers, body).await,
                (Some(_), false) => {
                    let mut response = error(
                        StatusCode::METHOD_NOT_ALLOWED,
                        format!("use POST {}", parts.uri.path()),
                    );
                    response
                        .headers_mut()
                        .insert(header::ALLOW, HeaderValue::from_static("POST"));
                    response
                }
                (None, _) => error(
                    StatusCode::NOT_FOUND,
                    "unknown path: use POST /validate, POST /mutate or POST /stamp".into(),
                ),
            })
        })
    }
}

enum Route {
    Admit(Endpoint),
    Stamp,
}

/// The author webhook: every release Secret write is stamped with the author of its content
/// (the identity the API server authenticated for it, or the stored revision's verified author
/// when the write leaves the content alone), and the locker's time. 503 until the key is loaded (the webhook's failurePolicy is Ignore:
/// a Secret written meanwhile has no known author, and the reverter writes none of its content).
async fn stamp(state: &AppState, headers: &HeaderMap, body: Incoming) -> Response {
    let body = match read_body(state, headers, body).await {
        Ok(body) => body,
        Err(response) => {
            state.metrics.bad_requests.inc();
            return response;
        }
    };
    let Some(stamping) = state.stamping.borrow().clone() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the author key is not loaded yet".into(),
        );
    };
    match crate::core::stamp_review(&stamping.key, &body, crate::lock_exception::now()) {
        Ok(response) => {
            state.metrics.author_stamps.inc();
            json(StatusCode::OK, response)
        }
        Err(e) => {
            state.metrics.bad_requests.inc();
            tracing::warn!(error = %e, "malformed admission review on /stamp");
            error(StatusCode::BAD_REQUEST, e.to_string())
        }
    }
}

fn error(status: StatusCode, message: String) -> Response {
    json(status, serde_json::json!({ "error": message }).to_string())
}

fn json(status: StatusCode, body: impl Into<Bytes>) -> Response {
    let mut response = hyper::Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

async fn read_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Incoming,
) -> Result<Bytes, Response> {
    let limit = state.settings.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let too_large = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body is larger than the limit of {limit} bytes"),
        )
    };
    if declared.is_some_and(|len| len > limit) {
        return Err(too_large());
    }
    // A review usually arrives with its headers, whole: the first poll collects it, and no
    // timer is armed. Only a body still on its way is waited for, up to `read_timeout`.
    let mut collect = std::pin::pin!(http_body_util::Limited::new(body, limit).collect());
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(collect.as_mut().poll(cx))).await;
    let read = match first {
        std::task::Poll::Ready(read) => Ok(read),
        std::task::Poll::Pending => {
            tokio::time::timeout(state.settings.read_timeout, collect).await
        }
    };
    match read {
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "request body not received within {:?}",
                state.settings.read_timeout
            ),
        )),
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(too_large())
        }
        Ok(Err(e)) => Err(error(
            StatusCode::BAD_REQUEST,
            format!("cannot read request body: {e}"),
        )),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

async fn admit(
    state: &AppState,
    endpoint: Endpoint,
    headers: &HeaderMap,
    body: Incoming,
) -> Response {
    let body = match read_body(state, headers, body).await {
        Ok(body) => body,
        Err(response) => {
            state.metrics.bad_requests.inc();
            return response;
        }
    };
    let started = Instant::now();
    // Which object the review writes is found once, from its head, and carried on: the fast
    // path answers an object no release owns from the head; then rules 2 to 4 (Helm at work,
    // a release not locked, an exempt user), known from the head and the user, which the API
    // server writes before the objects; then the whole review. One index for all three.
    let index = state.index.current();
    let schema = state.schema.load();
    // The policy in force for this request (a switch flipped meanwhile applies to the next).
    let config = state.config.load();
    let span = tracing::Span::current();
    let mut head = read_head(&body);
    let mut found = None;
    if let Some(head) = &mut head {
        let request = &head.review.request;
        let mut at = find(&index, &schema, request);
        // Answered from the head (nine reviews in ten: an object no release owns): nothing is
        // logged between here and the answer, so the span is not named, which would format
        // its fields for no line.
        if let Some(decision) = at.answer(&index, request) {
            return respond(state, endpoint, &head.review, &decision, started);
        }
        name_span(&span, request);
        if head.read_user() {
            let request = &head.review.request;
            if let Some(decision) = at.check_user(&index, &config, request) {
                record_decision(&span, &decision);
                tracing::debug!("{}", decision.explain());
                return respond(state, endpoint, &head.review, &decision, started);
            }
        }
        found = Some(at);
    }
    // Otherwise the whole review, read on from where the head stopped.
    let review = match head.map_or_else(|| parse_review(&body), ReviewHead::rest) {
        Ok(review) => review,
        Err(e) => {
            state.metrics.bad_requests.inc();
            tracing::warn!(error = %e, "malformed admission review");
            return error(StatusCode::BAD_REQUEST, e.to_string());
        }
    };
    let request = &review.request;
    if found.is_none() {
        // The head did not read: the span is named from the whole review.
        name_span(&span, request);
    }
    let mut found = found.unwrap_or_else(|| find(&index, &schema, request));
    if found.owner_to_read() {
        found = read_stored_owner(state, request, found).await;
    }
    let decision = match decide_found(&index, &schema, &config, request, found) {
        Ok(decision) => decision,
        Err(e) => {
            state.metrics.bad_requests.inc();
            tracing::warn!(error = %e, "malformed admission request");
            return error(StatusCode::BAD_REQUEST, e.to_string());
        }
    };
    let decision = match endpoint {
        Endpoint::Validate => decision.for_validation(),
        Endpoint::Mutate => decision.for_mutation(),
    };
    let decision = excuse_if_open(state, &index, request, decision);
    let decision = allow_if_ruled(state, &index, &config, request, endpoint, decision);
    let taking = crate::core::hand_over_question(&index, request, &decision);
    // Not held across the waits below (a guard is for short reads).
    drop((index, schema));
    let decision = confirm_if_needed(state, decision).await;
    let decision = prove_if_needed(state, request, decision).await;
    let decision = hand_over_if_allowed(state, taking, decision).await;
    let decision = with_values_advice(state, decision).await;
    record_decision(&span, &decision);
    if let Decision::Deny(locked) | Decision::Warn(locked) | Decision::Repair(locked, _) = &decision
    {
        let paths: Vec<&str> = locked.changes.iter().map(|c| c.path.as_str()).collect();
        tracing::info!(
            user = %request.user_info.username,
            object = %locked.object,
            release = %locked.release,
            paths = ?paths,
            field_manager = request.field_manager().unwrap_or_default(),
            dry_run = request.dry_run.unwrap_or(false),
            decision = decision.label(),
            "locked object"
        );
        record_attempt(state, request, &decision, locked);
        learn(state, request, &decision, locked);
    } else {
        if matches!(
            decision,
            Decision::Allow(crate::core::Allowed::Unproven { .. })
        ) {
            state.metrics.unproven_claims_allowed.inc();
        }
        tracing::debug!("{}", decision.explain());
    }
    respond(state, endpoint, &review, &decision, started)
}

/// Names `span` (an admission) after the review's request: its uid, operation and object
/// (`Kind namespace/name`, or `Kind name` when the request names no namespace). Nothing when the
/// span is off (`--log` above info).
fn name_span(span: &tracing::Span, request: &crate::core::Request<'_>) {
    if span.is_disabled() {
        return;
    }
    span.record("uid", request.uid.as_ref() as &str);
    span.record("operation", request.operation.as_str());
    let name = request.name.as_deref().unwrap_or_default();
    let object = match request.namespace() {
        Some(ns) => format!("{} {ns}/{name}", request.kind.kind),
        None => format!("{} {name}", request.kind.kind),
    };
    span.record("object", object.as_str());
}

/// Records on `span` (an admission) what was decided and what decided it: `decision`
/// (allow, deny, warn, repair), `reason` (the rule that allowed, or `locked`) and `by` (whom or
/// what it names: the exempt user, the LockException, the writer rules, the release), for every
/// line logged after.
fn record_decision(span: &tracing::Span, decision: &Decision) {
    if span.is_disabled() {
        return;
    }
    let (reason, by) = decision.decided_by();
    span.record("decision", decision.label());
    span.record("reason", reason);
    if let Some(by) = by {
        span.record("by", by.as_str());
    }
}

/// Writer rules: a denial, warning or repair whose changed paths rules give this writer is
/// allowed with a warning naming them (or narrowed to the paths they do not give). Each such
/// write is counted per rule, logged, and recorded as a `WriterRuleUsed` Event (never for a dry
/// run). The mutating endpoint leaves the warning, the count and the Event to the validating
/// one, which sees the same write.
fn allow_if_ruled(
    state: &AppState,
    index: &crate::core::Index,
    config: &crate::core::Config,
    request: &crate::core::Request<'_>,
    endpoint: Endpoint,
    decision: Decision,
) -> Decision {
    let (Decision::Deny(locked) | Decision::Warn(locked) | Decision::Repair(locked, _)) = &decision
    else {
        return decision;
    };
    let own = index.registration(&locked.release).map(|r| &r.writers[..]);
    let rules: Vec<&crate::core::WriterRule> = config
        .writers
        .iter()
        .chain(own.unwrap_or_default())
        .collect();
    if rules.is_empty() {
        return decision;
    }
    let labels = index
        .release(&locked.release)
        .and_then(|state| state.newest())
        .map(|newest| newest.labels.clone())
        .unwrap_or_default();
    let user = &request.user_info;
    let writer = crate::core::RuleWriter {
        username: &user.username,
        groups: user.groups.iter().map(|g| g.as_ref()).collect(),
        field_manager: request.field_manager(),
    };
    let target = locked.target.clone();
    let object = locked.object.clone();
    let ruled = crate::core::allow_by_rules(
        decision,
        &rules,
        &writer,
        &labels,
        crate::lock_exception::now(),
    );
    let Decision::Allow(crate::core::Allowed::ByRule {
        release,
        rules: ids,
        user,
        paths,
        ..
    }) = &ruled
    else {
        return ruled;
    };
    if matches!(endpoint, Endpoint::Mutate) {
        return Decision::Allow(crate::core::Allowed::LeftToValidation);
    }
    let dry_run = request.dry_run.unwrap_or(false);
    tracing::info!(user = %user, rules = ?ids, release = %release, object = %object, paths = ?paths, dry_run, "allowed by a writer rule");
    if dry_run {
        return ruled;
    }
    for id in ids {
        state
            .metrics
            .writer_rule_uses
            .get_or_create(&crate::metrics::RuleLabels { rule: id.clone() })
            .inc();
        // `kubectl locker learn` proposes removing a rule no write uses.
        if let Some(recorder) = &state.learning {
            recorder.use_rule(&release.namespace, id);
        }
    }
    if let Some(sink) = &state.attempts {
        sink.record(crate::attempts::Attempt {
            regarding: crate::attempts::reference(
                target.api_version,
                target.kind,
                target.namespace,
                target.name,
            ),
            reason: crate::events::Reason::WriterRuleUsed,
            user: user.clone(),
            message: crate::core::notes::writer_rule_used(ids, user, paths, &object, release),
        });
    }
    ruled
}

/// Break glass: a denial, warning or repair that an open LockException covers is allowed; each
/// such write is counted and recorded as an Event naming the exception, the user and the
/// reason (never for a dry run).
fn excuse_if_open(
    state: &AppState,
    index: &crate::core::Index,
    request: &crate::core::Request<'_>,
    decision: Decision,
) -> Decision {
    let (Decision::Deny(locked) | Decision::Warn(locked) | Decision::Repair(locked, _)) = &decision
    else {
        return decision;
    };
    let exceptions = index.exceptions(&locked.release);
    if exceptions.is_empty() {
        return decision;
    }
    let user = &request.user_info;
    let target = locked.target.clone();
    let paths: Vec<String> = locked.changes.iter().map(|c| c.path.clone()).collect();
    let what = crate::core::notes::attempted_write(locked.delete, &paths, &locked.object);
    let excused = crate::core::excuse(
        decision,
        &exceptions,
        &user.username,
        &user.groups,
        crate::lock_exception::now(),
    );
    if let Decision::Allow(crate::core::Allowed::Excepted {
        release,
        exception,
        user,
        reason,
        until,
    }) = &excused
    {
        state.metrics.exceptions_used.inc();
        tracing::info!(user = %user, exception = %exception, release = %release, reason = %reason, until, "{what}: allowed by a LockException");
        if let (Some(sink), false) = (&state.attempts, request.dry_run.unwrap_or(false)) {
            sink.record(crate::attempts::Attempt {
                regarding: crate::attempts::reference(
                    target.api_version,
                    target.kind,
                    target.namespace,
                    target.name,
                ),
                reason: crate::events::Reason::LockExceptionUsed,
                user: user.clone(),
                message: crate::core::notes::exception_used(
                    exception, user, &what, release, reason,
                ),
            });
        }
    }
    excused
}

/// Counts the denial by release, and offers it to the Events publisher (never for a dry run:
/// `kubectl diff` tries nothing).
fn record_attempt(
    state: &AppState,
    request: &crate::core::Request<'_>,
    decision: &Decision,
    locked: &crate::core::Locked,
) {
    let label = decision.label();
    state
        .metrics
        .denials
        .get_or_create(&DenialLabels {
            release: locked.release.to_string(),
            decision: label,
        })
        .inc();
    let Some(sink) = &state.attempts else {
        return;
    };
    if request.dry_run.unwrap_or(false) {
        return;
    }
    use crate::events::Reason;
    let reason = match decision {
        Decision::Deny(l) if l.delete => Reason::LockedObjectDeleteDenied,
        Decision::Deny(_) => Reason::LockedFieldChangeDenied,
        Decision::Warn(_) => Reason::LockedFieldChangeWarned,
        Decision::Repair(..) => Reason::LockedFieldChangeRepaired,
        Decision::Allow(_) => return,
    };
    let target = &locked.target;
    sink.record(crate::attempts::Attempt {
        regarding: crate::attempts::reference(
            target.api_version.clone(),
            target.kind.clone(),
            target.namespace.clone(),
            target.name.clone(),
        ),
        reason,
        user: request.user_info.username.to_string(),
        message: locked.message.clone(),
    });
}

/// A warned or denied write that is not a dry run is learned from (`--learn`): the recorder
/// keeps its key and counts, never a value.
fn learn(
    state: &AppState,
    request: &crate::core::Request<'_>,
    decision: &Decision,
    locked: &crate::core::Locked,
) {
    let Some(recorder) = &state.learning else {
        return;
    };
    if !matches!(decision, Decision::Warn(_) | Decision::Deny(_)) || request.dry_run == Some(true) {
        return;
    }
    // The locked paths as the writer rules name them: a rule proposed from them covers the write.
    let paths: Vec<&str> = locked.keyed_paths.iter().map(String::as_str).collect();
    let target = &locked.target;
    let group = target
        .api_version
        .split_once('/')
        .map_or("", |(group, _)| group);
    recorder.observe(&crate::core::LearningObservation {
        writer: &request.user_info.username,
        field_manager: request.field_manager(),
        operation: request.operation.as_str(),
        subresource: request.sub_resource(),
        release_namespace: &locked.release.namespace,
        release_name: &locked.release.name,
        group,
        kind: &target.kind,
        object: &target.name,
        paths: &paths,
        delete: locked.delete,
        from_pod: request.user_info.from_pod,
        decision: decision.label(),
    });
}

fn respond(
    state: &AppState,
    endpoint: Endpoint,
    review: &Review<'_>,
    decision: &Decision,
    started: Instant,
) -> Response {
    let response = render_response(&review.api_version, &review.request.uid, decision.verdict());
    state.metrics.admission_seconds.observe(started.elapsed());
    state
        .metrics
        .admitted(endpoint, review.request.operation, decision.kind());
    json(StatusCode::OK, response)
}

/// How long a denial may wait for the chart's templates (read once per revision) to say which
/// values key sets each field; past it the message goes without, and the read goes on in the
/// background for the next denial. Short: with the fresh read before it (`--confirm-timeout`),
/// the whole answer must stay well inside the webhook's `timeoutSeconds`, or a failurePolicy
/// Ignore would let the write through.
const ADVICE_TIMEOUT: Duration = Duration::from_millis(250);

/// Appends to a denial, warning or repair message where the chart sets each field (the values
/// key, else the template and line) and the `helm upgrade --set` that changes it. Only on this
/// path: an allowed write never reads a chart.
async fn with_values_advice(state: &AppState, mut decision: Decision) -> Decision {
    let (Some(cache), Some(locked)) = (&state.chart_files, decision.traceable()) else {
        return decision;
    };
    if cache.add_kept_advice(locked) {
        return decision;
    }
    let (cache, mut with_advice) = (cache.clone(), locked.clone());
    let advise = tokio::spawn(async move {
        cache.add_advice(&mut with_advice).await;
        with_advice
    });
    if let Ok(Ok(with_advice)) = tokio::time::timeout(ADVICE_TIMEOUT, advise).await {
        *locked = with_advice;
    }
    decision
}

/// The owner of an object two releases of other namespaces claim, for a write that holds no
/// metadata of it (a `scale`): the release the stored object's annotations name, read before
/// the decision ([`crate::core::Found::owner_to_read`]). When the read fails, no claim opens the
/// object on its own word (the decision takes the first that locks it).
async fn read_stored_owner<'i>(
    state: &AppState,
    request: &crate::core::Request<'_>,
    found: crate::core::Found<'i>,
) -> crate::core::Found<'i> {
    let Some(confirmer) = &state.confirmer else {
        return found;
    };
    let stored = StoredObject {
        group: request.resource.group.to_string(),
        version: request.resource.version.to_string(),
        resource: request.resource.resource.to_string(),
        namespace: request.namespace().map(str::to_string),
        name: request.name().unwrap_or_default().to_string(),
    };
    let timeout: Duration = state.settings.confirm_timeout;
    match tokio::time::timeout(timeout, confirmer.owner_of(&stored)).await {
        Ok(Ok(owner)) => found.with_stored_owner(owner),
        Ok(Err(e)) => {
            tracing::warn!(object = ?stored, error = %crate::error_chain::with_causes(&e), "could not read the owner of an object several releases claim; no claim opens it");
            found
        }
        Err(_) => {
            tracing::warn!(object = ?stored, ?timeout, "reading the owner of an object several releases claim timed out; no claim opens it");
            found
        }
    }
}

/// A decision against an object whose annotations the request does not hold (a `Scale`, an
/// `Eviction`) stands only once the stored object is read and names the release. When the read
/// fails the decision stands: the request already named an object of a deployed release.
async fn prove_if_needed(
    state: &AppState,
    request: &crate::core::Request<'_>,
    decision: Decision,
) -> Decision {
    let (Decision::Deny(l) | Decision::Warn(l) | Decision::Repair(l, _)) = &decision else {
        return decision;
    };
    if l.proof != OwnerProof::ToRead {
        return decision;
    }
    let Some(confirmer) = &state.confirmer else {
        return decision;
    };
    let stored = StoredObject {
        group: request.resource.group.to_string(),
        version: request.resource.version.to_string(),
        resource: request.resource.resource.to_string(),
        namespace: request.namespace().map(str::to_string),
        name: l.target.name.clone(),
    };
    let timeout: Duration = state.settings.confirm_timeout;
    match tokio::time::timeout(timeout, confirmer.owner_of(&stored)).await {
        Ok(Ok(owner)) => {
            let proved = prove(decision, owner.as_ref());
            if matches!(proved, Decision::Allow(_)) {
                tracing::info!(object = ?stored, "the stored object does not carry the release's annotations; allowed");
            }
            proved
        }
        Ok(Err(e)) => {
            tracing::warn!(object = ?stored, error = %crate::error_chain::with_causes(&e), "could not read the object's annotations; keeping the decision");
            decision
        }
        Err(_) => {
            tracing::warn!(object = ?stored, ?timeout, "reading the object's annotations timed out; keeping the decision");
            decision
        }
    }
}

/// Rule 7: before a deny or a repair, read the release's newest revision from the API server.
/// A denial that is a release at work taking the object over from the release holding it
/// ([`crate::core::hand_over`]): allowed when the taking release's author may delete the
/// holding release's Secrets (the authorizer asked as them; an answer that does not come keeps
/// the denial).
async fn hand_over_if_allowed(
    state: &AppState,
    taking: Option<crate::core::HandOver>,
    decision: Decision,
) -> Decision {
    let (Some(taking), Some(confirmer)) = (taking, &state.confirmer) else {
        return decision;
    };
    if !matches!(decision, Decision::Deny(_)) {
        return decision;
    }
    let timeout: Duration = state.settings.confirm_timeout;
    let allowed = match tokio::time::timeout(
        timeout,
        confirmer.author_may(&taking.author, &taking.question),
    )
    .await
    {
        Ok(Ok(allowed)) => allowed,
        Ok(Err(e)) => {
            tracing::warn!(error = %crate::error_chain::with_causes(&e), "could not ask about a hand-over; keeping the denial");
            false
        }
        Err(_) => {
            tracing::warn!(
                ?timeout,
                "asking about a hand-over timed out; keeping the denial"
            );
            false
        }
    };
    let decision = crate::core::hand_over(decision, &taking, allowed);
    if let Decision::Allow(allowed) = &decision {
        tracing::info!(from = %taking.from, to = %taking.to, author = %taking.author.username, "hand-over allowed: {}", Decision::Allow(allowed.clone()).explain());
    }
    decision
}

async fn confirm_if_needed(state: &AppState, decision: Decision) -> Decision {
    let Some(release) = decision.needs_confirmation().cloned() else {
        return decision;
    };
    let Some(confirmer) = &state.confirmer else {
        return decision;
    };
    let timeout: Duration = state.settings.confirm_timeout;
    let known = state
        .index
        .current()
        .release(&release)
        .and_then(|held| held.newest().map(|revision| revision.revision));
    let (fresh, result) = match tokio::time::timeout(
        timeout,
        confirmer.newest_revision(&release, known),
    )
    .await
    {
        Ok(Ok(newest)) => {
            let status = newest.map(|(_, status)| status);
            (
                status,
                if status.is_some_and(|s| s.is_helm_at_work()) {
                    ConfirmResult::Pending
                } else {
                    ConfirmResult::Unchanged
                },
            )
        }
        Ok(Err(e)) => {
            tracing::warn!(release = %release, error = %crate::error_chain::with_causes(&e), "could not re-read release; keeping the decision");
            (None, ConfirmResult::Error)
        }
        Err(_) => {
            tracing::warn!(release = %release, ?timeout, "re-reading the release timed out; keeping the decision");
            (None, ConfirmResult::Timeout)
        }
    };
    state.metrics.confirmations.inc(result);
    confirm(decision, fresh)
}
