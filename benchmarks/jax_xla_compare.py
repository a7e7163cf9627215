"""Every JAX example's counts against XLA's own cost analysis,
`jax.jit(f).lower(*args).compile().cost_analysis()` (CPU backend, jaxlib as installed).

Ours: the totals of `solar-opt F --translate --lift-einsum --roofline=all` (needed work, after
`narrow-needed`), the driver run in-process on a temporary translation cache filled by the
frontend's own (validated) `translate_job`. XLA: "flops" (it counts a multiply-add as 2 and every
elementwise op as 1, like us), "transcendentals", and "bytes accessed" of the compiled, fused
module. The differences are conventions (counted on our kernel as written, since XLA does not narrow),
documented in docs/jax-frontend.md ("Counts against XLA's cost analysis"), whose table is this
script's output; "rest" is what remains: XLA's own optimisations (CSE, loop bodies counted once).

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


def conventions(path: str) -> dict[str, int]:
    """Our work in the categories where XLA's cost analysis counts differently (measured on single
    primitives, see docs/jax-frontend.md): transcendental ops (ours 1 FLOP each, XLA's "flops" 0:
    they go to its "transcendentals"), reduction outputs (ours n combines into an identity-initialised
    accumulator, XLA n - 1), conversions (ours 0, XLA 1), logistic (ours 1, XLA 3 + 1 transcendental)
    and max(-inf, x) (ours 1, XLA simplifies it away): the elements of each, on the needed work."""
    from solar_compiler.loopir.ast import Binary, Const, Unary, statements
    from solar_compiler.loopir.domain import footprint, iteration_count
    from solar_compiler.transforms.kernels import kernel_costs

    t = translate_job(path, FrontendOptions(validate=False))
    k = t.kernels[0]
    origin = {}
    for o in t.source_ops:
        for i in range(o["first"], o["first"] + o["count"]):
            origin[i] = o["op"]
    out = {"transcendental": sum(op.flops_transcendental for op in kernel_costs(k).ops),
           "reduction_outputs": 0, "convert": 0, "logistic": 0, "max_neg_inf": 0}
    for i, ctx in enumerate(statements(k)):
        st, op = ctx.stmt, origin.get(i, "")
        if st.kind != "=" and op.startswith("jax.reduce_") and op != "jax.reduce_precision":
            out["reduction_outputs"] += footprint(ctx, st.indices)
        if op == "jax.convert_element_type":
            out["convert"] += iteration_count(ctx)
        v = st.value
        if isinstance(v, Unary) and v.fn == "sigmoid":
            out["logistic"] += iteration_count(ctx)
        if isinstance(v, Binary) and v.fn == "max" and isinstance(v.a, Const) and v.a.value == float("-inf"):
            out["max_neg_inf"] += iteration_count(ctx)
    return out


def main_() -> int:
    os.chdir(ROOT)
    names = sorted(p.name for p in (ROOT / "examples" / "jax").glob("*.py"))
    if sys.argv[1:]:
        names = [n for n in names if any(s in n for s in sys.argv[1:])]
    with tempfile.TemporaryDirectory() as d:
        os.environ["XDG_CACHE_HOME"] = d
        print("| example | ours matrix | ours vector | narrowing removed | transc. | red. outputs | "
              "converts | logistic | max(-inf) | ours as XLA counts | XLA flops | rest | ours bytes fused | "
              "XLA bytes |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in names:
            path = f"examples/jax/{n}"
            t, x, c = ours(path, Path(d)), xla(path), conventions(path)
            # XLA prices the program as written: our work before narrowing, in its conventions
            as_xla = t["flops_as_written"] - c["transcendental"] - c["reduction_outputs"] + c["convert"] \
                + 3 * c["logistic"] - c["max_neg_inf"]
            cols = [t["flops_matrix"], t["flops_vector"], t["flops_as_written"] - t["flops"],
                    c["transcendental"], c["reduction_outputs"], c["convert"], c["logistic"],
                    c["max_neg_inf"], as_xla, int(x["flops"])]
            print(f"| {n} | " + " | ".join(f"{v:,}" for v in cols) +
                  f" | {int(x['flops']) - as_xla:+,} | {t['bytes_fused']:,} | {int(x['bytes']):,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
