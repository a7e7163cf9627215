"""The JAX / Flax NNX frontend end to end: every example of examples/jax translates, validates and
reports; statements carry `file:line` and NNX module paths; parameters are weights; contraction-only
examples match XLA's own FLOP count; the frontend is chosen by the file's imports; `solar-opt` on a
torch or `.loop` file never imports jax.

The reports come from `solar-opt examples/jax/<name> --translate --lift-einsum --roofline=all
--format=json`, the driver run in-process on a temporary translation cache filled first by two
spawned workers with the same `translate_job` the sandboxed child runs (validated)."""

from __future__ import annotations

import ast
import json
import multiprocessing
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from translated import driver_options

jax = pytest.importorskip("jax")

from solar_compiler.driver import main  # noqa: E402
from solar_compiler.errors import SolarError  # noqa: E402
from solar_compiler.frontends import FrontendOptions, get_frontend, source_frontend  # noqa: E402
from solar_compiler.frontends.cache import cache_store  # noqa: E402
from solar_compiler.frontends.jax import frontend as fe  # noqa: E402
from solar_compiler.frontends.jax.job import translate_job  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p.name for p in (ROOT / "examples" / "jax").glob("*.py"))


def _translate(name: str) -> tuple[str, object]:
    """Translate (validated) examples/jax/`name` into the cache `XDG_CACHE_HOME` names, from the
    repository root; runs in a spawned worker."""
    path, opts = f"examples/jax/{name}", driver_options()  # the driver's: `reports` are cache hits
    translation = translate_job(path, opts)
    cache_store(fe.cache_key(path, opts), translation)
    return name, translation


@pytest.fixture(scope="session")
def translations(tmp_path_factory) -> dict[str, object]:
    """Each example's Translation (validated), stored in a temporary translation cache by two
    spawned workers (each imports jax once)."""
    xdg = tmp_path_factory.mktemp("xdg")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(xdg))
        mp.chdir(ROOT)
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            out: dict[str, object] = dict(pool.map(_translate, EXAMPLES))
    out["_xdg"] = xdg
    return out


@pytest.fixture(scope="session")
def reports(translations, tmp_path_factory) -> dict[str, dict]:
    target_dir = tmp_path_factory.mktemp("reports")
    result = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(translations["_xdg"]))
        mp.chdir(ROOT)
        for name in EXAMPLES:
            target = target_dir / f"{name}.json"
            rc = main([f"examples/jax/{name}", "--translate", "--lift-einsum", "--roofline=all", "--hw",
                       "H100_SXM", "--format=json", "-o", str(target)])
            assert rc == 0, name
            result[name] = json.loads(target.read_text())
    return result


def test_there_are_the_examples_the_issue_asks_for():
    need = {"matmul.py", "conv_nhwc.py", "conv_nchw.py", "mlp_gelu.py", "layernorm.py", "rmsnorm.py",
            "causal_attention.py", "dot_product_attention.py", "rnn_scan.py", "fori_loop.py", "embedding.py",
            "nnx_mlp.py", "nnx_transformer_block.py", "nnx_cnn.py"}
    assert need <= set(EXAMPLES) and len(EXAMPLES) >= 14


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_translates_validates_and_reports(name, reports):
    r = reports[name]
    v = r["validation"]
    assert (v["frontend"], v["validated"], v["samples"], v["sizes"]) == ("jax-jaxpr", True, 3, "full")
    assert v["max_rel_err"] < 1e-4
    assert r["totals"]["flops"] > 0 and r["totals"]["bytes_fused"] > 0
    # every row of the report names a line of the example
    for row in r["kernels_unfused"]:
        assert row["loc"].startswith(f"examples/jax/{name}:"), row
        assert row["op"].startswith("jax.") or row["op"] == "output copy", row
    for op in r["ops"]:
        assert op["loc"].startswith(f"examples/jax/{name}:"), op


def test_one_origin_per_primitive_and_nnx_module_paths(translations):
    """Each run of statements is one primitive instance (one eager kernel) with its module path."""
    t = translations["nnx_transformer_block.py"]
    ops = t.source_ops
    assert [o["first"] for o in ops] == [sum(p["count"] for p in ops[:i]) for i in range(len(ops))]
    modules = {o["module"] for o in ops}
    assert {"ln1", "attn", "attn.query", "attn.key", "attn.value", "attn.out", "ln2", "fc1", "fc2"} <= modules
    # the attention's own softmax runs inside attn, not in one of its projections
    assert any(o["op"] == "jax.exp" and o["module"] == "attn" for o in ops)
    roles = {d.name: d.role for d in t.kernels[0].tensors}
    assert roles["fc1_kernel"] == roles["attn_query_kernel"] == roles["ln1_scale"] == "weight"
    assert roles["x"] == "input"


def test_the_loop_is_one_sequential_dimension_not_unrolled(translations):
    """fori_loop (16 steps) and scan (32 steps): each body primitive is one statement run inside one
    `scan` loop; the fori_loop counter slices the forcing table affinely."""
    from solar_compiler.loopir.ast import For, statements

    for name, steps in (("fori_loop.py", 16), ("rnn_scan.py", 32)):
        k = translations[name].kernels[0]
        loops = [n for n in k.body if isinstance(n, For) and n.sequential]
        assert len(loops) == 1 and str(loops[0].ub) == str(steps), name
        assert len(statements(k)) < 15, name
    text = str([c.stmt for c in statements(translations["fori_loop.py"].kernels[0])])
    assert "Read(tensor='forcing', indices=(AffExpr" in text


# ---- XLA's cost analysis ------------------------------------------------------------------------------
def xla_flops(name: str) -> float:
    from solar_compiler.frontends.jax.capture import load_model

    model = load_model(str(ROOT / "examples" / "jax" / name))
    cost = jax.jit(model.spec.Model).lower(*model.inputs).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return cost["flops"]


@pytest.mark.parametrize("name, flops", [
    ("matmul.py", 2 * 256 * 128 * 64),
    ("batched_matmul.py", 2 * 8 * 64 * 32 * 48),
    # VALID, stride 2: 16x16 outputs of 2*16*9 taps each, per image and output channel
    ("conv_nchw.py", 2 * 2 * 32 * 16 * 16 * 16 * 9),
])
def test_flops_matrix_equals_xla_cost_analysis_on_contraction_only_examples(name, flops, reports):
    assert reports[name]["totals"]["flops_matrix"] == flops
    assert reports[name]["totals"]["flops_vector"] == 0
    assert xla_flops(name) == flops


# ---- frontend selection ----------------------------------------------------------------------------------
def test_the_frontend_is_chosen_by_the_files_imports(tmp_path):
    cases = {"a.py": "import jax.numpy as jnp\n", "b.py": "from flax import nnx\n", "c.py": "import torch\n",
             "d.py": "import numpy as np\n", "e.py": "def f(:\n"}
    for n, src in cases.items():
        (tmp_path / n).write_text(src)
    got = {n: source_frontend(str(tmp_path / n)) for n in cases}
    assert got == {"a.py": "jax", "b.py": "jax", "c.py": "torch", "d.py": "torch", "e.py": "torch"}
    (tmp_path / "both.py").write_text("import torch\n\nimport jax\n")
    with pytest.raises(SolarError, match=r"both.py:1: imports torch \(line 1\) and jax \(line 3\): choose"):
        source_frontend(str(tmp_path / "both.py"))
    assert get_frontend("jax", str(tmp_path / "c.py")).name == "jax"  # an explicit frontend wins
    assert get_frontend("auto", str(tmp_path / "a.py")).name == "jax"


def test_frontend_option_overrides_the_imports(tmp_path, capsys):
    """`--frontend=jax` on a torch file runs the JAX frontend, which finds no `model` (the driver
    in-process: test_driver checks that the process prints and exits as `main` does)."""
    path = tmp_path / "m.py"
    path.write_text("import torch\nN = 8\n\n\ndef get_inputs():\n    return [torch.randn(N)]\n")
    assert main([str(path), "--translate", "--frontend=jax", "--no-cache"]) == 1
    assert capsys.readouterr().err == f"solar-opt: error: {path}:6: missing 'model' or 'Model' (expected " \
        "def model(*inputs) or class Model, get_inputs, optionally get_init_inputs)\n"


def test_solar_opt_on_torch_or_loop_input_never_imports_jax(tmp_path):
    code = ("import sys\nfrom solar_compiler.driver import main\n"
            "rc = main(sys.argv[1:])\n"
            "print(rc, sorted(m for m in ('jax', 'flax', 'jaxlib') if m in sys.modules))\n")
    for args in ([str(ROOT / "examples" / "loop" / "matmul.loop"), "--lift-einsum", "--roofline=fused"],
                 [str(ROOT / "examples" / "torch" / "matmul.py"), "--translate", "--lift-einsum",
                  "--roofline=fused", "--frontend-options", "validate=false"]):
        r = subprocess.run([sys.executable, "-c", code, *args, "-o", str(tmp_path / "out.txt")],
                           capture_output=True, text=True, timeout=300,
                           env={"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
        assert r.stdout.strip().splitlines()[-1] == "0 []", r.stderr[-2000:]


def test_only_the_jax_frontend_imports_jax():
    """jax/flax imports live in frontends/jax (capture, job, reference, timed, train), nowhere else in
    the package; its `frontend` module, which the parent imports, has none."""
    found = set()
    for f in (ROOT / "solar_compiler").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n.split(".")[0] in ("jax", "flax", "jaxlib") for n in names):
                found.add(f.relative_to(ROOT).as_posix())
    assert found == {"solar_compiler/frontends/jax/capture.py", "solar_compiler/frontends/jax/job.py",
                     "solar_compiler/frontends/jax/reference.py", "solar_compiler/frontends/jax/timed.py",
                     "solar_compiler/frontends/jax/train.py"}


def test_the_framework_frontends_import_only_the_shared_frontend_modules():
    """frontends/jax never imports frontends/torch and the other way round: what they share lives in
    frontends/ (builder, program, model_file, sandbox, job, cache, validation)."""
    pkg = ROOT / "solar_compiler" / "frontends"
    for mine, other in (("jax", "torch"), ("torch", "jax")):
        for f in (pkg / mine).rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    assert not node.module.startswith(f"solar_compiler.frontends.{other}"), (f, node.module)
                if isinstance(node, ast.ImportFrom) and node.level >= 2:
                    assert (node.module or "").split(".")[0] != other, (f, node.module)


def test_retarget_moves_a_step_local_into_its_row():
    from solar_compiler.loopir.affine import AffExpr
    from solar_compiler.loopir.ast import Assign, Binary, For, Read
    from solar_compiler.loopir.rewrite import retarget

    i, s = AffExpr.var("i"), AffExpr.var("s")
    body = [For("i", AffExpr.lit(0), AffExpr.lit(4), 1, False, [
        Assign("t", (i,), "=", Binary("add", Read("x", (i,), "f32"), Read("t", (i,), "f32"), "f32")),
        Assign("y", (i,), "=", Read("t", (i,), "f32"))])]
    (f,) = retarget(body, "t", "C", [s + 1])
    a, b = f.body
    assert (a.target, [str(e) for e in a.indices]) == ("C", ["s + 1", "i"])
    assert a.value.b == Read("C", (s + 1, i), "f32") and a.value.a == Read("x", (i,), "f32")
    assert b.target == "y" and b.value == Read("C", (s + 1, i), "f32")


def test_settle_decides_comparisons_of_loop_counters():
    """JAX's wrap-around of a negative index, `select(i < 0, i + n, i)`, on a counter in [0, 16) is
    the counter; an undecided comparison stays."""
    from solar_compiler.frontends.builder.exprs import settle
    from solar_compiler.loopir.affine import AffExpr
    from solar_compiler.loopir.ast import Cast, Cmp, Const, IndexValue, Select

    s = AffExpr.var("s")
    iv = Cast(IndexValue(s, "i64"), "i32")
    wrap = Select(Cmp("lt", iv, Const(0, "i32"), "bool"), Cast(IndexValue(s + 16, "i64"), "i32"), iv, "i32")
    assert settle(wrap, {"s": (0, 15)}) == IndexValue(s, "i64")
    open_ = Cmp("lt", iv, Const(8, "i32"), "bool")
    assert isinstance(settle(open_, {"s": (0, 15)}), Cmp)


def test_a_big_program_is_captured_abstractly_and_validated_on_a_reduced_instance(tmp_path, monkeypatch,
                                                                                   capsys):
    """8192x8192 @ 8192x4096: 0.5 GB of tensors, about 80 s to validate (`validation.estimate`). The
    whole command under a 0.5 GB memory limit and a 2 s validation budget: the capture traces
    abstract values (nothing at full size), the size constants of `M, K, N = ...` are scaled down to
    fit the budget (by 4: 2048 x 2048 @ 2048 x 1024, estimated 1.7 s), the reduced kernel is the
    same program, and the report prices the full sizes (2*M*K*N matrix FLOPs). (The default 20 s
    budget picks 4096 x 4096 @ 4096 x 2048, whose validation does not fit 0.5 GB.)"""
    path = tmp_path / "big.py"
    path.write_text("import jax\n\nM, K, N = 8192, 8192, 4096\n\n\ndef model(a, b):\n"
                    "    return jax.nn.relu(a @ b)\n\n\ndef get_inputs():\n"
                    "    ka, kb = jax.random.split(jax.random.key(0))\n"
                    "    return [jax.random.normal(ka, (M, K)), jax.random.normal(kb, (K, N))]\n")
    out = tmp_path / "r.json"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    rc = main([str(path), "--translate", "--frontend-options", "memory-gb=0.5 time-budget=2", "--lift-einsum",
               "--roofline=fused", "--format=json", "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    report = json.loads(out.read_text())
    v = report["validation"]
    assert (v["validated"], v["sizes"], v["full_size_same_program"]) == \
        (True, "reduced: M=2048 (of 8192), K=2048 (of 8192), N=1024 (of 4096)", True)
    assert report["totals"]["flops_matrix"] == 2 * 8192 * 8192 * 4096


def test_progress_of_a_reduced_jax_validation_names_the_instance(tmp_path):
    """The JAX path's progress: the reduction tried, then the loop IR run on the reduced instance,
    never 'at full size' after 'not at full size'."""
    import io

    from solar_compiler import progress

    path = tmp_path / "mm.py"
    path.write_text("import jax\n\nM, K, N = 512, 512, 256\n\n\ndef model(a, b):\n"
                    "    return jax.nn.relu(a @ b)\n\n\ndef get_inputs():\n"
                    "    ka, kb = jax.random.split(jax.random.key(0))\n"
                    "    return [jax.random.normal(ka, (M, K)), jax.random.normal(kb, (K, N))]\n")
    stream = io.StringIO()
    progress.enable(stream)
    try:
        v = translate_job(str(path), FrontendOptions(no_cache=True, memory_budget_gb=0.001)).validation
    finally:
        progress.disable()
    assert v["validated"] and v["sizes"].startswith("reduced: ")
    lines = stream.getvalue().splitlines()
    val = [line.split("] validate: ", 1)[1] for line in lines if "] validate: " in line]
    assert val[0].startswith("not at full size (whole execution")
    assert val[0].endswith(": on a reduced instance")
    assert all(m.startswith("reduced instance M=") and m.endswith(": capturing and translating")
               for m in val[1:-1])
    assert val[-1] == ("executing the loop IR against the framework on the reduced instance "
                       + v["sizes"].removeprefix("reduced: "))


def test_tuple_assigned_size_constants_are_found(tmp_path):
    from solar_compiler.frontends.model_file import JAX_FORMAT, load_model_file

    path = tmp_path / "m.py"
    path.write_text("import jax\nB, T = 8, 64\nD: int = 32\nX, Y = 3, 'a'\n\n\ndef model(x):\n"
                    "    return x\n\n\ndef get_inputs():\n    return [jax.numpy.ones((B, T, D))]\n")
    spec = load_model_file(str(path), JAX_FORMAT)
    assert spec.size_constants == {"B": 8, "T": 64, "D": 32, "X": 3}
    assert spec.with_sizes({"T": 16, "B": 4}).size_constants == {"B": 4, "T": 16, "D": 32, "X": 3}
