"""Per-model results in `--out`, written as each model finishes, so a rerun resumes.

    OUT/models/<group>/<stem>.bounds.json    status, error class and message, seconds, peak memory,
                                             the run that computed it, and the fingerprint of what
                                             the bounds depend on (hw, mode, precision, ..., file sha)
    OUT/models/<group>/<stem>.report.json    the model's own `solar-report/1` report
    OUT/models/<group>/<stem>.measure.json   timing statistics (with their own fingerprint)
    OUT/models/<group>/<stem>.log            the sandbox's stdout/stderr

A record is reused when its fingerprint matches (`--force` recomputes); a model whose sandbox was
killed by a cancellation has no record, so the rerun computes it. Writes are atomic (temp + rename).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .suite import Unit

VERSION = "solar-bench/1"


def fingerprint(fields: dict[str, Any], unit: Unit) -> str:
    text = json.dumps({"v": VERSION, "sha256": unit.sha256, **fields}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, default=str)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


class Store:
    def __init__(self, out: Path):
        self.out = out
        self.models = out / "models"

    def base(self, unit: Unit) -> Path:
        return self.models / unit.group / unit.stem

    def path(self, unit: Unit, kind: str) -> Path:
        return self.base(unit).with_name(f"{unit.stem}.{kind}")

    def load(self, unit: Unit, kind: str, fp: str) -> dict[str, Any] | None:
        """The record of `kind` ("bounds" or "measure") when it was computed with fingerprint `fp`."""
        rec = read_json(self.path(unit, f"{kind}.json"))
        return rec if isinstance(rec, dict) and rec.get("fingerprint") == fp else None

    def save(self, unit: Unit, kind: str, record: dict[str, Any], report: dict | None = None) -> None:
        if report is not None:
            write_json(self.path(unit, "report.json"), report)
        write_json(self.path(unit, f"{kind}.json"), record)

    def report(self, unit: Unit) -> dict[str, Any] | None:
        return read_json(self.path(unit, "report.json"))
