#!/usr/bin/env python3
"""Checks the book (docs/) and README.md: every relative link points at a file that exists (and
at a heading that exists, for links with an #anchor), and every repository path named in
backticks (`src/server/mod.rs`, `tests/e2e/test_trust.py`) exists. Exits 1 naming each broken
one. Run by scripts/test.sh."""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH_PREFIXES = ("core/", "src/", "tests/", "scripts/", "charts/", "certs-gen/", "webhook-config/",
                 "webhook-config-1.28/", "fuzz/", "docs/", "examples/", "benches/", ".ci/")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")


def slug(heading):
    """GitHub's and mdBook's anchor of a heading."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    with open(path) as f:
        text = re.sub(r"(?ms)^```.*?^```", "", f.read())
    return {slug(h) for h in re.findall(r"(?m)^#{1,6} (.+)$", text)}


def documents():
    yield os.path.join(ROOT, "README.md")
    for dirpath, _, files in os.walk(os.path.join(ROOT, "docs")):
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(dirpath, name)


def main():
    broken = []
    for doc in documents():
        with open(doc) as f:
            text = f.read()
        where = os.path.relpath(doc, ROOT)
        prose = re.sub(r"(?ms)^```.*?^```", "", text)
        for target in LINK.findall(prose):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            path = os.path.normpath(os.path.join(os.path.dirname(doc), file)) if file else doc
            if not os.path.exists(path):
                broken.append(f"{where}: link to {target}: no such file")
            elif anchor and path.endswith(".md") and anchor not in anchors(path):
                broken.append(f"{where}: link to {target}: no such heading")
        for name in CODE.findall(prose):
            name = name.rstrip(".,;:)")
            if not name.startswith(PATH_PREFIXES) or any(c in name for c in "*{}<>$"):
                continue
            path = name.split(":")[0].split("#")[0]
            if not os.path.exists(os.path.join(ROOT, path)):
                broken.append(f"{where}: names {name}, which does not exist")
    for line in broken:
        print(line, file=sys.stderr)
    if broken:
        print(f"{len(broken)} broken links or paths in the docs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
