#!/usr/bin/env python3
"""Runs the no-cluster blocks of README.md ("Try it without a cluster"), docs/try-it.md and
docs/cli.md's owned-fields example as written, from the repository's root, and fails unless each
prints what the page says (the denial; no difference from Helm's managedFields).

A page that tells a newcomer to run a command is a claim that the command works; this keeps it
true. Run by scripts/test.sh after the unit tests (the debug build is then at hand, so each
`cargo run -q` only links). No cluster, no network: the blocks read examples/releases and a
review recorded on a real API server.

    python3 scripts/run-doc-blocks.py
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DENIAL = "Deployment shop/shop-web is locked by Helm release shop/shop (revision 2, deployed)"


def sh_blocks(path, section=None):
    """The ```sh blocks of a page (only those of `section`, a `## ` heading, when given)."""
    with open(os.path.join(ROOT, path)) as f:
        text = f.read()
    if section is not None:
        start = text.index(f"## {section}\n")
        end = text.find("\n## ", start + 1)
        text = text[start:end if end >= 0 else len(text)]
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def run(block, timeout=900):
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=ROOT, capture_output=True,
                         text=True, timeout=timeout)
    if out.returncode != 0:
        sys.exit(f"this block failed ({out.returncode}):\n{block}\n{out.stdout}{out.stderr}")
    return out.stdout


def assert_denied(block, stdout):
    """The block printed one AdmissionReview that refuses the write with the page's message."""
    try:
        response = json.loads(stdout.strip().splitlines()[-1])["response"]
    except (IndexError, KeyError, ValueError) as e:
        sys.exit(f"this block printed no AdmissionReview ({e}):\n{block}\n{stdout}")
    if response.get("allowed") is not False or response.get("status", {}).get("code") != 403 \
            or DENIAL not in response.get("status", {}).get("message", ""):
        sys.exit(f"this block did not print the denial:\n{block}\n{stdout}")


def readme():
    (block,) = sh_blocks("README.md", "Try it without a cluster")
    assert_denied(block, run(block))
    print("README.md: the no-cluster block prints the denial")


def try_it():
    serve, curl, review = sh_blocks("docs/try-it.md")
    assert "serve" in serve and "curl" in curl and "review" in review, "try-it.md's blocks moved"
    server = subprocess.Popen(["bash", "-euo", "pipefail", "-c", "exec " + serve.strip()], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        admin = re.search(r"--admin-addr (\S+)", serve).group(1)
        deadline = time.monotonic() + 900
        while True:
            if server.poll() is not None:
                sys.exit(f"try-it.md's server ended ({server.returncode}):\n{server.stderr.read()}")
            try:
                with urllib.request.urlopen(f"http://{admin}/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit("try-it.md's server was not ready within 15 minutes")
            time.sleep(0.5)
        assert_denied(curl, run(curl, timeout=60))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    assert_denied(review, run(review))
    print("docs/try-it.md: the server answers the recorded review with the denial; review prints it")


def owned_fields():
    (block,) = [b for b in sh_blocks("docs/cli.md") if "owned-fields" in b]
    lines = [json.loads(line) for line in run(block).splitlines() if line.strip()]
    differ = [line["object"] for line in lines if line["missing"] or line["extra"]]
    if len(lines) != 6 or differ:
        sys.exit(f"docs/cli.md's owned-fields example: {len(lines)} objects, differing: {differ}")
    print("docs/cli.md: owned-fields agrees with Helm's managedFields on the committed example")


if __name__ == "__main__":
    readme()
    try_it()
    owned_fields()
