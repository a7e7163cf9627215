"""The translation cache keeps only translations whose ops verify, and its key covers the code a
cached entry's ops were verified with (converter, AST rules, dialect verifiers)."""

from __future__ import annotations

from pathlib import Path

from solar_compiler.frontends import Translation
from solar_compiler.frontends import cache as cache_module
from solar_compiler.frontends.job import _ops_verify
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Assign, For, Kernel, Read, TensorDecl


def _copy(bad: bool) -> Kernel:
    i = AffExpr.var("i")
    # `bad`: the loop bound names a variable no loop defines, which the `loop.for` verifier rejects
    ub = AffExpr.var("n") if bad else AffExpr.lit(4)
    return Kernel("copy", [TensorDecl("x", (4,), "f32", "input"), TensorDecl("y", (4,), "f32", "output")],
                  [For("i", AffExpr.lit(0), ub, 1, False, [Assign("y", (i,), "=", Read("x", (i,), "f32"))])])


def test_only_translations_whose_ops_verify_are_marked() -> None:
    good = Translation([_copy(bad=False)], {})
    assert _ops_verify(good) and good.ops_verified
    bad = Translation([_copy(bad=True)], {})
    assert not _ops_verify(bad) and not bad.ops_verified


def test_the_key_covers_the_dialects(monkeypatch, tmp_path) -> None:
    assert "solar_compiler.dialects" in cache_module.SHARED_PACKAGES  # the converters (dialects/convert.py)
    with_dialects = cache_module.fingerprint("v", tmp_path)
    monkeypatch.setattr(cache_module, "SHARED_PACKAGES", ())
    assert cache_module.fingerprint("v", tmp_path) != with_dialects
    assert {"loopir/rules.py", "loopir/ast.py"} <= set(cache_module.SHARED_SOURCES)


def test_the_key_covers_what_decides_validation() -> None:
    """A cached record says how a translation was validated: the executor that ran it and the checks
    that a reduced instance (with fewer layers too) is the same program are in the key."""
    package = Path(cache_module.__file__).resolve().parents[1]
    covered = {p.relative_to(package).as_posix() for pattern in cache_module.SHARED_SOURCES
               for p in package.glob(pattern)}
    assert {"loopir/repetition.py", "loopir/same_program.py", "executor/contract.py", "executor/statement.py",
            "executor/evaluate.py", "executor/compare.py"} <= covered


def test_the_suites_shared_translations_are_the_drivers_cache_hits(translation_cache, capsys) -> None:
    """What tests/translated.py translates into the session's cache (under `driver_options()`) is what
    `solar-opt FILE --translate` finds there: the suites that warm the cache first and then run the
    driver on every example rely on it (a key that differs translates each example twice)."""
    import json

    from translated import ensure_translated, using_cache

    from solar_compiler.driver import main

    path = "examples/torch/matmul.py"
    assert ensure_translated(translation_cache, [path]) == {path: None}
    with using_cache(translation_cache):
        assert main([path, "--translate", "--roofline=fused", "--hw", "H100_SXM", "--format=json"]) == 0
    assert "translation cache hit" in json.loads(capsys.readouterr().out)["validation"]["notes"]
