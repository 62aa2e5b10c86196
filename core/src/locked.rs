//! An object a release locks: its identity and the chart's content, as the index keeps it.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::interning::SharedStr;
use crate::object_content::ObjectContent;
use crate::release::ReleaseKey;
use crate::tree::Tree;

/// How many unpacked objects [`LockedObject::recent_content`] keeps per thread.
pub(crate) const RECENT_CONTENTS: usize = 32;

/// An object a release locks, with the chart's content.
#[derive(Debug, PartialEq)]
pub struct LockedObject {
    // Shared: a cluster's objects repeat a few groups, versions, kinds and namespaces.
    pub group: SharedStr,
    pub version: SharedStr,
    pub kind: SharedStr,
    /// Resolved: the chart's namespace, else the release's for namespaced kinds; `None` for
    /// cluster-scoped kinds.
    pub namespace: Option<SharedStr>,
    /// Boxed: no spare capacity to keep for 300,000 names.
    pub name: Box<str>,
    /// The chart's content: its document in the release's manifest, parsed on first need, or
    /// its tree packed; [`content`](Self::content) reads it.
    pub(crate) held: ObjectContent,
    /// Shared by the objects of a release.
    pub release: Arc<ReleaseKey>,
    /// The HorizontalPodAutoscaler of the same release whose `scaleTargetRef` this object is:
    /// its `spec.replicas` is the autoscaler's to set, neither locked nor reverted.
    pub scaled_by: Option<SharedStr>,
}

/// The path a HorizontalPodAutoscaler writes on its target (through `scale`).
pub(crate) const SCALED_PATH: &str = "/spec/replicas";

impl LockedObject {
    /// The path a controller owns by design on this object ([`LockedObject::scaled_by`]):
    /// neither locked nor reverted.
    pub(crate) fn controller_owned(&self) -> Option<&'static str> {
        self.scaled_by.as_ref().map(|_| SCALED_PATH)
    }

    /// The object as the chart renders it; `Tree::Null` when its document cannot be read
    /// ([`readable_content`](Self::readable_content)).
    pub fn content(&self) -> Tree {
        self.readable_content().unwrap_or(Tree::Null)
    }

    /// The object as the chart renders it, or `None` when its document, read on first need,
    /// does not parse or does not name this object (what the start-up reader read of it): such
    /// an object is not locked, as a document skipped at start is not.
    pub fn readable_content(&self) -> Option<Tree> {
        let tree = self.held.tree()?;
        if self.held.parsed_at_start() || self.named_by(&tree) {
            Some(tree)
        } else {
            None
        }
    }

    /// `tree` names this object: its apiVersion, kind, name, and namespace when it writes one.
    fn named_by(&self, tree: &Tree) -> bool {
        let text = |path: &str| tree.pointer(path).and_then(Tree::as_str);
        let namespace_agrees = match (
            text("/metadata/namespace").filter(|n| !n.is_empty()),
            &self.namespace,
        ) {
            (Some(written), Some(resolved)) => written == resolved.as_ref(),
            (Some(_), None) => true,
            (None, resolved) => resolved
                .as_deref()
                .is_none_or(|ns| ns == self.release.namespace),
        };
        text("/apiVersion") == Some(self.api_version().as_str())
            && text("/kind") == Some(self.kind.as_ref())
            && text("/metadata/name") == Some(&*self.name)
            && namespace_agrees
    }

    /// [`content`](Self::content), kept for the next request on this thread: the objects
    /// written most (a controller's status updates, a rollout) are few, and reading one parses
    /// YAML or JSON. The last [`RECENT_CONTENTS`] objects' trees are kept per thread, each with its
    /// object, so an object replaced in the index is never mistaken for its successor (its
    /// address cannot be reused while it is held). Uses no lock; the memory is bounded.
    pub(crate) fn recent_content(self: &Arc<Self>) -> Rc<Tree> {
        thread_local! {
            static RECENT: RefCell<Vec<(Arc<LockedObject>, Rc<Tree>)>> = const { RefCell::new(Vec::new()) };
        }
        RECENT.with_borrow_mut(|recent| {
            if let Some(i) = recent.iter().position(|(o, _)| Arc::ptr_eq(o, self)) {
                let entry = recent.remove(i);
                let tree = Rc::clone(&entry.1);
                recent.insert(0, entry);
                return tree;
            }
            let tree = Rc::new(self.content());
            recent.insert(0, (Arc::clone(self), Rc::clone(&tree)));
            recent.truncate(RECENT_CONTENTS);
            tree
        })
    }

    pub fn api_version(&self) -> String {
        crate::manifest::api_version(&self.group, &self.version)
    }

    /// `Deployment shop/shop-web`, or `ClusterRole shop-reader` when cluster-scoped.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {}/{}", self.kind, ns, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, replicas: i64) -> Arc<LockedObject> {
        let content = Tree::from(&serde_json::json!({"spec": {"replicas": replicas}}));
        Arc::new(LockedObject {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: name.into(),
            held: crate::object_content::parsed(&content),
            release: Arc::new(ReleaseKey::new("shop", "shop")),
            scaled_by: None,
        })
    }

    #[test]
    fn a_record_takes_80_bytes() {
        // 300,000 of these at 10,000 releases: with the allocator's 16-byte Arc header, a
        // record fits mimalloc's 96-byte size class (it took the 160-byte class at 128 bytes).
        assert_eq!(std::mem::size_of::<LockedObject>(), 80);
    }

    #[test]
    fn a_recent_content_is_the_objects_own_even_after_it_is_replaced() {
        let first = object("web", 1);
        let kept = first.recent_content();
        assert_eq!(*kept, first.content());
        assert!(
            Rc::ptr_eq(&kept, &first.recent_content()),
            "kept, not unpacked again"
        );
        // The index replaces the object (a new revision): its successor's content is read,
        // whatever address it gets.
        drop(first);
        for replicas in 2..2 + RECENT_CONTENTS as i64 * 2 {
            let next = object("web", replicas);
            assert_eq!(
                next.recent_content().pointer("/spec/replicas"),
                Some(&Tree::Int(replicas))
            );
        }
    }
}
