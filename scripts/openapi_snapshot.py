#!/usr/bin/env python3
"""Writes core/src/schema/kubernetes-<version>-openapi-v2.json.gz: the definitions of an API server's
/openapi/v2 with descriptions removed, the schema helm-locker embeds for its built-in kinds.

    kubectl get --raw /openapi/v2 | scripts/openapi_snapshot.py 1.20

Run it against a control plane with no custom resources (tests/e2e/kube-testenv.sh up DIR).
The output is byte-for-byte reproducible for the same input (sorted keys, gzip without a time).
"""
import gzip
import json
import sys

KEEP_OUT = {"description", "example", "externalDocs"}


def strip(node):
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k not in KEEP_OUT}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def main():
    version = sys.argv[1] if len(sys.argv) > 1 else "1.20"
    doc = json.load(sys.stdin)
    definitions = strip(doc["definitions"])
    body = json.dumps({"definitions": definitions}, sort_keys=True, separators=(",", ":"))
    out = f"core/src/schema/kubernetes-{version}-openapi-v2.json.gz"
    with open(out, "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as gz:
            gz.write(body.encode())
    print(f"{out}: {len(definitions)} definitions, {len(body)} bytes of JSON", file=sys.stderr)


if __name__ == "__main__":
    main()
