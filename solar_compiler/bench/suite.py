"""Which model files a `solar-bench` run covers, and their groups.

`solar-bench DIR|FILE...`: a FILE is one model, in the group named after its folder; a DIR
contributes its own `*.py` files (group: the folder's name) and each sub-folder holding `*.py` files
as a group of its own (group: the sub-folder's path below DIR, e.g. `level1` for a KernelBench
checkout's `KernelBench/`). Files whose name starts with `_` or `.` are skipped (`__init__.py`).
A model spec (`'hf:llama-2-7b --phase decode --kv-len 4096'`, one argument) is its generated model
file, in the group `hf`.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path

from solar_compiler.errors import SolarError


@dataclass(frozen=True)
class Unit:
    """One model file of the suite. `path` is as given (relative to `cwd` when not absolute), so
    that reports show it as the user wrote it; `sha256` is the file's content at discovery."""

    group: str
    name: str  # file name, e.g. 1_Square_matrix_multiplication_.py
    path: str
    cwd: str
    sha256: str

    @property
    def key(self) -> str:
        return f"{self.group}/{self.name}"

    @property
    def stem(self) -> str:
        return self.name[:-3] if self.name.endswith(".py") else self.name

    def as_dict(self) -> dict:
        return asdict(self)


def _model_files(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix == ".py" and not p.name.startswith(("_", "."))
    )


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def discover(args: list[str], cwd: str | None = None) -> list[Unit]:
    """The units of `args` in order (DIR: its files, then its sub-folders by name), each file once."""
    cwd = cwd or os.getcwd()
    units: list[Unit] = []
    seen: set[str] = set()

    def add(group: str, p: Path, shown: str) -> None:
        real = str(p.resolve())
        if real in seen:
            return
        seen.add(real)
        units.append(Unit(group, p.name, shown, cwd, _sha(p)))

    for arg in args:
        if arg.startswith("hf:"):  # a model spec, its flags in the same argument (docs/model-zoo.md)
            from solar_compiler.frontends.zoo.spec import parse_request, write_model_file

            req, rest = parse_request(shlex.split(arg))
            if req is None or len(rest) != 1:
                raise SolarError(f"{arg}: a spec in a suite takes only its own flags (--batch --seq --dtype "
                                 f"--phase --kv-len --config) and KEY=VAL overrides")
            f = write_model_file(req)
            add("hf", f, str(f))
            continue
        p = Path(arg)
        full = p if p.is_absolute() else Path(cwd) / p
        if full.is_file():
            if full.suffix != ".py":
                raise SolarError(f"{arg}: not a model file (.py)")
            add(full.resolve().parent.name or "models", full, arg)
        elif full.is_dir():
            name = full.resolve().name or "models"
            for f in _model_files(full):
                add(name, f, str(p / f.name))
            for sub in sorted(d for d in full.rglob("*") if d.is_dir() and not d.name.startswith((".", "_"))):
                rel = sub.relative_to(full)
                if any(part.startswith((".", "_")) for part in rel.parts):
                    continue
                for f in _model_files(sub):
                    add(rel.as_posix(), f, str(p / rel / f.name))
        else:
            raise SolarError(f"{arg}: no such file or directory")
    if not units:
        raise SolarError(f"no model files (*.py) in {' '.join(args)}")
    return units
