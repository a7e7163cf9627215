"""Which model files a `solar-bench` run covers, and their groups.

`solar-bench DIR|FILE...`: a FILE is one model, in the group named after its folder; a DIR
contributes its own `*.py` files (group: the folder's name) and each sub-folder holding `*.py` files
as a group of its own (group: the sub-folder's path below DIR, e.g. `level1` for a KernelBench
checkout's `KernelBench/`). Files whose name starts with `_` or `.` are skipped (`__init__.py`).

A SOL-ExecBench problem folder (one with `definition.json`, given or found below DIR) is one unit
per workload: the model file generated for that workload (`frontends/solexec`), named after the
problem folder (`model` in results.csv) with the workload's uuid (`workload`); its group is the
folder it sits in; its precision policy follows the workload's tolerance (`Unit.precision`). Nothing
below a problem folder is a model file of its own (`kernel.py`, `reference.py` are the problem's).

A model spec (`'hf:llama-2-7b --phase decode --kv-len 4096'`, `'timm:vit_base_patch16_224 --batch 8'`,
one argument) is its generated model file, in the group of its library (`hf`, `torchvision`, `timm`).
"""

from __future__ import annotations

import hashlib
import os
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path

from solar_compiler.errors import SolarError
from solar_compiler.frontends.solexec.problem import (
    generated_dir,
    is_problem_dir,
    load_problem,
    precision_policy,
    write_model_files,
)
from solar_compiler.frontends.zoo.spec import is_spec, parse_request, write_model_file


@dataclass(frozen=True)
class Unit:
    """One model file of the suite. `path` is as given (relative to `cwd` when not absolute), so
    that reports show it as the user wrote it; `sha256` is the file's content at discovery."""

    group: str
    name: str  # file name, e.g. 1_Square_matrix_multiplication_.py
    path: str
    cwd: str
    sha256: str
    workload: str | None = None  # a SOL-ExecBench workload's uuid (name: its problem folder)
    # a SOL-ExecBench workload's precision policy and why (its tolerance: `precision_policy`); a
    # --precision given to solar-bench wins
    precision: str | None = None
    precision_reason: str | None = None

    @property
    def key(self) -> str:
        return f"{self.group}/{self.name}" + (f"@{self.workload}" if self.workload else "")

    @property
    def stem(self) -> str:
        stem = self.name[:-3] if self.name.endswith(".py") else self.name
        if self.workload:
            stem += "." + "".join(c if c.isalnum() or c in "-_" else "_" for c in self.workload)
        return stem

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

    def add_problem(group: str, folder: Path) -> None:
        problem = load_problem(folder)
        files = write_model_files(problem, list(range(len(problem.workloads))), generated_dir())
        name = folder.resolve().name
        for (label, path), w in zip(files, problem.workloads, strict=True):
            real = f"{folder.resolve()}@{label}"
            if real not in seen:
                seen.add(real)
                policy, why = precision_policy(w)
                units.append(Unit(group, name, str(path), cwd, _sha(path), str(w.get("uuid", label)),
                                  policy, why))

    for arg in args:
        if is_spec(arg):  # a model spec, its flags in the same argument (docs/model-zoo.md)
            req, rest = parse_request(shlex.split(arg))
            if req is None or len(rest) != 1:
                raise SolarError(f"{arg}: a spec in a suite takes only its own flags (--batch --seq --dtype "
                                 f"--phase --kv-len --config --image-size) and KEY=VAL overrides")
            f = write_model_file(req)
            add(req.library, f, str(f))
            continue
        p = Path(arg)
        full = p if p.is_absolute() else Path(cwd) / p
        if full.is_file():
            if full.suffix != ".py":
                raise SolarError(f"{arg}: not a model file (.py)")
            add(full.resolve().parent.name or "models", full, arg)
        elif is_problem_dir(full):
            add_problem(full.resolve().parent.name or "problems", full)
        elif full.is_dir():
            name = full.resolve().name or "models"
            for f in _model_files(full):
                add(name, f, str(p / f.name))
            problems: list[Path] = []
            for sub in sorted(d for d in full.rglob("*") if d.is_dir() and not d.name.startswith((".", "_"))):
                rel = sub.relative_to(full)
                if any(part.startswith((".", "_")) for part in rel.parts) or any(
                        q in sub.parents for q in problems):
                    continue
                if is_problem_dir(sub):
                    problems.append(sub)
                    add_problem(rel.parent.as_posix() if rel.parent != Path(".") else name, sub)
                    continue
                for f in _model_files(sub):
                    add(rel.as_posix(), f, str(p / rel / f.name))
        else:
            raise SolarError(f"{arg}: no such file or directory")
    if not units:
        raise SolarError(f"no model files (*.py) or problem folders in {' '.join(args)}")
    return units
