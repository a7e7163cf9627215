"""Mutated examples either go through the whole pipeline or fail with the tool's own diagnostic.

The mutations and the pipeline (parse, check_bounds, conversion, verify, text and MLIR printers with
their re-parses, loop-stats counts and footprints) are those of `benchmarks/fuzz_loop.py`, which
runs the same check at scale (`--n 10000`).
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parent.parent


def _load_fuzzer():
    spec = importlib.util.spec_from_file_location("fuzz_loop", REPO / "benchmarks" / "fuzz_loop.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fuzz_loop", mod)
    spec.loader.exec_module(mod)
    return mod


fuzz = _load_fuzzer()
SOURCES = fuzz.examples()


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_examples_pass_the_pipeline(name: str) -> None:
    assert fuzz.run_pipeline(SOURCES[name], name) == "ok"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SOURCES)), st.integers(0, 2**32 - 1))
def test_mutants_fail_only_with_diagnostics(name: str, seed: int) -> None:
    text = fuzz.mutate(random.Random(seed), SOURCES[name])
    try:
        fuzz.run_pipeline(text)
    except fuzz.DIAGNOSTICS as e:
        if not isinstance(e, fuzz.ParseError | fuzz.VerifyException):
            assert "\n" not in str(e).strip(), f"multi-line diagnostic for:\n{text}"


@pytest.mark.parametrize(("text", "kind"), [
    ("kernel k(C: f32[4] output):\n    for i in range(4):\n        C[i] = 0.0\n      C[0] = 1.0\n",
     "LoopIRError"),
    ("kernel k(C: f32[18446744073709551617] output):\n    C[0] = 0.0\n", "LoopIRError"),
    ("kernel k(A: f32[4] input, C: f32[4] output):\n    for i in range(4):\n        C[i] = A[i - -0.0]\n",
     "LoopIRError"),
])
def test_former_crashes_are_diagnostics(text: str, kind: str) -> None:
    """Inputs the fuzzer found escaping as lark.DedentError, a ValueError from xDSL's i64 attribute,
    and a float index literal that printed back as a different (affine) program."""
    assert fuzz.classify(text) == ("diagnostic", kind)


def test_non_affine_read_index_is_an_indirect_read() -> None:
    """`i * i` used to escape as AffineError; in a read it is now a (data-independent) gather index."""
    ok = "kernel k(A: f32[16] input, C: f32[4] output):\n    for i in range(4):\n        C[i] = A[i * i]\n"
    assert fuzz.run_pipeline(ok) == "ok"
