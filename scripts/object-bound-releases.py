#!/usr/bin/env python3
"""Writes release Secrets (as `kubectl get secret -o json` prints them) for the object-count
worst case of docs/performance.md: RELEASES deployed releases in one namespace, each of the
same OBJECTS ConfigMaps with BYTES of data each, as a tenant who may create Secrets there
can write them (each Secret under the API server's 1 MiB).

  scripts/object-bound-releases.py DIR RELEASES OBJECTS BYTES
"""
import base64, gzip, json, os, sys

out, releases, objects, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(out, exist_ok=True)
filler = "x" * size
manifest = "".join(
    f"---\n# Source: many/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\ndata:\n  v: {filler}\n"
    for i in range(objects))
for r in range(releases):
    name = f"many{r}"
    body = {"name": name, "namespace": "team", "version": 1,
            "info": {"status": "deployed", "description": "Install complete"},
            "chart": {"metadata": {"name": "many", "version": "1.0.0"}}, "manifest": manifest}
    helm = base64.b64encode(gzip.compress(json.dumps(body).encode(), 9))
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
              "metadata": {"name": f"sh.helm.release.v1.{name}.v1", "namespace": "team",
                           "labels": {"owner": "helm", "name": name, "status": "deployed", "version": "1"}},
              "data": {"release": base64.b64encode(helm).decode()}}
    text = json.dumps(secret)
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        f.write(text)
    print(f"{name}: manifest {len(manifest)} bytes, Secret data {len(secret['data']['release']) * 3 // 4} bytes",
          file=sys.stderr)
