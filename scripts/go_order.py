"""Rewrites AdmissionReviews with their keys in the order kube-apiserver writes them (Go's
struct field order; the recorded fixtures were saved with sorted keys), compact as on the wire.

    python3 scripts/go_order.py IN_DIR OUT_DIR
"""

import json
import os
import sys

REVIEW = ["kind", "apiVersion", "request"]
REQUEST = ["uid", "kind", "resource", "subResource", "requestKind", "requestResource",
           "requestSubResource", "name", "namespace", "operation", "userInfo", "object", "oldObject",
           "dryRun", "options"]

# metav1.GroupVersionKind and GroupVersionResource, authenticationv1.UserInfo.
NESTED = {"kind": ["group", "version", "kind"], "requestKind": ["group", "version", "kind"],
          "resource": ["group", "version", "resource"],
          "requestResource": ["group", "version", "resource"],
          "userInfo": ["username", "uid", "groups", "extra"]}


def ordered(d, order):
    return {k: d[k] for k in order if k in d} | {k: v for k, v in d.items() if k not in order}


def main(src, dst):
    os.makedirs(dst, exist_ok=True)
    for name in sorted(os.listdir(src)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(src, name)) as f:
            review = json.load(f)
        review = ordered(review, REVIEW)
        if isinstance(review.get("request"), dict):
            request = ordered(review["request"], REQUEST)
            for key, order in NESTED.items():
                if isinstance(request.get(key), dict):
                    request[key] = ordered(request[key], order)
            review["request"] = request
        with open(os.path.join(dst, name), "w") as f:
            json.dump(review, f, separators=(",", ":"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
