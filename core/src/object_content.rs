//! An object's chart content as the index keeps it, parsed on first need.
//!
//! At start-up the index reads each document's identity only ([`crate::identity`]) and keeps
//! the release's manifest as one zstd frame (about 0.08x of its text on `scripts/scale.sh`'s
//! charts, where a packed field tree per object took 0.23x): an object's content is its
//! document's bytes in that frame, parsed when a write reaches the object or the reverter
//! compares it. A document the identity reader gave up on, or whose fields the index needs at
//! once (an autoscaler's `scaleTargetRef`), is parsed at start and kept packed as before.
//! The parse on first need is the same parser as at start; a document it cannot read, or that
//! does not say what its identity read said, is no content (`None`): the object is then not
//! locked, as a document skipped at start is not. Each thread keeps the manifest text it
//! decompressed last (`LastText`), so reading a release's objects one after another (the
//! reverter's comparisons, a rollout's writes) decompresses its frame once.

use std::cell::RefCell;
use std::fmt;
use std::sync::{Arc, Weak};

use crate::packed::Packed;
use crate::tree::Tree;

/// zstd's fastest positive level: on `scripts/scale.sh`'s manifests as small as level 3
/// (0.082x against 0.083x) in 0.88 of the time.
const LEVEL: i32 = 1;

/// Where each object of a release has its content.
pub(crate) enum Held {
    /// Parsed at start.
    Parsed(Packed),
    /// Bytes `start..end` of the manifest.
    Document { start: u32, end: u32 },
}

/// A release's manifest and where its objects' contents are, shared by its objects.
pub(crate) struct ReleaseContents {
    /// The manifest, one zstd frame, or its text when zstd refused (or nothing is read from it).
    manifest: Box<[u8]>,
    compressed: bool,
    /// The manifest's length in bytes.
    len: u32,
    held: Box<[Held]>,
}

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static LAST_TEXT: RefCell<LastText> = const { RefCell::new(LastText { of: None, text: Vec::new(), decompressor: None }) };
}

/// The manifest text this thread decompressed last, and whose it is: the reverter compares a
/// release's objects one after another, and a rollout writes to a few objects of one release,
/// so each frame is decompressed once for them all. The [`Weak`] keeps the release's address
/// from being reused while it names the text (it holds no contents once the release is gone).
struct LastText {
    of: Option<Weak<ReleaseContents>>,
    text: Vec<u8>,
    decompressor: Option<zstd::bulk::Decompressor<'static>>,
}

impl ReleaseContents {
    /// `held` of `manifest`; the manifest is kept only when some object is read from it.
    pub(crate) fn new(manifest: &str, held: Vec<Held>) -> Arc<ReleaseContents> {
        let any_document = held.iter().any(|h| matches!(h, Held::Document { .. }));
        let (bytes, compressed) = match any_document.then(|| compress(manifest.as_bytes())) {
            None => (Box::default(), false),
            Some(Some(frame)) => (frame.into_boxed_slice(), true),
            Some(None) => (manifest.as_bytes().into(), false),
        };
        Arc::new(ReleaseContents {
            manifest: bytes,
            compressed,
            len: u32::try_from(manifest.len()).unwrap_or(u32::MAX),
            held: held.into_boxed_slice(),
        })
    }

    /// Heap bytes held: the frame and every packed tree (for the memory figures of
    /// `test_util`).
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.manifest.len()
            + self
                .held
                .iter()
                .map(|h| {
                    std::mem::size_of::<Held>()
                        + if let Held::Parsed(p) = h {
                            p.heap_bytes()
                        } else {
                            0
                        }
                })
                .sum::<usize>()
    }

    fn document(this: &Arc<ReleaseContents>, start: u32, end: u32) -> Option<Tree> {
        let (start, end) = (start as usize, end as usize);
        if !this.compressed {
            let text = std::str::from_utf8(this.manifest.get(start..end)?).ok()?;
            return crate::yaml::parse_document(text).ok();
        }
        LAST_TEXT.with_borrow_mut(|last| {
            let held = last
                .of
                .as_ref()
                .is_some_and(|of| std::ptr::eq(of.as_ptr(), Arc::as_ptr(this)));
            if !held {
                last.of = None;
                last.text.clear();
                last.text.reserve(this.len as usize);
                if last.decompressor.is_none() {
                    last.decompressor = Some(zstd::bulk::Decompressor::new().ok()?);
                }
                last.decompressor
                    .as_mut()?
                    .decompress_to_buffer(&this.manifest, &mut last.text)
                    .ok()?;
                last.of = Some(Arc::downgrade(this));
            }
            let doc = std::str::from_utf8(last.text.get(start..end)?).ok()?;
            crate::yaml::parse_document(doc).ok()
        })
    }
}

fn compress(text: &[u8]) -> Option<Vec<u8>> {
    COMPRESSOR.with_borrow_mut(|slot| {
        if slot.is_none() {
            *slot = Some(zstd::bulk::Compressor::new(LEVEL).ok()?);
        }
        slot.as_mut()?.compress(text).ok()
    })
}

/// One object's content: its place among its release's.
#[derive(Clone)]
pub struct ObjectContent {
    release: Arc<ReleaseContents>,
    at: u32,
}

impl ObjectContent {
    pub(crate) fn new(release: &Arc<ReleaseContents>, at: usize) -> ObjectContent {
        ObjectContent {
            release: Arc::clone(release),
            at: u32::try_from(at).unwrap_or(u32::MAX),
        }
    }

    /// Parsed now, or parsed at start and kept packed.
    pub(crate) fn parsed_at_start(&self) -> bool {
        matches!(
            self.release.held.get(self.at as usize),
            Some(Held::Parsed(_))
        )
    }

    /// The content's tree: unpacked, or its document parsed. `None` when the document does not
    /// parse (only a document the start-up reader did not parse can be such).
    pub(crate) fn tree(&self) -> Option<Tree> {
        match self.release.held.get(self.at as usize)? {
            Held::Parsed(packed) => Some(packed.unpack()),
            Held::Document { start, end } => ReleaseContents::document(&self.release, *start, *end),
        }
    }

    /// The release's contents this object shares (to count their bytes once).
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn shared(&self) -> &Arc<ReleaseContents> {
        &self.release
    }
}

impl PartialEq for ObjectContent {
    fn eq(&self, other: &Self) -> bool {
        (Arc::ptr_eq(&self.release, &other.release) && self.at == other.at)
            || self.tree() == other.tree()
    }
}

impl fmt::Debug for ObjectContent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the content: manifests carry chart values.
        let how = if self.parsed_at_start() {
            "parsed"
        } else {
            "document"
        };
        write!(f, "ObjectContent({how} {})", self.at)
    }
}

/// A content parsed already (tests build objects outside a manifest).
#[cfg(test)]
pub(crate) fn parsed(tree: &Tree) -> ObjectContent {
    ObjectContent::new(
        &ReleaseContents::new("", vec![Held::Parsed(Packed::pack(tree))]),
        0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_is_parsed_from_the_frame_and_a_parsed_one_unpacked() {
        let manifest = "a: 1\n---\nb: [2]\n";
        let tree = Tree::from(&serde_json::json!({"c": 3}));
        let contents = ReleaseContents::new(
            manifest,
            vec![
                Held::Document { start: 0, end: 5 },
                Held::Document { start: 9, end: 16 },
                Held::Parsed(Packed::pack(&tree)),
            ],
        );
        let at = |i| ObjectContent::new(&contents, i).tree();
        assert_eq!(at(0), Some(Tree::from(&serde_json::json!({"a": 1}))));
        assert_eq!(at(1), Some(Tree::from(&serde_json::json!({"b": [2]}))));
        assert_eq!(at(2), Some(tree));
        assert_eq!(at(3), None, "no such object");
        assert!(contents.compressed);
    }

    #[test]
    fn documents_of_releases_read_in_turn_are_each_their_own() {
        // The thread keeps the text it decompressed last: reading another release's document,
        // then the first's again, and a release made where a dropped one was, reads each
        // release's own text.
        let document = |text: &str| {
            let len = u32::try_from(text.len()).unwrap();
            ReleaseContents::new(text, vec![Held::Document { start: 0, end: len }])
        };
        let value = |contents: &Arc<ReleaseContents>| ObjectContent::new(contents, 0).tree();
        let (a, b) = (document("a: 1\n"), document("b: 2\n"));
        for _ in 0..2 {
            assert_eq!(value(&a), Some(Tree::from(&serde_json::json!({"a": 1}))));
            assert_eq!(value(&b), Some(Tree::from(&serde_json::json!({"b": 2}))));
        }
        drop(b);
        for n in 0..50 {
            let c = document(&format!("c: {n}\n"));
            assert_eq!(value(&c), Some(Tree::from(&serde_json::json!({"c": n}))));
        }
        assert_eq!(value(&a), Some(Tree::from(&serde_json::json!({"a": 1}))));
    }

    #[test]
    fn a_document_that_does_not_parse_is_no_content() {
        let contents = ReleaseContents::new("a: [1\n", vec![Held::Document { start: 0, end: 6 }]);
        assert_eq!(ObjectContent::new(&contents, 0).tree(), None);
        // A range outside the manifest, or inside a character, is none either.
        let contents = ReleaseContents::new(
            "é: 1\n",
            vec![
                Held::Document { start: 1, end: 5 },
                Held::Document { start: 0, end: 99 },
            ],
        );
        assert_eq!(ObjectContent::new(&contents, 0).tree(), None);
        assert_eq!(ObjectContent::new(&contents, 1).tree(), None);
    }

    #[test]
    fn a_release_parsed_whole_keeps_no_manifest() {
        let tree = Tree::from(&serde_json::json!({"c": 3}));
        let contents = ReleaseContents::new("c: 3\n", vec![Held::Parsed(Packed::pack(&tree))]);
        assert!(contents.manifest.is_empty());
        assert_eq!(ObjectContent::new(&contents, 0).tree(), Some(tree));
    }
}
