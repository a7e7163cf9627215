"""How well does a model translate whole programs? Runs the LLM frontend in `llm` mode (the whole
program through the model, even where templates exist) over a folder of model files and prints, per
file: validated or not, attempts, tokens, cost, and whether the FLOPs equal the deterministic
path's (as written, before narrowing; "-" where the deterministic path cannot translate the file).

    .venv/bin/python benchmarks/llm_accuracy.py examples/torch --llm-model openai/gpt-4o-mini
    .venv/bin/python benchmarks/llm_accuracy.py examples/torch --llm-model ollama/qwen2.5-coder \\
        --llm-api-base http://127.0.0.1:11434
    .venv/bin/python benchmarks/llm_accuracy.py examples/llm --llm-model manual   # you answer

With `manual`, a file whose prompt waits for an answer is listed as `waiting` with the prompt's
path; answer it (DIR/NNN.response.md) and run the same command again. Transcripts go to
`--transcripts DIR/<model file stem>/` (default build/llm-accuracy/). `--replay DIR` replays
`DIR/<stem>.transcript.jsonl` instead of asking a model. `--json FILE` writes the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPORT = ["--roofline=fused", "--hw", "H100_SXM", "--format", "json", "--no-narrow"]



def written_flops(rep: dict) -> int:
    """The program's FLOPs with the LLM's loop nests counted as it wrote them (the bound does not
    price them: docs/llm-frontend.md, "Pricing"), to compare with the deterministic translation's."""
    llm = rep.get("llm_ops") or []
    return rep["totals"]["flops"] - sum(o["flops_priced"] for o in llm) + sum(o["flops_written"] for o in llm)

def solar(args: list[str], timeout: float) -> tuple[int, dict | None, str]:
    """(exit status, JSON report or None, last stderr line) of one `solar-opt` run."""
    try:
        p = subprocess.run([sys.executable, "-m", "solar_compiler.driver", *args, *REPORT],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, None, f"timed out after {timeout:g} s"
    err = (p.stderr.strip().splitlines() or [""])[-1].removeprefix("solar-opt: error: ")
    report = json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else None
    return p.returncode, report, err


def measure(path: Path, a: argparse.Namespace) -> dict:
    row: dict = {"model_file": str(path), "validated": False, "attempts": None, "tokens": None, "cost": None,
                 "flops_llm": None, "flops_deterministic": None, "flops_equal": None, "note": ""}
    llm = [str(path), "--translate", "--frontend=llm", "--llm-attempts", str(a.attempts),
           "--llm-transcript-dir", str(Path(a.transcripts) / path.stem)]
    if a.replay:
        llm += ["--llm-replay", str(Path(a.replay) / f"{path.stem}.transcript.jsonl")]
    elif a.llm_model:
        llm += ["--llm-model", a.llm_model]
    if a.llm_api_base:
        llm += ["--llm-api-base", a.llm_api_base]
    if a.no_cache:
        llm.append("--no-cache")
    rc, rep, err = solar(llm, a.timeout)
    if rc == 3:
        row["note"] = f"waiting: {err}"
    elif rep is None:
        row["note"] = err
    else:
        v = rep["validation"]
        by = (v.get("translated_by") or [{}])[0]
        row.update(validated=bool(v["validated"]), attempts=by.get("attempts"), tokens=by.get("tokens"),
                   cost=by.get("cost"), flops_llm=written_flops(rep),
                   note="cached" if by.get("cached") else "")
    rc, rep, err = solar([str(path), "--translate", "--frontend=torch"], a.timeout)
    if rep is not None:
        row["flops_deterministic"] = rep["totals"]["flops"]
        if row["flops_llm"] is not None:
            row["flops_equal"] = row["flops_llm"] == row["flops_deterministic"]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", help="folder of model files (*.py), or one file")
    ap.add_argument("--llm-model", default=os.environ.get("SOLAR_LLM_MODEL"), help="litellm model, or manual")
    ap.add_argument("--llm-api-base", default=None)
    ap.add_argument("--attempts", type=int, default=4)
    ap.add_argument("--replay", default=None, metavar="DIR", help="replay DIR/<stem>.transcript.jsonl")
    ap.add_argument("--transcripts", default="build/llm-accuracy", metavar="DIR")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per solar-opt run")
    ap.add_argument("--no-cache", action="store_true", help="ask the model even for cached translations")
    ap.add_argument("--json", default=None, metavar="FILE")
    a = ap.parse_args()
    root = Path(a.folder)
    files = [root] if root.is_file() else sorted(root.glob("*.py"))
    if not files:
        print(f"llm_accuracy: no model files in {root}", file=sys.stderr)
        return 2
    if not (a.llm_model or a.replay):
        print("llm_accuracy: no model: give --llm-model (or SOLAR_LLM_MODEL), or --replay DIR",
              file=sys.stderr)
        return 2
    rows = []
    print(f"{'model file':<40} {'valid':>5} {'tries':>5} {'tokens':>8} {'cost $':>9} "
          f"{'FLOPs = det.':>12}  note")
    for f in files:
        r = measure(f, a)
        rows.append(r)
        eq = "-" if r["flops_equal"] is None else ("yes" if r["flops_equal"] else
                                                   f"no ({r['flops_llm']:,} vs {r['flops_deterministic']:,})")
        cost = "-" if r["cost"] is None else f"{r['cost']:.4f}"
        print(f"{f.name:<40} {'yes' if r['validated'] else 'no':>5} {r['attempts'] or '-':>5} "
              f"{r['tokens'] if r['tokens'] is not None else '-':>8} {cost:>9} {eq:>12}  {r['note'][:120]}",
              flush=True)
    ok = sum(r["validated"] for r in rows)
    same = sum(bool(r["flops_equal"]) for r in rows)
    print(f"validated {ok}/{len(rows)}; FLOPs equal to the deterministic path's {same}/"
          f"{sum(r['flops_equal'] is not None for r in rows)} comparable")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
