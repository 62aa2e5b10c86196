//! A [`Tree`] as the index keeps it until a request needs it: compact JSON, compressed. Used
//! for the objects parsed at start ([`crate::object_content`]: a document the identity reader
//! gave up on, a `List`, an autoscaler); the rest are kept as their release's manifest frame.
//!
//! The index holds the chart's content of every locked object for as long as its release is
//! deployed, and reads one only when a request or a drift check touches that object. As JSON
//! text that content is about the manifests' own size (0.89x on `scripts/scale.sh`'s charts),
//! the largest part of the locker's memory. One object's JSON is small (a few hundred bytes to
//! a few kB), too small for a compressor to find much to share within it; what objects share is
//! the shape of Kubernetes manifests: `apiVersion`, `metadata.labels` with the
//! `app.kubernetes.io/*` keys, a pod template's containers, probes and resources, RBAC rules.
//! So each object is compressed with zstd against a preset dictionary of those shapes,
//! [`packed/dictionary.json`](./packed/dictionary.json): objects written for it here (not taken
//! from any chart), keys sorted as a [`Tree`] serializes them, the most common shapes last.
//! With it an object compresses to about a quarter of its JSON; without it, to about 0.6.
//!
//! Changing the dictionary or the level changes the bytes of every object packed after the
//! change, never what they unpack to: nothing packed is stored outside the process.

use std::cell::RefCell;
use std::fmt;
use std::sync::OnceLock;

use zstd::bulk::{Compressor, Decompressor};
use zstd::dict::{DecoderDictionary, EncoderDictionary};

use crate::tree::Tree;

/// The preset dictionary: see the module's documentation.
const DICTIONARY: &[u8] = include_bytes!("packed/dictionary.json");

/// zstd's default level: on the objects of `scripts/scale.sh`, a smaller output than level 1
/// and as fast (about 2.5 µs an object), where deflate with the same dictionary took 7 µs.
const LEVEL: i32 = 3;

/// The first bytes of a zstd frame. Compact JSON never starts with them, so content that could
/// not be compressed is kept as JSON text and told apart by its first byte.
const ZSTD_MAGIC: [u8; 4] = 0xFD2F_B528_u32.to_le_bytes();

/// An object's content larger than this is not trusted to unpack (no object the API server
/// stores is larger than its 3 MiB request limit); only corrupted bytes could claim it.
const MAX_UNPACKED: u64 = 64 << 20;

/// A [`Tree`], packed: compact JSON, zstd-compressed against the preset dictionary (or the JSON
/// text itself when compression failed). Equal trees pack to equal bytes.
#[derive(Clone, PartialEq)]
pub struct Packed(Box<[u8]>);

fn encoder_dictionary() -> &'static EncoderDictionary<'static> {
    static DICT: OnceLock<EncoderDictionary<'static>> = OnceLock::new();
    DICT.get_or_init(|| EncoderDictionary::copy(DICTIONARY, LEVEL))
}

fn decoder_dictionary() -> &'static DecoderDictionary<'static> {
    static DICT: OnceLock<DecoderDictionary<'static>> = OnceLock::new();
    DICT.get_or_init(|| DecoderDictionary::copy(DICTIONARY))
}

thread_local! {
    /// JSON written here, then compressed into `COMPRESSED`, then copied into one allocation
    /// of the exact size: the index keeps hundreds of thousands of these.
    static JSON: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    static COMPRESSED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    static COMPRESSOR: RefCell<Option<Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<Decompressor<'static>>> = const { RefCell::new(None) };
}

fn new_compressor() -> std::io::Result<Compressor<'static>> {
    let mut compressor = Compressor::with_prepared_dictionary(encoder_dictionary())?;
    // The frame keeps its content size (the buffer to unpack into); a checksum would only
    // guard memory that never leaves the process.
    compressor.include_checksum(false)?;
    compressor.include_contentsize(true)?;
    compressor.include_dictid(false)?;
    Ok(compressor)
}

/// `json` compressed into `out`, or `None` when zstd refused (then the JSON is kept as is).
fn compress(json: &[u8], out: &mut Vec<u8>) -> Option<()> {
    COMPRESSOR.with_borrow_mut(|slot| {
        if slot.is_none() {
            *slot = Some(new_compressor().ok()?);
        }
        let compressor = slot.as_mut()?;
        out.clear();
        out.reserve(zstd::zstd_safe::compress_bound(json.len()));
        compressor.compress_to_buffer(json, out).ok()?;
        Some(())
    })
}

impl Packed {
    pub(crate) fn pack(tree: &Tree) -> Packed {
        JSON.with_borrow_mut(|json| {
            json.clear();
            // Serializing a Tree cannot fail: string keys, finite numbers.
            let _ = serde_json::to_writer(&mut *json, tree);
            COMPRESSED.with_borrow_mut(|compressed| match compress(json, compressed) {
                Some(()) => Packed(compressed.as_slice().into()),
                None => Packed(json.as_slice().into()),
            })
        })
    }

    /// The tree packed; `Tree::Null` for bytes that do not unpack, which only a bug could
    /// produce (the bytes never leave the process).
    pub fn unpack(&self) -> Tree {
        if !self.0.starts_with(&ZSTD_MAGIC) {
            return serde_json::from_slice(&self.0).unwrap_or(Tree::Null);
        }
        JSON.with_borrow_mut(|json| match decompress(&self.0, json) {
            Some(()) => serde_json::from_slice(json).unwrap_or(Tree::Null),
            None => Tree::Null,
        })
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.0.len()
    }
}

fn decompress(frame: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let size = zstd::zstd_safe::get_frame_content_size(frame).ok()??;
    if size > MAX_UNPACKED {
        return None;
    }
    DECOMPRESSOR.with_borrow_mut(|slot| {
        if slot.is_none() {
            *slot = Some(Decompressor::with_prepared_dictionary(decoder_dictionary()).ok()?);
        }
        let decompressor = slot.as_mut()?;
        out.clear();
        out.reserve(usize::try_from(size).ok()?);
        decompressor.decompress_to_buffer(frame, out).ok()?;
        Some(())
    })
}

impl fmt::Debug for Packed {
    /// The content as JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(&self.unpack()) {
            Ok(json) => f.write_str(&json),
            Err(_) => f.write_str("<unpackable>"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_trees_unpack_to_the_same_tree() {
        let yaml = "a: 1\nb: -2.5\nc: [x, true, null, {d: \"é \\u0001 \\\"q\\\"\"}]\ne: {}\nf: []\ng: 9007199254740993\nh: 1e300\n";
        let tree: Tree = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(Packed::pack(&tree).unpack(), tree);
        assert_eq!(Packed::pack(&Tree::Null).unpack(), Tree::Null);
        // Not representable in JSON: packed as null, as the API server could not store them.
        assert_eq!(Packed::pack(&Tree::Float(f64::NAN)).unpack(), Tree::Null);
    }

    fn deployment(name: &str) -> Tree {
        let yaml = format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  labels:\n    app.kubernetes.io/name: {name}\n    app.kubernetes.io/instance: {name}\n    app.kubernetes.io/managed-by: Helm\n    helm.sh/chart: {name}-1.2.3\nspec:\n  replicas: 3\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: {name}\n  template:\n    metadata:\n      labels:\n        app.kubernetes.io/name: {name}\n    spec:\n      containers:\n      - name: {name}\n        image: registry.example.com/{name}:1.2.3\n        imagePullPolicy: IfNotPresent\n        ports:\n        - name: http\n          containerPort: 8080\n          protocol: TCP\n        resources:\n          limits: {{cpu: 500m, memory: 256Mi}}\n          requests: {{cpu: 50m, memory: 64Mi}}\n"
        );
        serde_saphyr::from_str(&yaml).unwrap()
    }

    #[test]
    fn a_typical_object_packs_to_well_under_its_json() {
        let tree = deployment("billing-api");
        let json = serde_json::to_vec(&tree).unwrap();
        let packed = Packed::pack(&tree);
        assert!(packed.0.starts_with(&ZSTD_MAGIC), "compressed");
        assert!(
            packed.heap_bytes() * 3 < json.len(),
            "{} bytes packed of {} bytes of JSON",
            packed.heap_bytes(),
            json.len()
        );
        assert_eq!(packed.unpack(), tree);
    }

    #[test]
    fn equal_trees_pack_to_equal_bytes_and_different_ones_do_not() {
        // The index compares packed objects to tell a changed object from an unchanged one.
        assert_eq!(
            Packed::pack(&deployment("a")),
            Packed::pack(&deployment("a"))
        );
        assert_ne!(
            Packed::pack(&deployment("a")),
            Packed::pack(&deployment("b"))
        );
    }

    #[test]
    fn a_large_object_round_trips() {
        // A ConfigMap of a few hundred kB, larger than any window the dictionary covers.
        let data: Vec<(Box<str>, Tree)> = (0..5000)
            .map(|i| {
                (
                    format!("key-{i}").into(),
                    Tree::Str(format!("value {i} {}", "x".repeat(i % 97)).into()),
                )
            })
            .collect();
        let tree = Tree::map_from(vec![
            ("data".into(), Tree::map_from(data)),
            ("kind".into(), Tree::Str("ConfigMap".into())),
        ]);
        assert_eq!(Packed::pack(&tree).unpack(), tree);
    }

    #[test]
    fn bytes_that_do_not_unpack_give_null_not_a_panic() {
        let mut frame = Packed::pack(&deployment("a")).0.into_vec();
        frame.truncate(frame.len() / 2);
        assert_eq!(Packed(frame.into()).unpack(), Tree::Null);
        let mut lying = ZSTD_MAGIC.to_vec();
        lying.extend([0xff; 16]);
        assert_eq!(Packed(lying.into()).unpack(), Tree::Null);
        assert_eq!(Packed(Box::from(&b"{\"a\":"[..])).unpack(), Tree::Null);
    }

    #[test]
    fn json_kept_uncompressed_unpacks() {
        let tree = deployment("a");
        let json = serde_json::to_vec(&tree).unwrap();
        assert_eq!(Packed(json.into()).unpack(), tree);
    }
}
