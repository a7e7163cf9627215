"""Golden JSON reports: a refactor changes no figure.

`snapshot` runs `solar-opt` on every bundled example (and, with `--kernelbench`, on the KernelBench
levels), every fidelity, on H100_SXM and B200, and stores each JSON report with its volatile keys
removed (wall-clock times, absolute paths, cache and progress details). `compare` reads two
snapshots and prints every difference, key path by key path; it exits 1 on any difference, so it
can gate a refactor:

    nice .venv/bin/python benchmarks/golden_reports.py snapshot --out build/golden/before
    ...change...
    nice .venv/bin/python benchmarks/golden_reports.py snapshot --out build/golden/after
    .venv/bin/python benchmarks/golden_reports.py compare build/golden/before build/golden/after

Translations come from the shared translation cache, so a second snapshot of the same sources
costs the analyses only. KernelBench problems run with `validate=false` (the validation record is
not a figure of the bound, and validating 250 problems costs about an hour on 2 cores); the
bundled examples are validated, and their validation records are compared too. `--ignore KEY`
adds a key (at any depth) to the volatile set, for a record that a change retypes on purpose.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HW = "H100_SXM,B200"

# Keys whose values depend on the run, not on the program: times, paths, hosts, cache state.
VOLATILE = {
    "seconds", "wall_s", "elapsed_s", "time_s", "duration_s", "translate_s", "validate_s", "pass_times",
    "timings", "cached", "cache_hit", "cache_key", "path", "source", "transcript_dir", "created",
    "host", "pid", "timestamp", "solar_version", "git", "python", "torch_version", "jax_version",
    "sample_seconds", "estimated_s", "estimate_s", "per_sample_s",
}
# Notes that say how the translation was obtained, not what it is.
VOLATILE_NOTES = {"translation cache hit"}


def _llm_replay(path: Path) -> list[str]:
    t = path.with_suffix(".transcript.jsonl")
    return ["--llm-replay", str(t)] if t.exists() else []


def example_jobs() -> Iterator[tuple[str, list[str]]]:
    """(name, solar-opt arguments) for every bundled example."""
    common = ["--lift-einsum", "--roofline=all", "--hw", HW, "--format", "json", "--quiet"]
    for f in sorted((ROOT / "examples/loop").rglob("*.loop")):
        yield f"loop/{f.relative_to(ROOT / 'examples/loop')}", [str(f), *common]
    for sub in ("torch", "models", "jax"):
        for f in sorted((ROOT / "examples" / sub).glob("*.py")):
            yield f"{sub}/{f.name}", [str(f), "--translate", *common]
    for f in sorted((ROOT / "examples/llm").glob("*.py")):
        if _llm_replay(f):
            yield f"llm/{f.name}", [str(f), "--translate", *_llm_replay(f), *common]


def kernelbench_jobs(root: Path, levels: list[int]) -> Iterator[tuple[str, list[str]]]:
    for lv in levels:
        d = root / "KernelBench" / f"level{lv}"
        if not d.is_dir():
            d = root / f"level{lv}"
        for f in sorted(d.glob("*.py"), key=lambda p: (int(p.name.split("_")[0]), p.name)):
            yield f"kb{lv}/{f.name}", [str(f), "--translate", "--mode", "train",
                                       "--frontend-options", "validate=false", "--lift-einsum",
                                       "--roofline=all", "--hw", HW, "--format", "json", "--quiet"]


_ROOTED = re.compile(r"/[^\s\"':@]*?/(examples|KernelBench|level[123])/")


def strip(x: object, volatile: set[str]) -> object:
    if isinstance(x, dict):
        kept = {k: strip(v, volatile) for k, v in sorted(x.items()) if k not in volatile}
        # a list that held only volatile notes is as if absent (a cache hit adds `notes`)
        return {k: v for k, v in kept.items() if v != [] or x[k] == []}
    if isinstance(x, list):
        return [strip(v, volatile) for v in x if not (isinstance(v, str) and v in VOLATILE_NOTES)]
    if isinstance(x, str) and "/" in x:  # the checkout's place: snapshots from two worktrees compare
        return _ROOTED.sub(r"<root>/\1/", x)
    return x


def snapshot(out: Path, jobs: list[tuple[str, list[str]]], exe: str, timeout: float) -> int:
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for i, (name, args) in enumerate(jobs, 1):
        t0 = time.time()
        try:
            p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                               check=False)
            rc, stdout, stderr = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            rc, stdout, stderr = 124, "", f"timeout after {timeout} s"
        rec: dict[str, object] = {"name": name, "rc": rc}
        if rc == 0:
            try:
                rec["report"] = json.loads(stdout)
            except json.JSONDecodeError:
                rec["stdout"] = stdout[-2000:]
        else:
            failed += 1
            rec["error"] = stderr.strip().splitlines()[-1:] if stderr.strip() else []
        (out / (name.replace("/", "__") + ".json")).write_text(json.dumps(rec, indent=1, sort_keys=True))
        print(f"[{i}/{len(jobs)}] {name}: rc {rc} ({time.time() - t0:.1f} s)", flush=True)
    return failed


def diff(a: object, b: object, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: {'only after' if k not in a else 'only before'}")
            else:
                diff(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items before, {len(b)} after")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {json.dumps(a)[:120]} -> {json.dumps(b)[:120]}")


def compare(before: Path, after: Path, volatile: set[str], limit: int) -> int:
    names = sorted({p.name for p in before.glob("*.json")} | {p.name for p in after.glob("*.json")})
    bad = 0
    for n in names:
        if not (before / n).exists() or not (after / n).exists():
            print(f"{n}: only in {'after' if not (before / n).exists() else 'before'}")
            bad += 1
            continue
        a = strip(json.loads((before / n).read_text()), volatile)
        b = strip(json.loads((after / n).read_text()), volatile)
        out: list[str] = []
        diff(a, b, "", out)
        if out:
            bad += 1
            print(f"{n}: {len(out)} difference(s)")
            for line in out[:limit]:
                print(f"  {line}")
    print(f"{len(names) - bad} of {len(names)} reports identical")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("snapshot")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--kernelbench", type=Path, help="KernelBench checkout (its levels 1-3)")
    s.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    s.add_argument("--no-examples", action="store_true")
    s.add_argument("--only", nargs="*", default=[], help="names containing any of these")
    s.add_argument("--timeout", type=float, default=900)
    s.add_argument("--exe", default=str(Path(sys.executable).parent / "solar-opt"))
    s.add_argument("--extra", action="append", default=[],
                   help="one more solar-opt argument per job, repeatable: --extra=--algorithms=classical")
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--ignore", nargs="*", default=[])
    c.add_argument("--limit", type=int, default=20, help="differences shown per report")
    a = ap.parse_args()
    if a.cmd == "compare":
        return compare(a.before, a.after, VOLATILE | set(a.ignore), a.limit)
    jobs = [] if a.no_examples else list(example_jobs())
    if a.kernelbench:
        jobs += list(kernelbench_jobs(a.kernelbench, a.levels))
    if a.only:
        jobs = [j for j in jobs if any(o in j[0] for o in a.only)]
    jobs = [(n, [*args, *a.extra]) for n, args in jobs]
    os.environ.setdefault("PYTHONHASHSEED", "0")
    failed = snapshot(a.out, jobs, a.exe, a.timeout)
    print(f"{len(jobs) - failed} of {len(jobs)} ran; {failed} failed (their errors are stored too)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
