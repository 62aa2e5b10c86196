//! Whether a revision's author may make a write of the reverter: the API server's authorizer
//! answers (a SubjectAccessReview per question, as the author: user, uid, groups, extra), and
//! each answer is kept for [`ANSWER_TTL`], so a release's objects cost one review per access and
//! an author's rights taken away show within that time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kube::Client;

use crate::core::{
    author_permission, Author, AuthorAccess, AuthorNeed, AuthorPermission, Authorship,
};

/// How long an answer of the authorizer is used.
pub(crate) const ANSWER_TTL: Duration = Duration::from_secs(30);
/// Answers kept before expired ones are dropped.
const PRUNE_AT: usize = 10_000;

type Question = (Arc<Author>, AuthorAccess);

pub(crate) struct AuthorChecks {
    client: Client,
    answers: Mutex<HashMap<Question, (bool, Instant)>>,
}

impl AuthorChecks {
    pub(crate) fn new(client: Client) -> Self {
        AuthorChecks {
            client,
            answers: Mutex::new(HashMap::new()),
        }
    }

    fn answers(&self) -> std::sync::MutexGuard<'_, HashMap<Question, (bool, Instant)>> {
        self.answers.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cached(&self, author: &Arc<Author>, access: &AuthorAccess) -> Option<bool> {
        let answers = self.answers();
        let (allowed, at) = answers.get(&(author.clone(), access.clone()))?;
        (at.elapsed() < ANSWER_TTL).then_some(*allowed)
    }

    /// The authorizer's answer, from the cache or asked now.
    async fn allowed(
        &self,
        author: &Arc<Author>,
        access: &AuthorAccess,
    ) -> Result<bool, kube::Error> {
        if let Some(allowed) = self.cached(author, access) {
            return Ok(allowed);
        }
        let allowed = self.review(author, access).await?;
        let mut answers = self.answers();
        if answers.len() >= PRUNE_AT {
            answers.retain(|_, (_, at)| at.elapsed() < ANSWER_TTL);
        }
        answers.insert((author.clone(), access.clone()), (allowed, Instant::now()));
        Ok(allowed)
    }

    async fn review(&self, author: &Author, access: &AuthorAccess) -> Result<bool, kube::Error> {
        let (resource_attributes, non_resource_attributes) = match &access.path {
            Some(path) => (
                None,
                Some(NonResourceAttributes {
                    path: Some(path.clone()),
                    verb: Some(access.verb.clone()),
                }),
            ),
            None => (
                Some(ResourceAttributes {
                    verb: Some(access.verb.clone()),
                    group: Some(access.group.clone()),
                    resource: Some(access.resource.clone()),
                    subresource: (!access.subresource.is_empty())
                        .then(|| access.subresource.clone()),
                    namespace: access.namespace.clone(),
                    name: (!access.name.is_empty()).then(|| access.name.clone()),
                    ..Default::default()
                }),
                None,
            ),
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(author.username.clone()),
                uid: (!author.uid.is_empty()).then(|| author.uid.clone()),
                groups: Some(author.groups.clone()),
                extra: (!author.extra.is_empty()).then(|| author.extra.clone()),
                resource_attributes,
                non_resource_attributes,
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api.create(&PostParams::default(), &review).await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }

    /// The authorizer's answer to one question about the author of a revision: `None` when the
    /// author is not known (nobody to ask about).
    pub(crate) async fn may(
        &self,
        authorship: &Authorship,
        access: &AuthorAccess,
    ) -> Result<Option<bool>, kube::Error> {
        match authorship {
            Authorship::Known(author) => Ok(Some(self.allowed(author, access).await?)),
            Authorship::Unknown(_) => Ok(None),
        }
    }

    /// Whether the author of a revision of `authorship` may make a write that needs `needed`.
    /// A need's alternatives are asked about only when its first access is refused. A revision
    /// whose author is not known is granted nothing.
    pub(crate) async fn permission(
        &self,
        authorship: &Authorship,
        needed: &[AuthorNeed],
    ) -> Result<AuthorPermission, kube::Error> {
        if let Authorship::Known(author) = authorship {
            for need in needed {
                if self.allowed(author, &need.access).await? {
                    continue;
                }
                for alternative in &need.or_all_of {
                    if !self.allowed(author, alternative).await? {
                        break;
                    }
                }
            }
        }
        Ok(author_permission(authorship, needed, |author, access| {
            // Asked just above; an alternative after the first refused one counts as refused.
            self.cached(&Arc::new(author.clone()), access)
                .unwrap_or(false)
        }))
    }
}
