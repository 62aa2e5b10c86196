#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs, taken from the recorded fixtures, into SEEDS_DIR/<target>/.

    python3 fuzz/seed.py /tmp/helm-locker-seeds

The committed corpora (fuzz/corpus/<target>/) are these seeds plus what libFuzzer found, minimized
with `-merge=1` (see docs/reliability.md).
"""
import base64
import gzip
import hashlib
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def write(out, target, data):
    if isinstance(data, str):
        data = data.encode()
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def release_values():
    """Every `data.release` value of the fixture Secrets (JSON and YAML files)."""
    for path in sorted((FIXTURES / "cluster-capture" / "releases").glob("*.json")):
        doc = json.loads(path.read_text())
        for item in doc.get("items", [doc]):
            yield path, item["data"]["release"]
    for path in sorted((FIXTURES / "helm3-style").glob("*.yaml")):
        for line in path.read_text().splitlines():
            if line.strip().startswith("release:"):
                yield path, line.split(":", 1)[1].strip()


def main():
    out = pathlib.Path(sys.argv[1])
    for path in sorted((FIXTURES / "cluster-capture" / "reviews").glob("*.json")):
        write(out, "review", path.read_bytes())
    for path in sorted((FIXTURES / "helm3-style").glob("*.yaml")):
        write(out, "release", path.read_bytes())
    for path in sorted((FIXTURES / "cluster-capture" / "releases").glob("*.json")):
        write(out, "release", path.read_bytes())
    quantities = {"0.5", "500m", "1Gi", "1073741824", "1e3", "1E2", ".5", "+2", "-1Ki",
                  "1.5Gi", "100Mi", "0", "2.000", "1n", "1u", "1k", "1M", "1G", "1T", "1P",
                  "1E", "1Ei", "12e-3", "0.1n"}
    for path, value in release_values():
        helm_layer = base64.b64decode(value)
        payload = base64.b64decode(helm_layer)
        release_json = gzip.decompress(payload) if payload[:3] == b"\x1f\x8b\x08" else payload
        for data in (value, helm_layer, payload, release_json):
            write(out, "release", data)
        release = json.loads(release_json)
        write(out, "manifest", release.get("manifest", ""))
        for doc in re.split(r"(?m)^---\s*$", release.get("manifest", "")):
            if doc.strip():
                write(out, "yaml", doc)
        for hook in release.get("hooks") or []:
            write(out, "manifest", hook.get("manifest", ""))
        for line in release.get("manifest", "").splitlines():
            key, _, value = line.strip().partition(":")
            if key in ("cpu", "memory", "storage", "ephemeral-storage") and value.strip():
                quantities.add(value.strip().strip('"'))
    # Shapes the block parser takes and shapes it must leave to the reference.
    for doc in ["a: |\n  text\n\n   more\n\n", "a: >-\n  one\n  two\n\n  three\n", "a: |-\n\nb: 2\n",
                "l:\n- x: 1\n  y: [a, 'b', \"c\", {d: [], e: {}}]\n-\n- - z\n", "k: \"\\u00e9\\x41\\t\"\nk: 'it''s'\n",
                "a: &x 1\nb: *x\n", "a: !!str 1\n", "<<: {a: 1}\n", "a: multi\n  line\n", "a: |+\n  keep\n",
                "a: |2\n    text\n", "a: >\n  folded\n    more\n", "a: 0755\nb: yes\n1: one\n", "a:\n\tb: 1\n",
                "? complex\n: key\n", "  indented: doc\n  second: 2\n", "a: b #c\nd: e#f\n"]:
        write(out, "yaml", doc)
    for q in sorted(quantities):
        write(out, "quantity", q)


if __name__ == "__main__":
    main()
