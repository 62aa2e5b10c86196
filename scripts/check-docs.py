#!/usr/bin/env python3
"""Checks the book (docs/) and README.md: every relative link points at a file that exists (and
at a heading that exists, for links with an #anchor), and every repository path named in
backticks (`src/server/mod.rs`, `tests/e2e/test_trust.py`) exists. And the lists the docs keep
of what the code defines, read from the code with regexes:

- docs/operations.md's metrics table has a row for every row of src/metrics.rs's TABLE (the
  metrics /metrics exports), as /metrics names it (`helm_locker_`, `_total` for counters, the
  `{labels}`), with its kind, and no other; a counter by result names each of its values
  (`result_values!` in src/metrics.rs) in backquotes in its row;
- its Events table has a row for every reason of src/events.rs's `reasons!` (the Events helm-locker
  writes), with its type (Normal, Warning) and action, and no other;
- its alert table names every alert of the chart's PrometheusRule, and no other;
- docs/cli.md's flag table has a row with each `serve` flag and its environment variable
  (clap's `env = ...` in src/cli.rs), and every HELM_LOCKER_* variable the docs name exists
  in src/ (or is one the test scripts read, such as HELM_LOCKER_BIN);
- docs/design.md's "Where the code is" names every module: each `mod NAME;` of core/src/lib.rs
  and src/lib.rs, and of the shell's folder modules one level down (src/*/mod.rs), by its path
  in backticks, as a file (`src/controller/reverter.rs`) or a folder (`src/controller/reverter/`);
  and every file: each `.rs` file under core/src/ and src/ is named by its path in backticks
  (deeper rooms too: `core/src/decide/find.rs`, `src/controller/reverter/plan.rs`), but for the
  crate roots (`lib.rs`, `main.rs`) and the files of test modules (`#[cfg(test)] mod tests;`).

A module's path may name either form: a backticked `X.rs` that is gone is accepted while `X/`
exists, and `X/` while `X.rs` does, so a module moving between a file and a folder does not
break the book (links are still checked as written).

Exits 1 naming each problem. Run by scripts/test.sh."""

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


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def first_cells(path):
    """The backticked name that opens each row of the Markdown tables in `path` (`{labels}` cut)."""
    return set(re.findall(r"(?m)^\s*\| `([^`{]+)", read(path)))


def differences(what, code, docs, where, table):
    """`code` and `docs` name the same things, or each name in only one is a problem."""
    missing = [f"{where}: {what} {n} is in the code but not in the {table}" for n in code - docs]
    extra = [f"{where}: {what} {n} is in the {table} but not in the code" for n in docs - code]
    return sorted(missing) + sorted(extra)


def module_problems():
    """The modules design.md's "Where the code is" must name (see the docstring at the top)."""
    roots = ["core/src/lib.rs", "src/lib.rs"]
    roots += sorted(os.path.relpath(os.path.join(ROOT, "src", d, "mod.rs"), ROOT)
                    for d in os.listdir(os.path.join(ROOT, "src"))
                    if os.path.isfile(os.path.join(ROOT, "src", d, "mod.rs")))
    declared = []
    for root in roots:
        # `mod name;` (any visibility, any attribute) declares a module in a file of its own;
        # `#[cfg(test)] mod tests;` is a test module, not part of the design.
        for attrs, name in re.findall(r"(?m)((?:^\s*#\[[^\]]*\]\s*\n)*)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;",
                                      read(root)):
            if "#[cfg(test)]" not in attrs:
                declared.append((os.path.dirname(root), name))
    if not declared:
        return ["core/src/lib.rs, src/lib.rs: no `mod` declarations found; update scripts/check-docs.py"]
    design = read("docs/design.md")
    section = re.search(r"(?ms)^## Where the code is\n(.*?)(?=^## |\Z)", design)
    if not section:
        return ['docs/design.md: no section "## Where the code is"']
    named = {n.rstrip(".,;:)") for n in CODE.findall(section.group(1))}
    problems = []
    for folder, name in declared:
        forms = {f"{folder}/{name}.rs", f"{folder}/{name}/", f"{folder}/{name}/mod.rs"}
        if not forms & named:
            problems.append(f'docs/design.md: "Where the code is" does not name module {folder}/{name}.rs '
                            f"(or {folder}/{name}/), declared in {folder}/"
                            f'{"lib.rs" if folder.endswith("src") else "mod.rs"}')
    return problems


def file_problems():
    """The files design.md's "Where the code is" must name (see the docstring at the top)."""
    files, tests = [], set()
    for top in ("core/src", "src"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for name in sorted(names):
                if not name.endswith(".rs"):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), ROOT)
                files.append(path)
                # A test module's file: `#[cfg(test)] mod name;` in this file names
                # name.rs beside it (a mod.rs or a crate root) or under its own folder.
                here = os.path.dirname(path)
                own = here if name in ("mod.rs", "lib.rs", "main.rs") else os.path.join(here, name[:-3])
                for attrs, module in re.findall(
                        r"(?m)((?:^\s*#\[[^\]]*\]\s*\n)*)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;",
                        read(path)):
                    if "#[cfg(test)]" in attrs:
                        tests.add(os.path.join(own, f"{module}.rs"))
                        tests.add(os.path.join(own, module, "mod.rs"))
    design = read("docs/design.md")
    section = re.search(r"(?ms)^## Where the code is\n(.*?)(?=^## |\Z)", design)
    if not section:
        return []
    named = {n.rstrip(".,;:)") for n in CODE.findall(section.group(1))}
    roots = ("lib.rs", "main.rs")
    return [f'docs/design.md: "Where the code is" does not name the file {path}'
            for path in files
            if path not in named and path not in tests and os.path.basename(path) not in roots]


def exists(path):
    """A repository path named in the docs exists; a module's other form counts (see the top)."""
    full = os.path.join(ROOT, path)
    if os.path.exists(full):
        return True
    if path.endswith(".rs"):
        return os.path.isdir(full[:-3])
    if path.endswith("/"):
        return os.path.isfile(full.rstrip("/") + ".rs")
    return False


def list_problems():
    """The metrics, alerts and flags the docs list, against the code that defines them."""
    problems = []
    # Metrics: the rows of src/metrics.rs's TABLE (`Row { name: "x", kind: Kind::Counter,
    # labels: &["a", "b"], ... }`), each a row of docs/operations.md's metrics table as /metrics
    # names it (`helm_locker_x_total{a,b}`: a counter with `_total`) with its kind beside it.
    code = read("src/metrics.rs")
    rows = re.findall(r'Row \{\s*name: "(\w+)",\s*kind: Kind::(\w+),\s*labels: &\[([^\]]*)\],\s*results: ', code)
    if not rows or len(rows) != code.count("Row {") - 1:
        problems.append("src/metrics.rs: a row of TABLE this script cannot read; update it")
    metrics = set()
    for name, kind, labels in rows:
        labels = ",".join(re.findall(r'"(\w+)"', labels))
        metrics.add(f"helm_locker_{name}" + ("_total" if kind == "Counter" else "")
                    + (f"{{{labels}}}" if labels else "") + f" {kind.lower()}")
    documented = {f"{name} {kind}" for name, kind in re.findall(
        r"(?m)^\s*\| `(helm_locker_[^`]+)` \| (\w+) \|", read("docs/operations.md"))}
    problems += differences("metric", metrics, documented, "docs/operations.md", "metrics table")
    # A counter by result (`results: <X as ResultValue>::NAMES`): each value of `result_values!
    # { X { Variant = "value", ... } }` is named, in backquotes, in that metric's docs row.
    declared = {name: re.findall(r'= "(\w+)"', body) for name, body in re.findall(
        r"result_values! \{.*?\n    (\w+) \{(.*?)\n    \}", code, re.S)}
    rows_text = read("docs/operations.md")
    for name, values in re.findall(r'name: "(\w+)",[^}]*?results: <(\w+) as ResultValue>::NAMES', code, re.S):
        if values not in declared:
            problems.append(f"src/metrics.rs: {name}'s result values {values} are not declared by result_values!")
            continue
        row = re.search(rf"(?m)^\s*\| `helm_locker_{name}_total\{{result\}}` \|.*$", rows_text)
        for value in declared[values]:
            if not row or f"`{value}`" not in row.group(0):
                problems.append(f"docs/operations.md: helm_locker_{name}_total's row does not name the result `{value}`")
    # Events: each `Reason: Type, "Action";` of `reasons! { ... }` in src/events.rs, a row
    # `| `Reason` | Type | `Action` |` of docs/operations.md's Events table.
    block = re.search(r"(?ms)^reasons! \{\n(.*?)^\}", read("src/events.rs"))
    declared = re.findall(r'(?m)^\s*(\w+): (\w+), "(\w+)";', block.group(1)) if block else []
    if not declared or len(declared) != len(re.findall(r"(?m)^\s*\w+:", block.group(1))):
        problems.append("src/events.rs: a reason of reasons! this script cannot read; update it")
    events = {f"{reason} {type_} {action}" for reason, type_, action in declared}
    documented = {" ".join(row) for row in re.findall(
        r"(?m)^\s*\| `(\w+)` \| (Normal|Warning) \| `(\w+)` \|", rows_text)}
    problems += differences("Event", events, documented, "docs/operations.md", "Events table")
    # Alerts: `- alert: Name` in the chart's PrometheusRule.
    rules = read("charts/helm-locker/templates/prometheusrule.yaml")
    alerts = set(re.findall(r"(?m)^\s*- alert: (\w+)", rules))
    documented = {n for n in first_cells("docs/operations.md") if n.startswith("HelmLocker")}
    problems += differences("alert", alerts, documented, "docs/operations.md", "alert table")
    # Flags: each `#[arg(... env = "HELM_LOCKER_X" ...)]` and the field under it (the flag is
    # `long = "..."`, else the field's name), on one row of docs/cli.md's flag table.
    app = read("src/cli.rs")
    rows = [line for line in read("docs/cli.md").splitlines() if line.startswith("| `--")]
    args = re.findall(r"#\[arg\((.*?)\)\]\s*(?:pub(?:\(crate\))?\s+)?(\w+)\s*:", app, re.S)
    flags = []
    for attrs, field in args:
        env = re.search(r'\benv\s*=\s*"(\w+)"', attrs)
        long = re.search(r'\blong\s*=\s*"([\w-]+)"', attrs)
        flag = "--" + (long.group(1) if long else field.replace("_", "-"))
        if env:
            flags.append((flag, env.group(1)))
    if len(flags) != len(re.findall(r'\benv\s*=', app)):
        problems.append("src/cli.rs: an environment variable this script cannot read; update it")
    for flag, env in flags:
        if not any(f"`{flag}`" in row and f"`{env}`" in row for row in rows):
            problems.append(f"docs/cli.md: no row of the flag table names `{flag}` with `{env}`")
    # Every HELM_LOCKER_* the docs name is read by the code (or by the test scripts:
    # HELM_LOCKER_BIN).
    known = set()
    for folder in ("src", "scripts", "tests/e2e"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if name.endswith((".rs", ".sh", ".py")):
                    with open(os.path.join(dirpath, name)) as f:
                        known.update(re.findall(r"HELM_LOCKER_\w+", f.read()))
    for doc in documents():
        with open(doc) as f:
            for name in sorted(set(re.findall(r"HELM_LOCKER_\w+", f.read())) - known):
                problems.append(f"{os.path.relpath(doc, ROOT)}: names {name}, which no code reads")
    return problems


def name_problems():
    """The chart's objects as the docs name them: `<fullname>-x` (the chart's helm-locker.fullname,
    which is not the release name: a `kubectl get` by `<release>-x` answers NotFound), and only
    suffixes the chart's templates really give."""
    templates = ""
    folder = os.path.join(ROOT, "charts", "helm-locker", "templates")
    for name in sorted(os.listdir(folder)):
        templates += read(os.path.join("charts", "helm-locker", "templates", name))
    given = set(re.findall(r'(?:\$fullname|include "helm-locker\.fullname" \.(?:root)? ?)\s*}}-([a-z-]+)', templates))
    given |= set(re.findall(r'printf "%s-([a-z-]+)" (?:\$fullname|\(include "helm-locker\.fullname)', templates))
    problems = []
    for doc in list(documents()) + [os.path.join(ROOT, "charts", "helm-locker", "values.yaml")]:
        with open(doc) as f:
            text = f.read()
        where = os.path.relpath(doc, ROOT)
        if re.search(r"<release>-(?!helm-locker)", text):
            problems.append(f"{where}: names a chart object `<release>-...`; the chart names them `<fullname>-...`")
        for suffix in sorted(set(re.findall(r"<fullname>-([a-z-]*[a-z])", text)) - given):
            problems.append(f"{where}: names `<fullname>-{suffix}`, which no template of the chart makes")
    return problems


def sizing_problems():
    """The memory sizing, fitted to a measured curve in docs/performance.md, is said in five
    places: each says what the chart's comment on `resources` says (the share of the newest
    manifests held at rest, the MiB on top, and how many releases of 30 objects the default
    limit fits), so a new measurement cannot leave one behind."""
    values = read(os.path.join("charts", "helm-locker", "values.yaml"))
    rest = re.search(r"holds about ([\d.]+)x the bytes of every release's newest manifest, plus about (\d+) MiB", values)
    fits = re.search(r"the defaults fit about ([\d,]+) such", values)
    if not rest or not fits:
        return ["charts/helm-locker/values.yaml: the comment on `resources` no longer says "
                "\"holds about Nx the bytes ..., plus about N MiB\" and \"the defaults fit about N such\""]
    share, base, reach = f"{rest.group(1)}x", f"{rest.group(2)} MiB", f"about {fits.group(1)}"
    said = {"README.md": (share, base, reach), "docs/install.md": (share, base, reach),
            "docs/troubleshooting.md": (reach,), "docs/performance.md": (share, base, reach)}
    problems = []
    for path, figures in said.items():
        text = re.sub(r"\s+", " ", read(path))
        for figure in figures:
            if figure not in text:
                problems.append(f"{path}: does not say the chart's sizing figure `{figure}` "
                                "(charts/helm-locker/values.yaml, the comment on `resources`)")
    return problems


def main():
    broken = list_problems() + module_problems() + file_problems() + name_problems() + sizing_problems()
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
            if not exists(path):
                broken.append(f"{where}: names {name}, which does not exist")
    for line in broken:
        print(line, file=sys.stderr)
    if broken:
        print(f"{len(broken)} broken links, paths or lists in the docs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
