"""Twin programs: the same function on the same shapes in PyTorch and in JAX (tests/jax_twins.py)
get the same `flops_matrix`, `flops_vector`, `bytes_unfused` and `bytes_fused`, except where the
frameworks decompose an op differently; each such difference is named here and its exact size
derived by hand (M, N, R, T: the twin's sizes; f32 = 4 bytes, i32 = 4, i64 = 8, bool = 1).

Both pipelines run as `solar-opt twin.py --translate --lift-einsum --roofline=all --format=json`, the
driver in-process on a temporary translation cache filled first by two spawned workers, each
program by its frontend's own `translate_job` (validated against its framework)."""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest

pytest.importorskip("torch")
pytest.importorskip("jax")

from jax_twins import TWINS, jax_source, torch_source  # noqa: E402

from solar_compiler.driver import main  # noqa: E402

KEYS = ("flops_matrix", "flops_vector", "bytes_unfused", "bytes_fused")

# twin -> (jax - torch) per key, derived by hand
DIFFERENCES: dict[str, dict[str, int]] = {
    # jnp.mean is reduce_sum then div, two kernels: the R = 24 row sums are written and read back
    # once more (f32); the division is one FLOP per row in both
    "mean_rows": {"bytes_unfused": 2 * 24 * 4},
    # x @ w.T + b: torch's linear starts its accumulator at the bias (no FLOP, one kernel); JAX adds the
    # bias in a kernel of its own: M*N = 32*48 adds, the product written and read back (8 bytes each)
    # and the bias read there instead of in the product kernel
    "linear_bias": {"flops_vector": 32 * 48, "bytes_unfused": 2 * 32 * 48 * 4},
    # w[x] normalises negative ids first: lt(x, 0), add(x, 100), select_n over the T = 40 i32 ids, one
    # FLOP each; kernels lt (reads 4, writes 1 byte per id), add (4 + 4), select_n (1 + 4 + 4 + 4)
    "embedding": {"flops_vector": 3 * 40, "bytes_unfused": 40 * (5 + 8 + 13)},
    # torch's argmax returns int64 indices, JAX's int32: 4 bytes less per result (16 rows), in the
    # argmax kernel and in the compulsory output
    "argmax": {"bytes_unfused": -16 * 4, "bytes_fused": -16 * 4},
}


def _translate(fw: str, path: str) -> tuple[str, bool]:
    """Translate `path` with framework `fw`'s own `translate_job` (validated) into the translation
    cache `XDG_CACHE_HOME` names; whether it validated. Runs in a spawned worker."""
    from translated import driver_options

    from solar_compiler.frontends.cache import cache_store

    if fw == "torch":
        from solar_compiler.frontends.torch import frontend as fe
        job = fe.translate_job
    else:
        from solar_compiler.frontends.jax import frontend as fe
        from solar_compiler.frontends.jax.job import translate_job as job
    opts = driver_options()  # the driver's options: the reports below are cache hits
    translation = job(path, opts)
    cache_store(fe.cache_key(path, opts), translation)
    return path, translation.validation["validated"] is True


@pytest.fixture(scope="session")
def twin_totals(tmp_path_factory) -> dict[str, dict[str, dict[str, int]]]:
    root = tmp_path_factory.mktemp("twins")
    out: dict[str, dict[str, dict[str, int]]] = {}
    jobs = []
    for name in TWINS:
        for fw, source in (("torch", torch_source(name)), ("jax", jax_source(name))):
            path = str(root / f"{name}_{fw}.py")
            with open(path, "w") as f:
                f.write(source)
            jobs.append((fw, path))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(root / "xdg"))
        # two spawned workers translate (each imports torch and jax once); the reports run here
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            validated = dict(pool.map(_translate, *zip(*jobs, strict=True)))
        for name in TWINS:
            out[name] = {}
            for fw in ("torch", "jax"):
                path = str(root / f"{name}_{fw}.py")
                assert validated[path], (name, fw)
                report = root / f"{name}_{fw}.json"
                rc = main([path, "--translate", "--lift-einsum", "--roofline=all", "--hw", "H100_SXM",
                           "--format=json", "-o", str(report)])
                assert rc == 0, (name, fw)
                data = json.loads(report.read_text())
                assert data["validation"]["frontend"].startswith(fw)
                out[name][fw] = {k: data["totals"][k] for k in KEYS}
    return out


def test_there_are_at_least_ten_equal_twins():
    assert len([n for n in TWINS if n not in DIFFERENCES]) >= 10


@pytest.mark.parametrize("name", list(TWINS))
def test_twins_agree_up_to_the_named_difference(name, twin_totals):
    torch_t, jax_t = twin_totals[name]["torch"], twin_totals[name]["jax"]
    diff = {k: jax_t[k] - torch_t[k] for k in KEYS if jax_t[k] != torch_t[k]}
    assert diff == DIFFERENCES.get(name, {})
    assert torch_t["flops_matrix"] + torch_t["flops_vector"] + torch_t["bytes_fused"] > 0
