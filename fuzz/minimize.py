#!/usr/bin/env python3
"""Picks a small committed corpus from a fuzzing run's corpus.

    python3 fuzz/minimize.py BINARY RUN_CORPUS... --out fuzz/corpus/TARGET [--max 40]

libFuzzer's own minimization (-set_cover_merge=1) keeps every input that covers an edge no other
kept input covers; for targets that parse JSON or YAML that is still hundreds of inputs, most of
them for corners of serde_json or the YAML parser. This keeps at most --max inputs, chosen
greedily by the edges each adds to those already chosen (measured by libFuzzer merges with
-use_counters=0), and prints how many of all the edges they keep. Run it with the fuzz target
built as for fuzzing (RUSTC_BOOTSTRAP=1 cargo fuzz build).
"""
import argparse
import pathlib
import re
import shutil
import subprocess
import tempfile

MERGE_LINE = re.compile(r"MERGE-OUTER: (\d+) new files with (\d+) new features added; (\d+) new coverage edges")


def merge(binary, out_dir, *in_dirs, set_cover=False):
    """Runs a libFuzzer merge into out_dir; returns (files, features, edges) added."""
    flag = "-set_cover_merge=1" if set_cover else "-merge=1"
    result = subprocess.run(
        [binary, flag, "-use_counters=0", "-use_value_profile=0", str(out_dir), *map(str, in_dirs)],
        capture_output=True,
        text=True,
    )
    match = MERGE_LINE.search(result.stderr)
    if not match:
        raise SystemExit(f"merge failed:\n{result.stderr[-3000:]}")
    return tuple(int(x) for x in match.groups())


def gain(binary, chosen, candidate, scratch):
    """Edges `candidate` adds to the inputs in `chosen`."""
    trial = scratch / "trial"
    shutil.rmtree(trial, ignore_errors=True)
    shutil.copytree(chosen, trial)
    one = scratch / "one"
    shutil.rmtree(one, ignore_errors=True)
    one.mkdir()
    shutil.copy(candidate, one / candidate.name)
    return merge(binary, trial, one)[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("corpora", nargs="+")
    parser.add_argument("--out", required=True)
    parser.add_argument("--max", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = pathlib.Path(tmp)
        candidates = scratch / "candidates"
        candidates.mkdir()
        _, total, _ = merge(args.binary, candidates, *args.corpora, set_cover=True)
        chosen = scratch / "chosen"
        chosen.mkdir()
        # Lazy greedy: a candidate's gain only shrinks as others are chosen.
        pending = [(None, path) for path in sorted(candidates.iterdir())]
        kept = 0
        while pending and len(list(chosen.iterdir())) < args.max:
            pending = [(g if g is not None else gain(args.binary, chosen, p, scratch), p) for g, p in pending]
            pending.sort(key=lambda item: -item[0])
            best_gain, best = pending[0]
            fresh = gain(args.binary, chosen, best, scratch)
            if fresh < best_gain:
                pending[0] = (fresh, best)
                continue
            if fresh == 0:
                break
            shutil.copy(best, chosen / best.name)
            kept += fresh
            # The others' gains are now upper bounds, recomputed when they come first.
            pending.pop(0)
        out = pathlib.Path(args.out)
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(chosen, out)
        print(f"{len(list(out.iterdir()))} inputs keep {kept} of {total} edges "
              f"({100 * kept / max(total, 1):.0f}%); set cover needed {len(list(candidates.iterdir()))}")


if __name__ == "__main__":
    main()
