#!/usr/bin/env python3
"""Fails when the files of a crate import each other in a circle.

A file is a module (`core/src/index.rs` is `crate::index`, `core/src/ownership/walk.rs` is
`crate::ownership::walk`); file A imports file B when A's code (tests left out) names a path into
B: `use crate::b::...`, `crate::b::x` in an expression, `super::b::x` or `self::b::x`, a `pub use`
of a child included (a module that re-exports a child's name depends on that child). A path is
taken to the deepest module file it reaches. A child naming its own parent's items (`super::x`)
is no arrow: the child is a part of its parent (as farm-studio draws the house). Circles are reported with the names that tie each
arrow, so the fix is where the report points. Run by scripts/test.sh for both crates:

    python3 scripts/check-imports.py core/src src
"""

import os
import re
import sys

# A path that starts at the crate, at the parent or at this module, to its last `::`-separated
# segment; group braces (`{a, b::c}`) are expanded by `expand` below.
PATH = re.compile(r"\b(crate|super|self)((?:::(?:[A-Za-z_]\w*|\{[^;]*?\}))+)")


def modules(src):
    """{module path (tuple): file} for every .rs file under `src` (lib.rs/main.rs: the root)."""
    found = {}
    for dirpath, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), src)[:-3].split(os.sep)
            if rel[-1] == "mod":
                rel = rel[:-1]
            if rel in (["lib"], ["main"]):
                rel = []
            if "tests" in rel or (rel and rel[-1].startswith("test")):
                continue
            found[tuple(rel)] = os.path.join(dirpath, name)
    return found


def without_tests(text):
    """The code without `#[cfg(test)]` items (a test module's braces counted), nor comments."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        j = text.find("{", m.end())
        semi = text.find(";", m.end())
        if j < 0 or (0 <= semi < j):
            i = semi + 1 if semi >= 0 else len(text)
            continue
        depth = 0
        for k in range(j, len(text)):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            if depth == 0:
                i = k + 1
                break
        else:
            i = len(text)
    out.append(text[i:])
    return "".join(out)


def expand(rest):
    """`::a::{b, c::d}` -> [[a, b], [a, c, d]] (nested groups too)."""
    rest = rest.strip().lstrip(":")
    if not rest:
        return [[]]
    if rest.startswith("{"):
        depth, parts, start = 0, [], 1
        for k, c in enumerate(rest):
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    parts.append(rest[start:k])
                    break
            elif c == "," and depth == 1:
                parts.append(rest[start:k])
                start = k + 1
        out = []
        for part in parts:
            if part.strip():
                out.extend(expand("::" + part.strip()))
        return out
    head, _, tail = rest.partition("::")
    head = head.split(" as ")[0].strip()
    return [[head] + more for more in expand("::" + tail)] if tail else [[head]]


def arrows(mods):
    """{(from module, to module): names} of the imports between files."""
    found = {}
    for here, path in mods.items():
        with open(path) as f:
            text = without_tests(f.read())
        is_dir_module = os.path.basename(path) in ("mod.rs", "lib.rs", "main.rs")
        for m in PATH.finditer(text):
            start = m.group(1)
            if start == "crate":
                base = []
            elif start == "self":
                base = list(here) if is_dir_module or not here else list(here)
            else:
                base = list(here[:-1])
            for segments in expand(m.group(2)):
                full = base + [s for s in segments if s not in ("self", "*")]
                target = None
                for n in range(len(full), -1, -1):
                    if tuple(full[:n]) in mods:
                        target = tuple(full[:n])
                        break
                # A module's own ancestors are not arrows: a child module is a part of its
                # parent, and naming the parent's items (`super::x`) is how Rust lets it.
                if target is None or here[:len(target)] == target:
                    continue
                name = "::".join(full[len(target):]) or "(module)"
                found.setdefault((here, target), set()).add(name)
        # `mod child; pub use child::x` counts through the `self`/plain path below.
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([a-z_]\w*)((?:::[^;]*)?);", text):
            first = m.group(1)
            if first in ("crate", "super", "self"):
                continue
            child = tuple(list(here) + [first])
            if child in mods:
                found.setdefault((here, child), set()).add("::".join([first]) + m.group(2).strip())
        for m in re.finditer(r"(?m)^\s*use\s+([a-z_]\w*)::", text):
            child = tuple(list(here) + [m.group(1)])
            if m.group(1) not in ("crate", "super", "self", "std", "core") and child in mods:
                found.setdefault((here, child), set()).add(m.group(1) + "::...")
    return found


def circles(mods, edges):
    """The strongly connected groups of more than one file (Tarjan)."""
    graph = {m: [] for m in mods}
    for a, b in edges:
        graph[a].append(b)
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(roots):
    failed = False
    for src in roots:
        mods = modules(src)
        edges = arrows(mods)
        found = circles(mods, edges)
        name = lambda m: "::".join(m) or "(root)"
        for group in found:
            failed = True
            members = set(group)
            print(f"{src}: a circle of {len(group)} files: {', '.join(name(m) for m in group)}", file=sys.stderr)
            for (a, b), names in sorted(edges.items()):
                if a in members and b in members:
                    print(f"  {name(a)} -> {name(b)}: {', '.join(sorted(names))}", file=sys.stderr)
        if not found:
            print(f"{src}: {len(mods)} files, {len(edges)} imports between them, no circle")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["core/src", "src"]))
