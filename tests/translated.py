"""Test helpers: torch programs translated once into a private translation cache, and `solar-opt`
run in-process on them, so that a test module pays for each translation once."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from solar_compiler.driver import main

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def cached_translations(cache_dir: Path, paths: Mapping[str, str]) -> Iterator[Mapping[str, str]]:
    """Translate (and validate) every program of `paths` into a translation cache under `cache_dir`,
    where `solar-opt --translate` looks it up, with the repository root as working directory (the
    examples' paths are relative to it); both are restored on exit."""
    from solar_compiler.frontends import FrontendOptions
    from solar_compiler.frontends.cache import cache_store
    from solar_compiler.frontends.torch import frontend as fe

    old_env, old_cwd = os.environ.get("XDG_CACHE_HOME"), os.getcwd()
    os.environ["XDG_CACHE_HOME"] = str(cache_dir)
    os.chdir(ROOT)
    try:
        opts = FrontendOptions()
        for p in paths.values():
            cache_store(fe.cache_key(p, opts), fe.translate_job(p, opts))
        yield paths
    finally:
        os.chdir(old_cwd)
        if old_env is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old_env


def roofline_json(capsys, path: str, *extra: str) -> dict:
    """The JSON report of `solar-opt PATH --translate --roofline=all --hw H100_SXM EXTRA...`."""
    rc = main([path, "--translate", "--roofline=all", "--hw", "H100_SXM", "--format=json", *extra])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)
