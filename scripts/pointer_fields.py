#!/usr/bin/env python3
"""The pointer scalar fields of Kubernetes' built-in kinds, read from their Go types.

The API server encodes a built-in kind's Go struct with `omitempty`: a non-pointer field at its
zero value (`hostNetwork: false`, `initialDelaySeconds: 0`, `value: ""`) is left out of the
stored object, and the locker counts a chart's zero there equal to a stored absence. A *pointer*
field (`allowPrivilegeEscalation *bool`, `runAsUser *int64`, `hostUsers *bool`) keeps its zero,
and its absence means the default, often the less safe one: the locker compares those strictly.
The OpenAPI document does not tell the two apart, so this script reads the Go types.

Usage:
    scripts/pointer_fields.py ROOT... > core/src/schema/pointer-fields.txt
    scripts/pointer_fields.py --check core/src/schema/pointer-fields.txt ROOT...

Each ROOT is a `k8s.io` directory holding the modules `api`, `apimachinery`,
`apiextensions-apiserver` and `kube-aggregator` (any of them may be missing), laid out as
Kubernetes' `staging/src/k8s.io` is. The output is the union over the roots (a field's
pointer-ness is part of the API's wire contract and does not change between versions). The
committed table was made from:

  - Kubernetes 1.20.2, Debian bookworm's source package `kubernetes` (the one
    tests/e2e/kube-testenv.sh builds): `apt-get source --download-only kubernetes`, then
    `tar xzf kubernetes_*.orig.tar.gz` and ROOT = `kubernetes-*/staging/src/k8s.io`;
  - Kubernetes 1.36.2: github.com/kubernetes/{api,apimachinery,apiextensions-apiserver,
    kube-aggregator} at tag v0.36.2 (`git archive v0.36.2`), each in ROOT/<module>.

One line per Go type that has any: its OpenAPI definition name (`io.k8s.api.core.v1.PodSpec`,
as `/openapi/v2` names it) and the JSON names of its pointer scalar fields, sorted.
"""

import os
import re
import sys

MODULES = ["api", "apimachinery", "apiextensions-apiserver", "kube-aggregator"]
# A served API package: `core/v1`, `apps/v1beta2`, `pkg/apis/meta/v1`.
VERSION_DIR = re.compile(r"^v\d+((alpha|beta)\d+)?$")
SKIP_DIRS = {"testdata", "test", "examples", "vendor", "hack", "artifacts", "third_party"}
GO_SCALARS = {
    "bool", "string", "int", "int8", "int16", "int32", "int64",
    "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
}
STRUCT_START = re.compile(r"^type\s+(\w+)\s+struct\s*\{\s*$")
NAMED_SCALAR = re.compile(r"^type\s+(\w+)\s+(\w+)\s*(//.*)?$")
POINTER_FIELD = re.compile(r"^\s+(\w+)\s+\*(\w+)\s+`[^`]*\bjson:\"([^\",]*)[^\"]*\"")


def packages(root):
    """(definition prefix, directory) of every served API package under a k8s.io root."""
    for module in MODULES:
        base = os.path.join(root, module)
        if not os.path.isdir(base):
            continue
        for directory, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            rel = os.path.relpath(directory, base)
            if rel == "." or not VERSION_DIR.match(os.path.basename(directory)):
                continue
            if not any(f.endswith(".go") for f in files):
                continue
            yield "io.k8s." + module + "." + rel.replace(os.sep, "."), directory


def go_files(directory):
    for name in sorted(os.listdir(directory)):
        if name.endswith(".go") and not name.endswith("_test.go") and "generated" not in name:
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                yield f.read().splitlines()


def pointer_fields(directory):
    """Go type name -> JSON names of its pointer fields to a scalar (built-in or this
    package's `type X string`)."""
    files = list(go_files(directory))
    scalars = set(GO_SCALARS)
    for lines in files:
        for line in lines:
            m = NAMED_SCALAR.match(line)
            if m and m.group(2) in GO_SCALARS:
                scalars.add(m.group(1))
    out = {}
    for lines in files:
        current = None
        for line in lines:
            if current is None:
                m = STRUCT_START.match(line)
                if m:
                    current = m.group(1)
                continue
            if line.startswith("}"):
                current = None
                continue
            m = POINTER_FIELD.match(line)
            if m and m.group(2) in scalars and m.group(3) not in ("", "-"):
                out.setdefault(current, set()).add(m.group(3))
    return out


def table(roots):
    union = {}
    for root in roots:
        for prefix, directory in packages(root):
            for go_type, fields in pointer_fields(directory).items():
                union.setdefault(prefix + "." + go_type, set()).update(fields)
    return "".join(
        name + " " + " ".join(sorted(fields)) + "\n" for name, fields in sorted(union.items())
    )


def main(argv):
    check = None
    if argv[:1] == ["--check"]:
        if len(argv) < 3:
            sys.exit(__doc__)
        check, argv = argv[1], argv[2:]
    if not argv:
        sys.exit(__doc__)
    for root in argv:
        if not os.path.isdir(os.path.join(root, "api")):
            sys.exit(f"{root}: no `api` module here (expected a k8s.io directory)")
    text = table(argv)
    if check is None:
        sys.stdout.write(text)
        return
    with open(check, encoding="utf-8") as f:
        committed = f.read()
    if committed != text:
        import difflib

        sys.stdout.writelines(
            difflib.unified_diff(
                committed.splitlines(True), text.splitlines(True), check, "generated"
            )
        )
        sys.exit(f"{check} differs from the Go types read")
    print(f"{check}: {len(text.splitlines())} types, as the Go types say")


if __name__ == "__main__":
    main(sys.argv[1:])
