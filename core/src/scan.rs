//! A one-pass reader of JSON text that finds where values start and end without building
//! them: a review's head and its objects' spans ([`crate::review`]), an UPDATE's unchanged
//! subtrees ([`crate::prune`]), an object's managedFields. It reads what the API server writes
//! (compact JSON, keys in Go's order) and gives `None` on anything it does not expect; callers
//! then fall back to serde, which names what is wrong. Nothing here recurses: nesting depth
//! costs no stack.

use std::borrow::Cow;

/// A position in JSON text, and the steps over it.
pub(crate) struct Scanner<'a> {
    pub(crate) text: &'a str,
    pub(crate) bytes: &'a [u8],
    pub(crate) pos: usize,
}

/// Where [`Scanner::next_entry`] is in an object.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Entries {
    /// At the object's `{`.
    Start,
    /// After an entry's value.
    AfterValue,
}

/// What [`Scanner::each_entry`] does after an entry.
#[derive(PartialEq)]
pub(crate) enum Flow {
    Next,
    Stop,
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Scanner {
            text,
            bytes: text.as_bytes(),
            pos: 0,
        }
    }

    /// At `pos` in `text`: to read on from where a scanner of a prefix of `text` stopped.
    pub(crate) fn at(text: &'a str, pos: usize) -> Self {
        Scanner {
            text,
            bytes: text.as_bytes(),
            pos,
        }
    }

    /// The text of the value at `pos` (after any whitespace); `pos` ends after it.
    pub(crate) fn value_text(&mut self) -> Option<&'a str> {
        self.skip_whitespace();
        let start = self.pos;
        self.skip_value()?;
        Some(&self.text[start..self.pos])
    }

    /// Whether only whitespace is left.
    /// Steps over `literal` when the text goes on with exactly those bytes; `None` (and the
    /// scanner where it was) when it does not.
    pub(crate) fn literal(&mut self, literal: &[u8]) -> Option<()> {
        let rest = self.bytes.get(self.pos..)?;
        rest.starts_with(literal).then(|| self.pos += literal.len())
    }

    pub(crate) fn at_end(&mut self) -> bool {
        self.skip_whitespace();
        self.pos == self.bytes.len()
    }

    /// A quoted key at `pos`, unescaped when it needs to be.
    pub(crate) fn key(&mut self) -> Option<Cow<'a, str>> {
        let start = self.pos;
        if self.bytes.get(self.pos) != Some(&b'"') {
            return None;
        }
        let plain = self.read_string()?;
        let quoted = &self.text[start..self.pos];
        let inner = &quoted[1..quoted.len() - 1];
        Some(if plain || !inner.contains('\\') {
            Cow::Borrowed(inner)
        } else {
            Cow::Owned(serde_json::from_str::<String>(quoted).ok()?)
        })
    }

    /// The string value at `pos` (after any whitespace), as [`string`] reads its text, in
    /// one pass over it; `pos` ends after it. `None` for anything but a string.
    pub(crate) fn string_value(&mut self) -> Option<Cow<'a, str>> {
        self.skip_whitespace();
        let start = self.pos;
        if self.bytes.get(self.pos) != Some(&b'"') {
            return None;
        }
        let plain = self.read_string()?;
        let quoted = &self.text[start..self.pos];
        if plain {
            Some(Cow::Borrowed(&quoted[1..quoted.len() - 1]))
        } else {
            string(quoted)
        }
    }

    /// A string value, or `null` as `None`, as [`string`] and [`Scanner::value_text`] read
    /// them; `None` for anything else.
    pub(crate) fn nullable_string_value(&mut self) -> Option<Option<Cow<'a, str>>> {
        self.skip_whitespace();
        if self.bytes.get(self.pos) == Some(&b'"') {
            return self.string_value().map(Some);
        }
        match self.value_text()? {
            "null" => Some(None),
            _ => None,
        }
    }

    pub(crate) fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    /// Steps through the object at `pos`, calling `entry` with each key and the scanner at its
    /// value, which `entry` must step over unless it stops there (`Flow::Stop`). `Some(true)`
    /// when stopped, `Some(false)` after the object's end, `None` when the text is not an object.
    pub(crate) fn each_entry(
        &mut self,
        mut entry: impl FnMut(&mut Self, Cow<'a, str>) -> Option<Flow>,
    ) -> Option<bool> {
        let mut entries = Entries::Start;
        while let Some(key) = self.next_entry(&mut entries)? {
            if entry(self, key)? == Flow::Stop {
                return Some(true);
            }
        }
        Some(false)
    }

    /// The next key of an object, with the scanner moved to its value: `Some(None)` after the
    /// object's end, `None` when the text is not an object. `entries` says where the scanner
    /// is (at the `{`, or after a value), so a read can stop at any entry and go on later.
    pub(crate) fn next_entry(&mut self, entries: &mut Entries) -> Option<Option<Cow<'a, str>>> {
        self.skip_whitespace();
        match std::mem::replace(entries, Entries::AfterValue) {
            Entries::Start => {
                if self.bytes.get(self.pos) != Some(&b'{') {
                    return None;
                }
                self.pos += 1;
                self.skip_whitespace();
                if self.bytes.get(self.pos) == Some(&b'}') {
                    self.pos += 1;
                    return Some(None);
                }
            }
            Entries::AfterValue => match self.bytes.get(self.pos)? {
                b',' => {
                    self.pos += 1;
                    self.skip_whitespace();
                }
                b'}' => {
                    self.pos += 1;
                    return Some(None);
                }
                _ => return None,
            },
        }
        let key = self.key()?;
        self.skip_whitespace();
        if self.bytes.get(self.pos) != Some(&b':') {
            return None;
        }
        self.pos += 1;
        self.skip_whitespace();
        Some(Some(key))
    }

    /// From an opening quote to after its closing quote.
    pub(crate) fn skip_string(&mut self) -> Option<()> {
        self.step_string::<false>().map(|_| ())
    }

    /// From an opening quote to after its closing quote: whether the string is plain, with
    /// no escape and no control character, so that its text between the quotes is its value.
    pub(crate) fn read_string(&mut self) -> Option<bool> {
        self.step_string::<true>()
    }

    /// From an opening quote to after its closing quote; with `CONTROLS`, whether the string
    /// has neither escape nor control character (without, whether it has no escape).
    fn step_string<const CONTROLS: bool>(&mut self) -> Option<bool> {
        let mut plain = true;
        self.pos += 1;
        loop {
            // Eight bytes at a time, as serde_json does: most strings hold no escape, and a
            // call into memchr costs more than a short string.
            while let Some(chunk) = self.bytes.get(self.pos..self.pos + 8) {
                let word = u64::from_le_bytes(chunk.try_into().ok()?);
                let mut found = has_byte(word, b'"') | has_byte(word, b'\\');
                if CONTROLS {
                    found |= has_byte_below(word, 0x20);
                }
                if found != 0 {
                    self.pos += (found.trailing_zeros() / 8) as usize;
                    break;
                }
                self.pos += 8;
            }
            match *self.bytes.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(plain);
                }
                b'\\' => {
                    plain = false;
                    self.pos += 2;
                }
                byte => {
                    plain &= !CONTROLS || byte >= 0x20;
                    self.pos += 1;
                }
            }
        }
    }

    /// In the object at `pos`, moves to the value of the first entry for `key`: `Some(false)`
    /// when there is none, `None` when the text is not an object.
    pub(crate) fn enter_member(&mut self, key: &str) -> Option<bool> {
        self.each_entry(|scanner, k| {
            if k == key {
                return Some(Flow::Stop);
            }
            scanner.skip_value()?;
            Some(Flow::Next)
        })
    }

    /// Steps through the list at `pos`, calling `item` at the start of each item, which must
    /// leave the scanner after it unless it stops there (`Flow::Stop`). `Some(true)` when
    /// stopped, `Some(false)` after the list's end, `None` when the text is not a list.
    pub(crate) fn each_item(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Option<Flow>,
    ) -> Option<bool> {
        self.skip_whitespace();
        if self.bytes.get(self.pos) != Some(&b'[') {
            return None;
        }
        self.pos += 1;
        self.skip_whitespace();
        if self.bytes.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Some(false);
        }
        loop {
            self.skip_whitespace();
            if item(self)? == Flow::Stop {
                return Some(true);
            }
            self.skip_whitespace();
            match self.bytes.get(self.pos)? {
                b',' => self.pos += 1,
                b']' => {
                    self.pos += 1;
                    return Some(false);
                }
                _ => return None,
            }
        }
    }

    /// Steps over the object at `pos`, keeping the text of the first entry for each of `keys`.
    /// `None` when the text is not an object.
    pub(crate) fn members<const N: usize>(
        &mut self,
        keys: [&str; N],
    ) -> Option<[Option<&'a str>; N]> {
        let mut found = [None; N];
        self.each_entry(|scanner, key| {
            let start = scanner.pos;
            scanner.skip_value()?;
            if let Some(i) = keys.iter().position(|k| *k == key) {
                found[i].get_or_insert(&scanner.text[start..scanner.pos]);
            }
            Some(Flow::Next)
        })?;
        Some(found)
    }

    /// Any value at `pos` (no whitespace before it), unread: to after it.
    pub(crate) fn skip_value(&mut self) -> Option<()> {
        match *self.bytes.get(self.pos)? {
            b'{' | b'[' => self.skip_nested(),
            b'"' => self.skip_string(),
            _ => {
                let start = self.pos;
                while let Some(b) = self.bytes.get(self.pos) {
                    if matches!(b, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
                        break;
                    }
                    self.pos += 1;
                }
                (self.pos > start).then_some(())
            }
        }
    }

    /// A list or an object, unread: to after its closing bracket.
    pub(crate) fn skip_nested(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match *self.bytes.get(self.pos)? {
                b'"' => self.skip_string()?,
                b'[' | b'{' => {
                    depth += 1;
                    self.pos += 1;
                }
                b']' | b'}' => {
                    self.pos += 1;
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        return Some(());
                    }
                }
                _ => self.pos += 1,
            }
        }
    }
}

/// The lowest byte of `word` equal to `byte` has its high bit set in the result (bytes above
/// it may too: only the lowest is exact).
fn has_byte(word: u64, byte: u8) -> u64 {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    let x = word ^ (ONES * byte as u64);
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// The lowest byte of `word` below `limit` (at most 0x80) has its high bit set in the result
/// (bytes above it may too: only the lowest is exact).
fn has_byte_below(word: u64, limit: u8) -> u64 {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    word.wrapping_sub(ONES * limit as u64) & !word & HIGHS
}

/// The text of the value at `path` (keys of nested objects, the first entry of each) in the
/// JSON text `text`, which serde has validated, scanning no further than that value:
/// `Some(None)` when a key is missing, `None` when the text on the way is not an object.
pub(crate) fn member_at<'a>(text: &'a str, path: &[&str]) -> Option<Option<&'a str>> {
    let mut scanner = Scanner::new(text);
    for key in path {
        if !scanner.enter_member(key)? {
            return Some(None);
        }
    }
    scanner.skip_whitespace();
    let start = scanner.pos;
    scanner.skip_value()?;
    Some(Some(&text[start..scanner.pos]))
}

/// Whether the JSON text `text` may hold the string `s` as a JSON string, whichever encoder
/// wrote it: a search for its quoted plain form when no encoder would escape any of its
/// characters, else `true` (Go escapes `<`, `>`, `&` and U+2028/U+2029, serde_json does not;
/// either may escape controls and quotes): the caller then reads the text properly. A search of
/// raw bytes for a decoded string is only ever a pre-filter.
pub(crate) fn may_contain_string(text: &str, s: &str) -> bool {
    let plain = !s
        .chars()
        .any(|c| matches!(c, '<' | '>' | '&' | '"' | '\\' | '\u{2028}' | '\u{2029}') || c < ' ');
    if !plain {
        return true;
    }
    let needle = format!("\"{s}\"");
    text.contains(&needle)
}

/// The texts of the items of the JSON list `text`; `None` when it is not a list.
#[cfg(test)]
pub(crate) fn elements(text: &str) -> Option<Vec<&str>> {
    let mut scanner = Scanner::new(text);
    let mut items = Vec::new();
    scanner.each_item(|scanner| {
        let start = scanner.pos;
        scanner.skip_value()?;
        items.push(&text[start..scanner.pos]);
        Some(Flow::Next)
    })?;
    Some(items)
}

/// A JSON string's value; `None` for anything else, and for what a JSON parser rejects in a
/// string (a control character).
pub(crate) fn string(text: &str) -> Option<Cow<'_, str>> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    Some(if inner.contains('\\') {
        Cow::Owned(serde_json::from_str::<String>(text).ok()?)
    } else if inner.bytes().any(|b| b < 0x20) {
        return None;
    } else {
        Cow::Borrowed(inner)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn a_member_is_found_without_reading_past_it() {
        let text = r#" { "a" : "x}\"{" , "b\u0041":[1,{"c":"]"}], "n": -1.5e3 ,"metadata":{"name":"w"}, "spec": oops"#;
        assert_eq!(
            member_at(text, &["metadata"]),
            Some(Some(r#"{"name":"w"}"#))
        );
        assert_eq!(member_at(text, &["n"]), Some(Some("-1.5e3")));
        assert_eq!(member_at(text, &["bA"]), Some(Some(r#"[1,{"c":"]"}]"#)));
        assert_eq!(member_at(r#"{"a":1}"#, &["b"]), Some(None));
        assert_eq!(member_at("{}", &["b"]), Some(None));
        assert_eq!(member_at("[1]", &["b"]), None);
        assert_eq!(member_at(text, &["metadata", "name"]), Some(Some(r#""w""#)));
        assert_eq!(member_at(text, &["metadata", "uid"]), Some(None));
        assert_eq!(member_at(text, &["a", "b"]), None);
        assert_eq!(
            elements(r#" [ 1, "],", {"a":[]} ,[] ] "#),
            Some(vec!["1", r#""],""#, r#"{"a":[]}"#, "[]"])
        );
        assert_eq!(elements("[]"), Some(vec![]));
        assert_eq!(elements("{}"), None);
        let mut scanner = Scanner::new(r#"{"b": {"x": 1}, "a": "1", "b": 2, "c": [3]}"#);
        assert_eq!(
            scanner.members(["a", "b", "z"]),
            Some([Some(r#""1""#), Some(r#"{"x": 1}"#), None])
        );
        assert_eq!(scanner.pos, scanner.bytes.len());
        assert_eq!(string(r#""a\"b\u0041""#).as_deref(), Some("a\"bA"));
        assert_eq!(string("12"), None);
    }

    proptest::proptest! {
        #[test]
        fn a_member_is_the_value_a_parse_gives(object in arbitrary_json()) {
            if let Value::Object(map) = &object {
                let text = object.to_string();
                for (key, value) in map {
                    let found = member_at(&text, &[key]).flatten().map(|t| serde_json::from_str::<Value>(t).unwrap());
                    proptest::prop_assert_eq!(found.as_ref(), Some(value));
                }
                proptest::prop_assert_eq!(member_at(&text, &["not a key of arbitrary_json"]), Some(None));
            }
        }
    }

    proptest::proptest! {
        /// Strings of any length with quotes, backslashes, control characters and multi-byte
        /// characters anywhere (across the eight-byte steps): the scanner ends each where
        /// JSON does, and reads its value as serde does.
        #[test]
        fn a_string_ends_where_json_says(text in "[a\"\\\\\n\u{1}é😀]{0,40}", pad in 0usize..9) {
            let quoted = serde_json::to_string(&text).unwrap();
            let json = format!("{}{quoted},1", " ".repeat(pad));
            let mut scanner = Scanner::new(&json);
            scanner.skip_whitespace();
            scanner.skip_string().unwrap();
            proptest::prop_assert_eq!(&json[pad..scanner.pos], quoted.as_str());
            let value = string(&quoted);
            proptest::prop_assert_eq!(value.as_deref(), Some(text.as_str()));
            // Read in one pass: the same value, the same end.
            let mut scanner = Scanner::new(&json);
            let read = scanner.string_value();
            proptest::prop_assert_eq!(read.as_deref(), Some(text.as_str()));
            proptest::prop_assert_eq!(scanner.pos, json.len() - 2);
        }

        /// A string's raw text between quotes, control characters unescaped included: the
        /// one-pass reads give what stepping over it and then reading its text give.
        #[test]
        fn a_string_is_read_in_one_pass_as_in_two(inner in "[a\\\\\"\\n\u{1}\u{1f} é😀\u{7f}]{0,24}", pad in 0usize..9) {
            let json = format!("{}\"{inner}\",1", " ".repeat(pad));
            let mut two = Scanner::new(&json);
            let by_two = two.value_text().and_then(string);
            let mut one = Scanner::new(&json);
            let by_one = one.string_value();
            proptest::prop_assert_eq!(&by_one, &by_two);
            if by_two.is_some() {
                proptest::prop_assert_eq!(one.pos, two.pos);
            }
            // A key: borrowed unless it has an escape, which serde reads.
            let at = &json[pad..];
            let mut stepped = Scanner::new(at);
            let expected = stepped.skip_string().and_then(|()| {
                let quoted = &at[..stepped.pos];
                let inner = &quoted[1..quoted.len() - 1];
                if inner.contains('\\') {
                    serde_json::from_str::<String>(quoted).ok().map(Cow::Owned)
                } else {
                    Some(Cow::Borrowed(inner))
                }
            });
            let mut scanner = Scanner::new(at);
            proptest::prop_assert_eq!(scanner.key(), expected);
        }
    }

    pub(crate) fn arbitrary_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-5i64..5).prop_map(Value::from),
            "[a-c\\\\\"\\[\\]{},:]{0,3}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                proptest::collection::btree_map("[a-c\\\"]{1,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
