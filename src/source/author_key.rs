//! The key of the author stamp ([`crate::core::AuthorKey`]): 32 random bytes in a Secret in the
//! locker's own namespace, made by the first replica that finds none and read by the others.
//! When the key was made says nothing about a release Secret: one without a stamp has no known
//! author, whenever it was written (docs/security.md).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::Client;
use tokio::sync::watch;

use crate::core::{AuthorKey, Stamping, MIN_AUTHOR_KEY_BYTES};

/// The stamping key once loaded; `None` before (and always, without the API server).
pub(crate) type StampingRx = watch::Receiver<Option<Arc<Stamping>>>;

const KEY_FIELD: &str = "key";

#[derive(Debug, thiserror::Error)]
pub(crate) enum AuthorKeyError {
    #[error("cannot read or create the author key Secret {namespace}/{name}")]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the author key Secret {namespace}/{name} has no usable data.key: {why}")]
    Unusable {
        namespace: String,
        name: String,
        why: String,
    },
}

/// Where the key lives.
#[derive(Clone)]
pub(crate) struct AuthorKeySecret {
    pub client: Client,
    pub namespace: String,
    pub name: String,
}

impl AuthorKeySecret {
    /// Loads the key (creating it when there is none), retrying with backoff until it can, then
    /// publishes it and waits forever (it is a supervised task).
    pub(crate) async fn run(self, tx: watch::Sender<Option<Arc<Stamping>>>) {
        let mut delay = Duration::from_millis(500);
        loop {
            match self.load().await {
                Ok(stamping) => {
                    tracing::info!(secret = %format!("{}/{}", self.namespace, self.name), "author key loaded; release Secret writes are stamped with their author");
                    let _ = tx.send(Some(Arc::new(stamping)));
                    return std::future::pending().await;
                }
                Err(e) => {
                    tracing::warn!(error = %crate::error_chain::with_causes(&e), retry_in = ?delay, "author key not loaded: release Secret writes are not stamped: the reverter only holds the objects of revisions written meanwhile at what is live");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            }
        }
    }

    fn api_error(&self, source: kube::Error) -> AuthorKeyError {
        AuthorKeyError::Api {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        }
    }

    async fn load(&self) -> Result<Stamping, AuthorKeyError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let secret = match api
            .get_opt(&self.name)
            .await
            .map_err(|e| self.api_error(e))?
        {
            Some(secret) => secret,
            None => match api
                .create(&PostParams::default(), &self.new_secret()?)
                .await
            {
                Ok(created) => created,
                // Another replica made it first.
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    api.get(&self.name).await.map_err(|e| self.api_error(e))?
                }
                Err(e) => return Err(self.api_error(e)),
            },
        };
        Ok(Stamping::new(self.read(&secret)?))
    }

    fn new_secret(&self) -> Result<Secret, AuthorKeyError> {
        use ring::rand::SecureRandom;
        let mut bytes = vec![0u8; MIN_AUTHOR_KEY_BYTES];
        ring::rand::SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| AuthorKeyError::Unusable {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
                why: "the system has no random bytes to make one".into(),
            })?;
        Ok(Secret {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_string(),
                    "helm-locker".to_string(),
                )])),
                ..Default::default()
            },
            type_: Some("Opaque".into()),
            data: Some(BTreeMap::from([(KEY_FIELD.to_string(), ByteString(bytes))])),
            ..Default::default()
        })
    }

    /// The key.
    fn read(&self, secret: &Secret) -> Result<AuthorKey, AuthorKeyError> {
        let unusable = |why: String| AuthorKeyError::Unusable {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            why,
        };
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(KEY_FIELD))
            .ok_or_else(|| unusable("no data.key".into()))?;
        AuthorKey::new(&bytes.0).map_err(|e| unusable(e.to_string()))
    }
}
