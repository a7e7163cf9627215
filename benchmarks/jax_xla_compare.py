"""Every JAX example's counts against XLA's own cost analysis,
`jax.jit(f).lower(*args).compile().cost_analysis()` (CPU backend, jaxlib as installed).

Ours: the totals of `solar-opt F --translate --lift-einsum --roofline=all` (needed work, after
`narrow-needed`), the driver run in-process on a temporary translation cache filled by the
frontend's own (validated) `translate_job`. XLA: "flops" (it counts a multiply-add as 2 and every
elementwise op as 1, like us), "transcendentals", and "bytes accessed" of the compiled, fused
module. The differences are conventions, documented in docs/jax-frontend.md ("Counts against XLA's
cost analysis"), whose table is this script's output.

    .venv/bin/python benchmarks/jax_xla_compare.py [substring ...]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import jax

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from solar_compiler.driver import main  # noqa: E402
from solar_compiler.frontends import FrontendOptions  # noqa: E402
from solar_compiler.frontends.cache import cache_store  # noqa: E402
from solar_compiler.frontends.jax import frontend as fe  # noqa: E402
from solar_compiler.frontends.jax.capture import load_model, real_params  # noqa: E402
from solar_compiler.frontends.jax.job import translate_job  # noqa: E402


def ours(path: str, tmp: Path) -> dict[str, int]:
    opts = FrontendOptions()
    cache_store(fe.cache_key(path, opts), translate_job(path, opts))
    out = tmp / (Path(path).stem + ".json")
    assert main([path, "--translate", "--lift-einsum", "--roofline=all", "--hw", "H100_SXM", "--format=json",
                 "-o", str(out)]) == 0
    return json.loads(out.read_text())["totals"]


def xla(path: str) -> dict[str, float]:
    model = load_model(path)
    params = real_params(model) if model.params else []
    cost = jax.jit(model.fn).lower(params, *model.inputs).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return {"flops": cost.get("flops", 0.0), "transcendentals": cost.get("transcendentals", 0.0),
            "bytes": cost.get("bytes accessed", 0.0)}


def main_() -> int:
    os.chdir(ROOT)
    names = sorted(p.name for p in (ROOT / "examples" / "jax").glob("*.py"))
    if sys.argv[1:]:
        names = [n for n in names if any(s in n for s in sys.argv[1:])]
    with tempfile.TemporaryDirectory() as d:
        os.environ["XDG_CACHE_HOME"] = d
        print("| example | ours matrix | ours vector | ours total | XLA flops | total - XLA | ours transc. | "
              "XLA transc. | ours bytes fused | XLA bytes accessed |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in names:
            path = f"examples/jax/{n}"
            t, x = ours(path, Path(d)), xla(path)
            total = t["flops_matrix"] + t["flops_vector"]
            tr = _transcendentals(path)
            print(f"| {n} | {t['flops_matrix']:,} | {t['flops_vector']:,} | {total:,} | "
                  f"{int(x['flops']):,} | {total - int(x['flops']):+,} | {tr:,} | "
                  f"{int(x['transcendentals']):,} | "
                  f"{t['bytes_fused']:,} | {int(x['bytes']):,} |")
    return 0


def _transcendentals(path: str) -> int:
    from solar_compiler.analysis.costs import kernel_costs

    k = translate_job(path, FrontendOptions(validate=False)).kernels[0]
    return sum(op.flops_transcendental for op in kernel_costs(k).ops)


if __name__ == "__main__":
    sys.exit(main_())
