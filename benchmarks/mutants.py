"""Mutation test of executor-based validation: how many wrong translations does `compare` catch?

    .venv/bin/python benchmarks/mutants.py examples/loop/*.loop tests/executor_programs/*.loop [-v]

For every kernel: three random input samples, the original run on each, then every mutant from
`solar_compiler.mutate`. A mutant that typecheck or check_bounds rejects is killed statically; one
the executor rejects (an in-domain out-of-range index, a dependence carried by a non-scan loop) is
killed at run time. Among the rest, a mutant is output-changing when some output on some sample
differs from the original by more than 10x the validation tolerance (which excludes equivalent
mutants, e.g. a changed softmax max-shift), and killed when `compare` rejects it on the first sample,
the one validation uses. The tolerance is the one validation uses: the dtype's grown by the
summation length feeding each output (`summation_tolerances` of the original kernel). Prints the
kill rate among output-changing mutants per kernel and in total.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from solar_compiler.executor import compare, execute
from solar_compiler.executor.compare import TOLERANCE, output_dtypes, summation_tolerances
from solar_compiler.executor.numeric import USER, quantize
from solar_compiler.loopir.ast import FLOAT_DTYPES, Assign, Kernel, LoopIRError, SExpr, statements, typecheck
from solar_compiler.loopir.domain import check_bounds
from solar_compiler.mutate import mutants
from solar_compiler.text.parser import parse_kernels

SAMPLES = 3


@dataclass
class Tally:
    total: int = 0
    static: int = 0
    runtime: int = 0
    equivalent: int = 0
    changing: int = 0
    killed: int = 0
    survivors: list[str] = field(default_factory=list)
    equivalents: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)

    def add(self, o: Tally) -> None:
        for f in ("total", "static", "runtime", "equivalent", "changing", "killed"):
            setattr(self, f, getattr(self, f) + getattr(o, f))
        self.survivors += o.survivors
        self.equivalents += o.equivalents
        self.crashes += o.crashes

    def line(self, name: str) -> str:
        rate = f"{100 * self.killed / self.changing:6.2f}%" if self.changing else "    n/a"
        return (f"{name:24s} mutants {self.total:5d}  static {self.static:4d}  runtime {self.runtime:3d}  "
                f"equivalent {self.equivalent:3d}  output-changing {self.changing:5d}  "
                f"killed {self.killed:5d}  kill rate {rate}")


def index_bounds(kernel: Kernel) -> dict[str, int]:
    """For integer tensors used as gather indices: the smallest extent they index."""
    out: dict[str, int] = {}
    for ctx in statements(kernel):
        for r in [ctx.stmt, *ctx.stmt.value.walk()]:  # the statement itself: a scatter's indices
            if not hasattr(r, "indices"):
                continue
            name = r.target if isinstance(r, Assign) else r.tensor
            for d, i in enumerate(r.indices):
                if isinstance(i, SExpr):
                    n = kernel.tensor(name).shape[d]
                    for sub in i.walk():
                        if hasattr(sub, "indices"):
                            out[sub.tensor] = min(out.get(sub.tensor, n), n)
    return out


def random_inputs(kernel: Kernel, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    bounds = index_bounds(kernel)
    out = {}
    for t in kernel.by_role("input", "weight"):
        if t.dtype in FLOAT_DTYPES:
            a = quantize(rng.standard_normal(t.shape).astype(np.float32), t.dtype)
        elif t.dtype == "bool":
            a = rng.random(t.shape) < 0.5
        else:
            a = rng.integers(0, bounds[t.name], t.shape) if t.name in bounds else rng.integers(-3, 4, t.shape)
        out[t.name] = np.asarray(a).astype(USER[t.dtype])
    return out


def differs(ref: dict[str, np.ndarray], got: dict[str, np.ndarray], dtypes: dict[str, str],
            tols: dict[str, float]) -> bool:
    for name, dt in dtypes.items():
        c = compare({name: ref[name]}, {name: got[name]}, {name: dt}, tolerances=tols)
        if dt in TOLERANCE and c.max_rel_err > 10 * tols[name] or dt not in TOLERANCE and not c.ok:
            return True
    return False


def run_kernel(kernel: Kernel) -> Tally:
    tally = Tally()
    samples = [random_inputs(kernel, seed) for seed in range(SAMPLES)]
    base = [execute(kernel, s) for s in samples]
    dtypes = output_dtypes(kernel)
    tols = summation_tolerances(kernel)
    for desc, m in mutants(kernel):
        tally.total += 1
        try:
            check_bounds(typecheck(m))
        except LoopIRError:
            tally.static += 1
            continue
        try:
            outs = [execute(m, s) for s in samples]
        except LoopIRError:
            tally.runtime += 1
            continue
        except Exception as e:  # an executor bug, not a verdict on the mutant: list it
            tally.crashes.append(f"{kernel.name}: {desc}: {type(e).__name__}: {e}")
            continue
        if not any(differs(b, o, dtypes, tols) for b, o in zip(base, outs, strict=True)):
            tally.equivalent += 1
            tally.equivalents.append(f"{kernel.name}: {desc}")
            continue
        tally.changing += 1
        if compare(base[0], outs[0], dtypes, tolerances=tols).ok:
            tally.survivors.append(f"{kernel.name}: {desc}")
        else:
            tally.killed += 1
    return tally


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("-v", "--verbose", action="store_true", help="also list the equivalent mutants")
    args = ap.parse_args(argv)
    total = Tally()
    t0 = time.perf_counter()
    for path in args.files:
        with open(path) as f:
            kernels = parse_kernels(f.read(), path)
        for k in kernels:
            t = run_kernel(k)
            print(t.line(k.name))
            total.add(t)
    print(total.line("TOTAL"))
    print(f"({time.perf_counter() - t0:.1f} s)")
    for s in total.survivors:
        print(f"  survivor: {s}")
    for s in total.equivalents if args.verbose else []:
        print(f"  equivalent: {s}")
    for c in total.crashes:
        print(f"  CRASH: {c}")
    return 1 if total.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
