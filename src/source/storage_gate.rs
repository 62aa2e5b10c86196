//! The gate a release stored outside its own namespace passes before it is indexed (Flux's
//! storage namespace; the rule is [`crate::core::speaks_for_its_namespace`]): the API server is
//! asked, as the revision's author, whether they may create Secrets in the release's namespace.
//! The same gate asks about a revision kept by another driver than its release's
//! ([`crate::core::counts_beside_its_release`]): may its author create the release's driver's
//! kind in the release's namespace.

use crate::controller::author_check::AuthorChecks;
use crate::core::{
    counts_beside_its_release, driver_question, speaks_for_its_namespace, storage_question,
    ReleaseDriver, ReleaseSecret, SecretError,
};

pub(crate) struct StorageGate {
    checks: AuthorChecks,
    /// Storage namespaces whose release Secrets only the admin's controllers write
    /// (`--trusted-storage-namespace`): their revisions count without a known author.
    trusted: Vec<crate::core::TrustedStorage>,
}

impl StorageGate {
    pub(crate) fn new(client: kube::Client, trusted: Vec<crate::core::TrustedStorage>) -> Self {
        StorageGate {
            checks: AuthorChecks::new(client),
            trusted,
        }
    }

    /// The authorizer's answers, kept for their time to live.
    pub(crate) fn author_checks(&self) -> &AuthorChecks {
        &self.checks
    }

    /// Whether `secret`'s release counts: always when stored in its own namespace (no call);
    /// else as its author's answer says. An authorizer that cannot be asked counts as a no: the
    /// release locks nothing until the next list or write of it.
    pub(crate) async fn admit(&self, secret: &ReleaseSecret) -> Result<(), SecretError> {
        let Some(question) = storage_question(secret) else {
            return Ok(());
        };
        let allowed = match self.checks.may(&secret.author, &question).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!(secret = %secret.secret, error = %crate::error_chain::with_causes(&e), "could not ask whether the author of a release stored in another namespace may write there; not indexed");
                Some(false)
            }
        };
        speaks_for_its_namespace(secret, &self.trusted, allowed)
    }

    /// Whether `secret` counts beside its release's revisions kept by `release_driver`: always
    /// when kept by that driver (no call); else as its author's answer says, and then it is
    /// marked as asked (`counts_beside`) for the index. An authorizer that cannot be asked
    /// counts as a no.
    pub(crate) async fn admit_beside(
        &self,
        secret: &mut ReleaseSecret,
        release_driver: ReleaseDriver,
    ) -> Result<(), SecretError> {
        let Some(question) = driver_question(secret, release_driver) else {
            return Ok(());
        };
        let allowed = match self.checks.may(&secret.author, &question).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!(secret = %secret.secret, error = %crate::error_chain::with_causes(&e), "could not ask whether the author of a revision kept by another driver than its release's may keep it with the release's; not indexed");
                Some(false)
            }
        };
        counts_beside_its_release(secret, release_driver, &self.trusted, allowed)?;
        secret.counts_beside = true;
        Ok(())
    }
}
