"""The translation cache every frontend shares: `$XDG_CACHE_HOME/solar-opt/translations/<key>.pkl`
(default `~/.cache`), a pickled `Translation`.

The key hashes the source bytes, the path as given (it is in every `loc`), the framework's version,
the frontend's fingerprint (its version string, the source of every file of its package and of the
shared modules that shape a translation, so an edited template invalidates old entries) and the
options that change the result.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pickle
import tempfile
from collections.abc import Sequence
from pathlib import Path

from solar_compiler.errors import SolarError
from solar_compiler.frontends import FrontendOptions, Translation

# shared modules whose code shapes a translation, relative to the solar_compiler package: the loop-IR
# rewrites (simplification, random-draw stripping, the reduced-size checks, with fewer layers too),
# the captured program, the builder the templates emit with, the model-file loader, the validation
# rules, and the executor that validates (its comparison and tolerances, the backward slice of sampled
# validation)
SHARED_SOURCES = ("loopir/simplify.py", "loopir/rewrite.py", "loopir/same_program.py", "loopir/repetition.py",
                  "frontends/captured_program.py", "frontends/builder/*.py", "frontends/model_file.py",
                  "frontends/validation.py", "executor/*.py",
                  # a cached translation's ops were verified (`job._ops_verify`) by the converter
                  # (dialects/convert.py, in SHARED_PACKAGES), these rules and these dialects' verifiers
                  "loopir/ast.py", "loopir/rules.py", "frontends/__init__.py",
                  # what a model spec's file runs, and the configurations from_pretrained resolves to
                  "frontends/zoo/*.py", "frontends/zoo/configs/*.json")
# packages laid out elsewhere in a source checkout (`package-dir`), found by import
SHARED_PACKAGES = ("solar_compiler.dialects",)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "solar-opt" / "translations"


def fingerprint(version: str, frontend_dir: Path, shared: Sequence[str] = SHARED_SOURCES) -> str:
    """`version` plus the source of every file under `frontend_dir` and of the `shared` modules."""
    h = hashlib.sha256(version.encode())
    for p in sorted(frontend_dir.rglob("*.py")):
        h.update(p.relative_to(frontend_dir).as_posix().encode())
        h.update(p.read_bytes())
    package = Path(__file__).resolve().parent.parent
    for pattern in shared:
        for p in sorted(package.glob(pattern)):
            h.update(p.relative_to(package).as_posix().encode())
            h.update(p.read_bytes())
    for name in SHARED_PACKAGES:
        spec = importlib.util.find_spec(name)
        for where in (spec.submodule_search_locations or []) if spec is not None else []:
            for p in sorted(Path(where).glob("*.py")):
                h.update(f"{name}/{p.name}".encode())
                h.update(p.read_bytes())
    return h.hexdigest()


def cache_key(path: str, options: FrontendOptions, framework: str, frontend_fingerprint: str) -> str:
    """The key of `path` translated with `options` by a frontend of `frontend_fingerprint`, under the
    framework version `framework` (e.g. "torch 2.13.0")."""
    try:
        source = Path(path).read_bytes()
    except OSError as e:
        raise SolarError(f"{path}:1: cannot read file: {e.strerror}", error_class="input") from None
    h = hashlib.sha256()
    opts = (options.mode, options.validate, options.time_budget, options.memory_budget_gb,
            options.llm.cache_tag() if options.llm is not None else None)
    if options.step != "forward":  # forward-only keys stay as they were
        opts = (*opts, options.step, options.optimizer)
    for part in (source, path.encode(), framework.encode(), frontend_fingerprint.encode(),
                 repr(opts).encode()):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def cache_load(key: str) -> Translation | None:
    p = cache_dir() / f"{key}.pkl"
    try:
        with open(p, "rb") as f:
            value = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    return value if isinstance(value, Translation) else None


def cache_store(key: str, value: Translation) -> None:
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, d / f"{key}.pkl")
    except OSError as e:  # a cache that cannot be written only costs time: say so
        value.notes.append(f"translation cache not written ({d}: {e.strerror})")
