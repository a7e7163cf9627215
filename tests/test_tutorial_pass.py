"""The tutorial pass of docs/writing-a-pass.md (examples/passes/node_intensity.py): registered the
way the tutorial says, through the `solar_compiler.passes` entry point of a package of its own
(simulated here by that package's metadata on sys.path, so the test needs no pip install), it runs
in `solar-opt` and prints the hand-derived figures."""

from __future__ import annotations

import tomllib
from pathlib import Path

from solar_compiler.driver import main
from solar_compiler.passes import all_passes

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples/passes"


def _register(tmp_path: Path, monkeypatch) -> None:
    """What `pip install examples/passes` leaves on sys.path: the module and a dist-info whose
    entry_points.txt carries the pyproject's one registering line."""
    dist = tmp_path / "solar_node_intensity-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: solar-node-intensity\nVersion: 0.1.0\n")
    eps = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]["entry-points"]
    lines = [f"{k} = {v}" for k, v in eps["solar_compiler.passes"].items()]
    (dist / "entry_points.txt").write_text("\n".join(["[solar_compiler.passes]", *lines, ""]))
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.syspath_prepend(str(tmp_path))


def test_the_tutorial_pass_is_short_and_is_the_one_the_tutorial_shows():
    code = (EXAMPLE / "node_intensity.py").read_text()
    assert len(code.splitlines()) < 50
    assert f"```python\n{code}```" in (ROOT / "docs/writing-a-pass.md").read_text()


def test_entry_point_registers_the_pass(tmp_path, monkeypatch):
    _register(tmp_path, monkeypatch)
    cls = all_passes()["node-intensity"]()
    assert cls.name == "node-intensity"


def test_tutorial_pass_on_matmul(tmp_path, monkeypatch, capsys):
    """C[64, 16] = A[64, 32] @ B[32, 16] f32: 2 * 64 * 16 * 32 = 65536 FLOPs; A 8192 + B 2048 + C 4096
    = 14336 bytes; 65536 / 14336 = 4.571 FLOP/byte, below a ridge of 10."""
    _register(tmp_path, monkeypatch)
    rc = main([str(ROOT / "examples/loop/matmul.loop"), "-p", "lift-einsum,node-intensity{ridge=10.0}",
               "-o", str(tmp_path / "out.mlir")])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert err.splitlines() == [
        "// node-intensity: matmul S1 matrix flops=65536 bytes=14336 intensity=4.571 memory-bound"]
