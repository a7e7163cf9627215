"""Test helpers: programs translated once per test session into one shared translation cache, and
`solar-opt` run in-process on them, so that the suite pays for each translation once (the cache key
hashes the source, the path as given, the options and the frontend's code, so sharing it across test
modules cannot hand one program's translation to another)."""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from solar_compiler.driver import main

ROOT = Path(__file__).resolve().parent.parent
# every bundled torch example, as the tests name it (relative to ROOT: the path is in the cache key)
TORCH_EXAMPLES = tuple(sorted(f"examples/torch/{p.name}" for p in (ROOT / "examples" / "torch").glob("*.py")))


def driver_options():
    """The frontend options of `solar-opt FILE --translate` with no other option: the `translate`
    pass's default `--frontend=auto` passes the LLM fallback's configuration, which is part of the
    cache key (`FrontendOptions()` alone keys another entry, one the driver never finds). A program
    translated into the cache under these is a cache hit for the driver."""
    from solar_compiler.frontends import FrontendOptions
    from solar_compiler.frontends.llm.config import LLMConfig

    return FrontendOptions(llm=LLMConfig.resolve())


def session_cache_dir(basetemp: Path) -> Path:
    """The XDG cache directory the whole session shares: under pytest-xdist the workers' base
    directories share a parent, so they share it too (entries are written atomically)."""
    return (basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp) / "xdg-shared"


def _translate_one(path: str) -> tuple[str, str | None]:
    """Translate (and validate) `path` into the cache `XDG_CACHE_HOME` names; its one-line error or None."""
    from solar_compiler.errors import SolarError
    from solar_compiler.frontends.cache import cache_store
    from solar_compiler.frontends.torch import frontend as fe

    opts = driver_options()
    try:
        cache_store(fe.cache_key(path, opts), fe.translate_job(path, opts))
        return path, None
    except SolarError as e:
        return path, str(e)


def _worker_init(cache_dir: str) -> None:
    os.environ["XDG_CACHE_HOME"] = cache_dir
    os.chdir(ROOT)


def ensure_translated(cache_dir: Path, paths: Iterable[str]) -> dict[str, str | None]:
    """Translate every program of `paths` not yet in the cache under `cache_dir` (relative paths are
    relative to ROOT); per path, the translation's one-line error or None. Several missing programs
    are translated by two spawned workers (each imports torch once), one in this process; under
    pytest-xdist the workers share them out instead (`_translate_shared`)."""
    from solar_compiler.frontends.cache import cache_dir as store
    from solar_compiler.frontends.torch import frontend as fe

    paths = list(dict.fromkeys(paths))
    with using_cache(cache_dir):
        opts = driver_options()
        missing = [p for p in paths if not (store() / f"{fe.cache_key(p, opts)}.pkl").is_file()]
        if os.environ.get("PYTEST_XDIST_WORKER"):
            errors = _translate_shared(cache_dir, missing)
        elif len(missing) > 2:
            with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"),
                                     initializer=_worker_init, initargs=(str(cache_dir),)) as pool:
                errors = dict(pool.map(_translate_one, missing))
        else:
            errors = dict(map(_translate_one, missing))
    return {p: errors.get(p) for p in paths}


def _translate_shared(cache_dir: Path, missing: list[str]) -> dict[str, str | None]:
    """Under pytest-xdist: translate `missing` in this worker, sharing the work with the other
    workers through one lock file per program (the workers are the parallelism, so no pool). A
    program another worker holds is skipped at first and waited for at the end; one that is still
    not in the cache then (its translation failed there) is translated here for its error."""
    from solar_compiler.frontends.cache import cache_dir as store
    from solar_compiler.frontends.torch import frontend as fe

    opts = driver_options()
    locks = cache_dir / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    errors: dict[str, str | None] = {}
    for blocking in (False, True):
        for p in [p for p in missing if p not in errors]:
            key = fe.cache_key(p, opts)
            with open(locks / f"{key}.lock", "w") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
                except BlockingIOError:
                    continue
                errors[p] = None if (store() / f"{key}.pkl").is_file() else _translate_one(p)[1]
    return errors


@contextmanager
def using_cache(cache_dir: Path) -> Iterator[Path]:
    """`XDG_CACHE_HOME` set to `cache_dir` and the repository root as working directory (the
    examples' paths are relative to it); both are restored on exit."""
    old_env, old_cwd = os.environ.get("XDG_CACHE_HOME"), os.getcwd()
    os.environ["XDG_CACHE_HOME"] = str(cache_dir)
    os.chdir(ROOT)
    try:
        yield cache_dir
    finally:
        os.chdir(old_cwd)
        if old_env is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old_env


@contextmanager
def cached_translations(cache_dir: Path, paths: Mapping[str, str]) -> Iterator[Mapping[str, str]]:
    """Every program of `paths` translated (and validated) into the translation cache under
    `cache_dir`, where `solar-opt --translate` looks it up, with the repository root as working
    directory; both are restored on exit. A program that does not translate is an error here."""
    errors = {p: e for p, e in ensure_translated(cache_dir, paths.values()).items() if e is not None}
    assert not errors, errors
    with using_cache(cache_dir):
        yield paths


@contextmanager
def translated_programs(tmp: Path, programs: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """Each program text of `programs` written to `tmp/NAME.py` and translated into a private cache
    under `tmp` (`cached_translations`); yields NAME -> path."""
    paths = {}
    for name, text in programs.items():
        (tmp / f"{name}.py").write_text(text)
        paths[name] = str(tmp / f"{name}.py")
    with cached_translations(tmp / "xdg", paths):
        yield paths


def forward_program(sig: str, body: str, inputs: str) -> str:
    """The text of a model file whose `Model.forward(SIG)` runs `body` (lines of Python) on `inputs`
    (the text of `get_inputs()`'s list), for `translated_programs`."""
    lines = "".join(f"        {line}\n" for line in body.strip().splitlines())
    return ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
            f"    def forward(self, {sig}):\n{lines}\n\ndef get_inputs():\n    return [{inputs}]\n\n\n"
            "def get_init_inputs():\n    return []\n")


def roofline_json(capsys, path: str, *extra: str) -> dict:
    """The JSON report of `solar-opt PATH --translate --roofline=all --hw H100_SXM EXTRA...`."""
    rc = main([path, "--translate", "--roofline=all", "--hw", "H100_SXM", "--format=json", *extra])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def validated_json(capsys, path: str, *extra: str) -> dict:
    """`roofline_json`, after checking that the translation validated."""
    r = roofline_json(capsys, path, *extra)
    assert r["validation"]["validated"], r["validation"]
    return r


def fused_terms(r: dict, hw: str = "H100_SXM") -> float:
    """The fused bound's resource part (matrix, vector, memory) in report `r`, after checking that the
    bound is it or the latency floor, whichever is larger (the floor: tests/test_latency_floor.py):
    what a rewrite changes even where a small program's bound is the floor."""
    b = r["bounds"][hw]
    terms = max(b["fused_terms_s"].values())
    assert b["fused_s"] == max(terms, b["latency_floor_s"])
    return terms


#: Bundled torch examples that must fail with a one-line error (example file -> the error's text):
#: the suites that translate every example leave them out; test_torch_frontend checks the error.
UNSUPPORTED_TORCH_EXAMPLES: dict[str, str] = {
    "item_loop_dot.py": "item_loop_dot.py:17: forward reads tensor values into Python more than 64 times",
}
