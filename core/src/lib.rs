//! helm-locker's pure core: what a Helm release locks and whether a write may change it.
//!
//! Data flows one way: release Secret -> [`ReleaseSecret`] -> [`parse_manifest`] -> [`Index`];
//! and AdmissionReview -> [`parse_review`] -> [`decide`] (with [`locked_changes`] by the API's
//! [`Schema`] and the [`Config`]) -> [`render_response`]. Everything here is synchronous and
//! does no I/O: the binary crate (HTTP, TLS, Kubernetes watches, controllers) is a thin shell
//! around it.
//!
//! The front door is the re-exports below, grouped by concept, and it is the only way in: the
//! modules are private, so what the shell, its tests, the benches, the examples and the fuzz
//! targets use is named here (`helm_locker_core::Index`, in the shell `crate::core::Index`). A
//! name that would not say what it is without its module, or that two modules share, is
//! re-exported under a longer one (`policy::Target` as [`RuleTarget`], `parallel::map` as
//! [`parallel_map`]); inside core the short name reads next to its module. The one public
//! module is `test_util`, builders for tests behind the `test-util` feature.
//!
//! Every item re-exported here is used outside this crate. `core/public-api.txt` lists them, and
//! `tests/public_api.rs` fails when lib.rs and the list differ: the API grows (or shrinks) only
//! on purpose. The modules' other `pub` items are the crate's own: used by other modules, or
//! held by a public item without being named outside (a private module's type may be public for
//! that), such as `policy::ReleaseRule` (a field of [`Config`], which callers build with
//! `..Config::default()`), `release::Layer` (carried by [`DecodeError`]) and
//! `label_selector::SelectorError` ([`LabelSelector`]'s `FromStr` error).
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

// Release Secrets and their decoding: a Secret (or a file of them) into a release.
pub use newest::newest_revision;
pub use release::{
    annotated_release_key, decode_data_release, decode_helm_payload, decode_release_json,
    decode_release_json_within, decode_secret, each_release_secret, gunzip_within,
    helm_payload_json_within, live_owner, max_namespace_objects, max_release_bytes,
    max_release_objects, parse_release_file, release_data, release_secret_from_parts,
    set_max_namespace_objects, set_max_release_bytes, set_max_release_objects, DecodeError,
    Driver as ReleaseDriver, ReleaseKey, ReleaseSecret, SecretError, SecretRef, Status,
    DEFAULT_MAX_NAMESPACE_OBJECTS, DEFAULT_MAX_RELEASE_BYTES, DEFAULT_MAX_RELEASE_OBJECTS,
    NOTES_KEPT_BYTES,
};
pub use release_driver::{counts_beside_its_release, driver_question, release_driver};
pub use report_budget::ReportBudget;
pub use storage::{speaks_for_its_namespace, storage_question, TrustedStorage};
// A release's manifest, the YAML it is written in, and the tree chart content is kept in.
pub use manifest::{api_version, parse_manifest, split_documents};
pub use tree::Tree;
pub use yaml::block::parse as parse_yaml_block;
pub use yaml::{parse_document as parse_yaml, reference as parse_yaml_reference};

// The index: every release's revisions and every object the newest one owns.
pub use conflicts::{group_conflicts, ConflictGroup};
pub use index::{
    Index, ListingBound, LockedObject, PreparedSecret, Refused, ReleaseState, Revision,
    UpdateReport,
};

// A review and its decision: the AdmissionReview in, the decision, the response out.
pub use decide::{
    allow_by_rules, confirm, decide, decide_found, excuse, find, hand_over, hand_over_question,
    prove, Allowed, Decision, DecisionKind, Found, HandOver, Locked, OwnerProof,
    Target as DecisionTarget, Wording,
};
pub use review::{
    parse_head, parse_review, read_head, render_response, Endpoint, Head as ReviewHead, Operation,
    RawObject, Request, Review,
};

// Policy: the configuration (modes, exemptions, ignore rules, selectors) and LockExceptions.
pub use exception::Exception;
pub use policy::{
    validate as validate_config, Config, Exemptions, IgnoreRule, LabelSelector, Mode, Registration,
    Target as RuleTarget,
};
// Scoped writer rules, and what is learned from would-be denials to propose them.
pub use learned::{
    Learned, LearnedEntry, RuleUse as WriterRuleUse, LEARNED_KEY,
    MAX_OBJECT_NAMES as MAX_LEARNED_OBJECT_NAMES,
};
pub use learning::{merge as merge_learned, Learning, Observation as LearningObservation};
pub use proposal::{
    accept as accept_proposals, propose as propose_rules, render_text as proposals_text,
    rule_expired, rule_yaml as writer_rule_yaml, rules_of_release,
    values_snippet as writers_values_snippet, AcceptError, LearnInput, Proposals,
    DEFAULT_UNUSED_FOR,
};
pub use writer_rule::{
    keyed_path, registration_rules, rule_held_paths, rule_holders, rules_of_configmap,
    validate_rules, Objects as WriterObjects, ReleaseMatch, RuleError as WriterRuleError,
    RuleObject, RuleWriter, WriterRule, Writers,
};

// What Helm owns in an object: the API's schema, the kinds known before it is read, the field
// comparison, server-side apply's field sets, quantities.
pub use fields_v1::{attribution_of, helm_fields, owned_fields};
pub use kinds::{scope_of, Scope as KindScope};
pub use ownership::{applied_object, drifted_fields, locked_changes, Change};
pub use quantity::Quantity;
pub use schema::{KubeVersion, Schema};

// The reverter's plan: what drifted, what to write back, and when to stop fighting a writer.
pub use fight::{other_writer, Fight, Fights, Next as FightNext, FIGHT_REVERTS, FIGHT_WINDOW};
pub use revert_plan::{
    attribution as helm_attribution, describe_paths, desired_object, differing_from_stored, drift,
    fixed_by_write, held_at_first_sight, held_object, held_paths, helm_writer, helm_writer_seen,
    hold_beyond_drift, locked_values, ownership_return, recreate_when_deleted, revert_patch,
    stored_form_body, write_would_fix, written_beyond_drift, Backoff, HelmWriter, OwnershipReturn,
    STORED_FORM_MANAGER,
};

// The author stamp: who wrote a revision, and what the reverter may write for that author.
pub use author::{
    authorship, authorship_seen, needs as author_needs, permission as author_permission, role_ref,
    stamp_annotations, unknown_author_scope, Access as AuthorAccess, Author, AuthorKey, Authorship,
    Need as AuthorNeed, OutOfScope as UnknownAuthorOutOfScope, Permission as AuthorPermission,
    Place as WritePlace, RoleRef, Stamping, StoredSecret, Unknown as UnknownAuthor,
    Write as ReverterWrite, AUTHOR_ANNOTATION, MIN_KEY_BYTES as MIN_AUTHOR_KEY_BYTES,
};
pub use stamp::{stamp as stamp_review, vouch_content, VOUCH_ANNOTATION, VOUCH_CONTENT_ANNOTATION};

// Chart files and tracing: which template and values key set a field; `inspect`'s report.
pub use chart::{decode_chart_files, decode_chart_files_payload, find_chart_files, ChartFiles};
pub use inspect::{inspect, render_text as inspect_text, Charts as ChartsByRevision};
pub use trace::{rendered_object, trace_change};

// Helpers.
pub use parallel::map as parallel_map;

mod author;
mod chart;
mod conflicts;
mod content;
mod decide;
mod driver;
mod exception;
mod fields_v1;
mod fight;
mod identity;
mod index;
mod inspect;
mod interning;
mod kinds;
mod label_selector;
mod learned;
mod learning;
mod limits;
mod locked;
mod manifest;
mod newest;
pub mod notes;
mod object_content;
mod ownership;
mod packed;
mod parallel;
mod pointer;
mod policy;
mod proposal;
mod prune;
mod quantity;
mod release;
mod release_driver;
mod report_budget;
mod revert_plan;
mod review;
mod scan;
mod schema;
mod spent;
mod stamp;
mod storage;
mod trace;
mod tree;
mod writer_rule;
mod yaml;

#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
