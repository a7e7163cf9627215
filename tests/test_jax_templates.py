"""JAX primitive templates one by one: each program below is translated and validated against JAX on
its own inputs and two fresh samples (`translate_job`, as the sandboxed child runs it), so every
template computes what XLA computes; a few get their FLOPs and iteration counts derived by hand.

Inputs: "(shape)" standard normal, "pos:(shape)" uniform in [0.5, 1.5), "int:(shape):hi" uniform ints
in [0, hi)."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

from solar_compiler.frontends import FrontendOptions  # noqa: E402
from solar_compiler.frontends.jax.job import translate_job  # noqa: E402
from solar_compiler.loopir.ast import statements  # noqa: E402
from solar_compiler.loopir.domain import iteration_count  # noqa: E402
from solar_compiler.transforms.kernels import kernel_costs  # noqa: E402

# name: (parameters, returned expression, inputs)
PROGRAMS: dict[str, tuple[str, str, list[str]]] = {
    "conv_lhs_dilated_groups": ("x, w",
        "lax.conv_general_dilated(x, w, (1, 1), ((1, 2), (0, 1)), lhs_dilation=(2, 2), "
        "rhs_dilation=(1, 2), feature_group_count=2)", ["(2, 4, 6, 7)", "(6, 2, 3, 2)"]),
    "conv_batch_groups": ("x, w",
        "lax.conv_general_dilated(x, w, (1,), ((1, 1),), batch_group_count=2, "
        "dimension_numbers=('NCH', 'OIH', 'NCH'))", ["(4, 3, 10)", "(4, 3, 3)"]),
    "conv_transpose": ("x, w",
        "lax.conv_transpose(x, w, (2, 2), 'SAME', dimension_numbers=('NHWC', 'HWIO', "
        "'NHWC'))", ["(2, 5, 5, 3)", "(3, 3, 3, 4)"]),
    "pad_neg_interior": ("x", "lax.pad(x, 0.5, ((1, -2, 1), (-1, 2, 2)))", ["(5, 6)"]),
    "pad_plain": ("x", "jnp.pad(x, ((1, 2), (0, 3)))", ["(5, 6)"]),
    "dus": ("x, u", "lax.dynamic_update_slice(x, u, (2, 1))", ["(6, 5)", "(2, 3)"]),
    "scatter_add": ("x, i, u", "x.at[i].add(u)", ["(10, 4)", "int:(6,):10", "(6, 4)"]),
    "scatter_set": ("x, u", "x.at[2:5].set(u)", ["(10, 4)", "(3, 4)"]),
    "take_along": ("x, i", "jnp.take_along_axis(x, i, axis=1)", ["(6, 8)", "int:(6, 3):8"]),
    "cum_rev": ("x",
        "lax.cumsum(x, axis=1, reverse=True) + lax.cummax(x, axis=0) + "
        "lax.cumlogsumexp(x, axis=1)", ["(5, 7)"]),
    "cumprod": ("x", "jnp.cumprod(x, axis=0)", ["(5, 7)"]),
    "inverse_trig_hyperbolic": ("x, y",
        "jnp.arctan(x) + jnp.arcsin(jnp.tanh(x) * 0.9) + jnp.arccos(jnp.tanh(y) * 0.9) + jnp.sinh(x) "
        "+ jnp.cosh(y) + jnp.arcsinh(x) + jnp.arccosh(jnp.abs(x) + 1) + jnp.arctanh(jnp.tanh(y) * 0.9) "
        "+ jnp.arctan2(x, y)", ["(5, 7)", "(5, 7)"]),
    "window_pad": ("x",
        "lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3), (1, 2, 2), ((0, 0), (1, 1), "
        "(1, 1)))", ["(2, 9, 9)"]),
    "avg_pool_sum": ("x", "lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), 'SAME')", ["(6, 6)"]),
    "argmin": ("x", "jnp.argmin(x, axis=0)", ["(7, 5)"]),
    "while_static": ("x",
        "lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 1.5 + 1.0), (0, "
        "x))[1]", ["(4,)"]),
    "cond_const": ("x", "lax.cond(True, lambda v: v * 2.0, lambda v: v - 1.0, x)", ["(4,)"]),
    "select_int": ("x, i", "lax.select_n(i, x, x * 2.0, x * 3.0)", ["(4, 3)", "int:(4, 3):3"]),
    "math_mix": ("x, y",
        "lax.rem(x, y) + jnp.exp2(x) + lax.integer_pow(y, -2) + jnp.clip(x, -0.5, 0.5) "
        "+ lax.rev(x, (1,)) + jnp.round(x)", ["(4, 6)", "pos:(4, 6)"]),
    "iota_onehot": ("i", "jax.nn.one_hot(i, 10) * jnp.arange(10.0)", ["int:(8,):10"]),
    "reduce_misc": ("x",
        "jnp.prod(x, axis=1) + jnp.all(x > -3.0, axis=1) + jnp.any(x > 1.0, axis=1) + "
        "jnp.min(x, axis=1)", ["(5, 7)"]),
    "squeeze_expand": ("x",
        "jnp.expand_dims(jnp.squeeze(x, 1), 0) * jnp.transpose(x, (1, 0, 2))", ["(4, 1, 3)"]),
    "sort": ("x", "jnp.sort(x, axis=1)", ["(4, 6)"]),
    "argsort": ("x", "jnp.argsort(x, axis=1)", ["(4, 6)"]),
    "softmax_logsumexp": ("x",
        "jax.nn.log_softmax(x, axis=-1) + jax.scipy.special.logsumexp(x, axis=-1, "
        "keepdims=True)", ["(4, 6)"]),
    "int_ops": ("i, j", "(i * 3 + j) // 2 + lax.rem(i, 3) + jnp.maximum(i, j)", ["int:(5,):9", "int:(5,):9"]),
    "scan_reverse": ("xs",
        "lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(3), xs, reverse=True)[1]", ["(6, 3)"]),
    "nested_scan": ("xs",
        "lax.scan(lambda c, x: (lax.fori_loop(0, 3, lambda k, a: a * 0.5 + x, c), c), "
        "jnp.zeros(4), xs)[1]", ["(5, 4)"]),
    "split": ("x", "jnp.split(x, 3, axis=1)[0] * jnp.split(x, 3, axis=1)[1]", ["(3, 6)"]),
    "sort_several": ("x", "(jnp.sort(x, axis=1), jnp.argsort(x, axis=0))", ["(5, 7)"]),
}


def source(name: str) -> str:
    args, expr, inputs = PROGRAMS[name]
    gens = []
    for k, spec in enumerate(inputs):
        if spec.startswith("int:"):
            _, shape, hi = spec.split(":")
            gens.append(f"jax.random.randint(jax.random.key({k}), {shape}, 0, {hi})")
        elif spec.startswith("pos:"):
            gens.append(f"jax.random.uniform(jax.random.key({k}), {spec[4:]}) + 0.5")
        else:
            gens.append(f"jax.random.normal(jax.random.key({k}), {spec})")
    return (f"import jax\nimport jax.numpy as jnp\nfrom jax import lax\n\n\ndef model({args}):\n"
            f"    return {expr}\n\n\ndef get_inputs():\n    return [{', '.join(gens)}]\n")


@pytest.fixture(scope="module")
def translated(tmp_path_factory):
    root = tmp_path_factory.mktemp("prims")
    cache: dict[str, object] = {}

    def get(name: str):
        if name not in cache:
            path = root / f"{name}.py"
            path.write_text(source(name))
            cache[name] = translate_job(str(path), FrontendOptions())
        return cache[name]

    return get


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_primitive_translates_and_matches_jax(name, translated):
    v = translated(name).validation
    assert (v["validated"], v["samples"]) == (True, 3), v
    assert v["max_rel_err"] < 1e-5


def _counts(t) -> tuple[int, list[int]]:
    k = t.kernels[0]
    return kernel_costs(k).flops_vector, [iteration_count(c) for c in statements(k)]


def test_pad_with_negative_and_interior_padding_writes_each_kept_element_once(translated):
    """x: 5x6, config ((1, -2, 1), (-1, 2, 2)): output 8x17 filled once (136 points); x[i, j] lands at
    (1 + 2i, -1 + 3j), inside for i < 4 and j >= 1: 4*5 = 20 copies, no FLOPs."""
    assert _counts(translated("pad_neg_interior")) == (0, [136, 20])


def test_while_loop_runs_its_static_trip_count_once_as_a_loop(translated):
    """c < 5 from 0 step 1: 5 steps of c1 * 1.5 + 1.0 on 4 elements: 2 FLOPs * 4 * 5; the carry copied
    in (4) and the final row out (4); the counter is no tensor."""
    assert _counts(translated("while_static")) == (40, [4, 20, 20, 4])


def test_sort_is_a_bitonic_network(translated):
    """4 rows of 6 keys padded to 8: 6 stages, each two statements (min, max) over the 4 pairs of every
    row with one comparison and one select; the second statement's comparison is the first's (a
    common subexpression, `analysis/vector_work.py`): 6 * 16 * (1 + 2) = 288 FLOPs (384 counted
    literally). Copy-in of 24 keys and 8 padding keys; the 5 stages of blocks k = 2, 4 have ascending
    and descending blocks (two statements of 8 pairs each per direction), the 3 of the final merge one
    direction (16 pairs); the 24 results copied out."""
    flops, counts = _counts(translated("sort"))
    assert flops == 288
    assert counts == [24, 8] + [8] * 12 + [16] * 6 + [24]


def test_cumulative_scans_and_argmin_counts(translated):
    """argmin over 7x5 along 0: the minimum (35 min=), then the index pass (eq, select, min= per
    element: 105)."""
    assert _counts(translated("argmin"))[0] == 35 + 105
    # cumprod over 5x7 along 0: 4*7 multiplies after the peeled first row
    assert _counts(translated("cumprod"))[0] == 28


def test_scatter_add_counts(translated):
    """x.at[i].add(u), 6 ids into 10 rows of 4: ids normalised (lt, add, select_n: 3 per id), then 24
    adds; the copy of x is no FLOP."""
    assert _counts(translated("scatter_add"))[0] == 18 + 24
