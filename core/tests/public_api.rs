//! Core's public API does not grow (or shrink) silently: the names `src/lib.rs` makes public
//! (its `pub use` re-exports, its `pub mod`s, any `pub` item defined there) must be exactly those
//! of `core/public-api.txt`. A change to the front door is then a change to that file too, seen
//! in review; the failure names what was added or removed.
//!
//! lib.rs is read as tokens, not compiled: comments and attributes are skipped, `pub use a::{B,
//! C as D};` gives `B` and `D` (groups nest and span lines), `pub mod m;` gives `mod m`, and a
//! glob (`pub use a::*;`) is refused, since it would hide what the API is.

use std::collections::BTreeSet;
use std::path::Path;

/// The names lib.rs makes public, or why they cannot be told.
fn public_names(lib: &str) -> Result<BTreeSet<String>, String> {
    let tokens = tokens(lib);
    let mut names = BTreeSet::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "{" => depth += 1,
            "}" => depth = depth.saturating_sub(1),
            // `pub(crate)`, `pub(super)`: not public.
            "pub" if depth == 0 && tokens.get(i + 1).map(String::as_str) != Some("(") => {
                i += 1;
                match tokens.get(i).map(String::as_str) {
                    Some("use") => {
                        let end = tokens[i..]
                            .iter()
                            .position(|t| t == ";")
                            .map(|p| i + p)
                            .ok_or("a `pub use` without `;`")?;
                        use_tree(&tokens[i + 1..end], &mut Vec::new(), &mut names)?;
                        i = end;
                    }
                    Some("mod") => {
                        names.insert(format!("mod {}", ident(&tokens, i + 1)?));
                        i += 1;
                    }
                    Some(
                        "fn" | "struct" | "enum" | "union" | "trait" | "type" | "const" | "static",
                    ) => {
                        let at = if tokens.get(i + 1).map(String::as_str) == Some("mut") {
                            i + 2
                        } else {
                            i + 1
                        };
                        names.insert(ident(&tokens, at)?.to_string());
                    }
                    other => return Err(format!("a `pub` item this test cannot read: {other:?}")),
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(names)
}

fn ident(tokens: &[String], at: usize) -> Result<&str, String> {
    match tokens.get(at) {
        Some(t) if t.starts_with(|c: char| c.is_alphabetic() || c == '_') => Ok(t),
        other => Err(format!("expected a name, found {other:?}")),
    }
}

/// Adds the names a use tree (`a::b::{C, d::E as F, self}`) brings in; `path` is the prefix.
fn use_tree(
    tokens: &[String],
    path: &mut Vec<String>,
    names: &mut BTreeSet<String>,
) -> Result<(), String> {
    let mut i = 0;
    let mut pushed = 0;
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("*") => return Err(format!("a glob re-export ({}::*)", path.join("::"))),
            Some("{") => {
                // The group's items, split at its top-level commas.
                let close = matching(tokens, i)?;
                let mut start = i + 1;
                let mut depth = 0;
                for j in i + 1..=close {
                    match tokens[j].as_str() {
                        "{" => depth += 1,
                        "}" if depth > 0 => depth -= 1,
                        "," | "}" if depth == 0 => {
                            if start < j {
                                use_tree(&tokens[start..j], path, names)?;
                            }
                            start = j + 1;
                        }
                        _ => {}
                    }
                }
                break;
            }
            Some(segment) => {
                ident(tokens, i)?;
                match tokens.get(i + 1).map(String::as_str) {
                    Some("::") => {
                        path.push(segment.to_string());
                        pushed += 1;
                        i += 2;
                    }
                    Some("as") => {
                        names.insert(ident(tokens, i + 2)?.to_string());
                        break;
                    }
                    None if segment == "self" => {
                        let module = path.last().ok_or("`self` at the root of a use")?;
                        names.insert(module.clone());
                        break;
                    }
                    None => {
                        names.insert(segment.to_string());
                        break;
                    }
                    Some(other) => return Err(format!("unexpected {other:?} in a use")),
                }
            }
            None => return Err("an empty use".into()),
        }
    }
    path.truncate(path.len() - pushed);
    Ok(())
}

fn matching(tokens: &[String], open: usize) -> Result<usize, String> {
    let mut depth = 0;
    for (j, t) in tokens.iter().enumerate().skip(open) {
        match t.as_str() {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return Ok(j);
                }
            }
            _ => {}
        }
    }
    Err("a `{` without its `}`".into())
}

/// Rust's tokens, roughly: names, `::`, and single punctuation; comments, strings and
/// attributes (`#[...]`, `#![...]`) left out.
fn tokens(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '#' && matches!(next, Some('[') | Some('!')) {
            // An attribute: up to its matching `]`.
            let mut depth = 0;
            while i < chars.len() {
                match chars[i] {
                    '[' => depth += 1,
                    ']' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && next == Some(':') {
            out.push("::".into());
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

#[test]
fn the_public_api_is_the_committed_snapshot() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(core.join("src/lib.rs")).unwrap();
    let public = public_names(&lib).unwrap_or_else(|e| panic!("core/src/lib.rs: {e}"));
    let snapshot = std::fs::read_to_string(core.join("public-api.txt")).unwrap();
    let listed: Vec<&str> = snapshot
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let listed_set: BTreeSet<String> = listed.iter().map(|l| l.to_string()).collect();
    let added: Vec<&String> = public.difference(&listed_set).collect();
    let removed: Vec<&String> = listed_set.difference(&public).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "core's public API changed.\n  added (public in core/src/lib.rs, not in \
         core/public-api.txt): {added:?}\n  removed (in core/public-api.txt, no longer public): \
         {removed:?}\nIf this is on purpose, update core/public-api.txt in the same commit (one \
         name per line, sorted). If not, keep the item pub(crate) or out of lib.rs's re-exports."
    );
    let sorted: Vec<&str> = public.iter().map(String::as_str).collect();
    assert_eq!(
        listed, sorted,
        "core/public-api.txt: keep one name per line, sorted (LC_ALL=C sort), no duplicates"
    );
}

#[test]
fn the_reader_takes_groups_renames_modules_and_refuses_globs() {
    let lib = r#"
//! pub use not::This;
#![forbid(unsafe_code)]
pub use a::{
    b::{C, D as E},
    f, // pub use not::That;
    g::self,
};
pub use h::I as J;
pub(crate) use k::L;
use m::N;
mod private;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
pub const LIMIT: usize = 1;
fn helper() { let _ = "pub use x::Y;"; }
"#;
    let names: Vec<String> = public_names(lib).unwrap().into_iter().collect();
    assert_eq!(
        names,
        ["C", "E", "J", "LIMIT", "f", "g", "mod test_util"].map(String::from)
    );
    assert!(public_names("pub use a::*;").is_err());
    assert!(public_names("pub use a::{b, c::*};").is_err());
}
