"""The bundled targets (``hw_targets/*.yaml``, package ``solar_compiler.hw_targets``), lookup by name or
path, and ``--hw`` lists. ``host`` is delegated to ``solar_compiler.hw.host`` (measured and cached)."""

from __future__ import annotations

import difflib
import importlib.resources
import logging
import os
from importlib.resources.abc import Traversable
from pathlib import Path

from solar_compiler.hw import host
from solar_compiler.hw.errors import HwTargetError
from solar_compiler.hw.model import HOST, HwTarget
from solar_compiler.hw.schema import load_file, parse

log = logging.getLogger(__name__)


def _bundled_dir() -> Traversable:
    """The bundled targets: the installed package data, or hw_targets/ of a source checkout."""
    try:
        return importlib.resources.files("solar_compiler.hw_targets")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "hw_targets"


def _bundled() -> dict[str, Traversable]:
    files = {}
    for entry in _bundled_dir().iterdir():
        if entry.name.endswith(".yaml") and entry.is_file():
            files[entry.name[: -len(".yaml")]] = entry
    return dict(sorted(files.items()))


def available_targets() -> list[str]:
    """Names ``load_target`` accepts without a path: the bundled targets plus ``host``."""
    return [*_bundled(), HOST]


def load_target(name_or_path: str | os.PathLike[str]) -> HwTarget:
    """Load a bundled target by name (case-insensitive), ``host`` (measured on first use and cached),
    or a user YAML file by path. Raises ``HwTargetError`` listing the available names otherwise."""
    text = os.fspath(name_or_path)
    bundled = _bundled()
    by_lower = {k.lower(): k for k in bundled}
    if text.lower() in by_lower:
        key = by_lower[text.lower()]
        entry = bundled[key]
        target = parse(entry.read_text(encoding="utf-8"), entry.name, str(entry))
        if target.name != key:
            raise HwTargetError(
                f"{entry.name}: field 'name': expected {key!r} (the file name), got {target.name!r}"
            )
        return target
    if text.lower() == HOST:
        cache = host.host_cache_path()
        if not cache.is_file():
            log.info("no host calibration at %s; measuring this machine", cache)
            return host.calibrate_host(cache, force=True)  # a busy machine warns; rerun to raise figures
        return load_file(cache)
    path = Path(text).expanduser()
    if path.suffix in (".yaml", ".yml") or os.sep in text or "/" in text or path.exists():
        if not path.is_file():
            raise HwTargetError(f"{text}: no such hardware target file")
        return load_file(path)
    raise HwTargetError(
        f"unknown hardware target {text!r}{_closest(text)}; available: {', '.join(available_targets())}"
        " (or a path to a .yaml file)"
    )


def _closest(text: str) -> str:
    """'; did you mean H100_PCIe or H100_SXM?' for a near miss (case-insensitive), else ''. Names the
    text is a prefix of come first ("h100"), then the closest spelling ("h200_sxm" -> H200)."""
    names = {n.lower(): n for n in available_targets()}
    close = [n for n in names if n.startswith(text.lower())]
    if not close:
        close = difflib.get_close_matches(text.lower(), list(names), n=1, cutoff=0.5)
    if not close:
        return ""
    words = [names[c] for c in close]
    return f"; did you mean {', '.join(words[:-1]) + ' or ' if len(words) > 1 else ''}{words[-1]}?"


def parse_hw_list(spec: str) -> list[HwTarget]:
    """Parse a comma-separated ``--hw`` value ("H100_SXM,H200,my.yaml") into targets, in order,
    without duplicates."""
    names = [part.strip() for part in spec.split(",") if part.strip()]
    if not names:
        raise HwTargetError(f"empty hardware list {spec!r}; available: {', '.join(available_targets())}")
    out: list[HwTarget] = []
    for name in names:
        target = load_target(name)
        if all((t.name, t.path) != (target.name, target.path) for t in out):
            out.append(target)
    return out
