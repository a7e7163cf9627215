"""Progress lines (`solar_compiler/progress.py`): one status line per phase on stderr when it is a
terminal, none under --quiet or when stderr is not a terminal; the sandboxed child's phases reach
the parent's stderr."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

from solar_compiler import progress
from solar_compiler.driver import main

MATMUL = str(Path(__file__).resolve().parent.parent / "examples/loop/matmul.loop")
LINE = re.compile(r"^solar-opt: \[ *\d+\.\d+s\] (\w+)(: .*)?$")


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def phases(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        assert m, line
        out.append(m.group(1))
    return out


def test_a_terminal_gets_one_line_per_phase(monkeypatch, capsys):
    err = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert main([MATMUL, "--roofline=all", "--hw", "H100_SXM"]) == 0
    assert phases(err.getvalue()) == ["narrow", "lift", "bound", "done"]
    assert "bound: every fidelity on H100_SXM" in err.getvalue()
    assert capsys.readouterr().out.startswith("solar-opt roofline report")  # stdout has the report only
    assert not progress.enabled()  # off again after the run


def test_quiet_or_no_terminal_prints_nothing(monkeypatch, capsys):
    err = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert main([MATMUL, "--roofline=all", "--hw", "H100_SXM", "--quiet"]) == 0
    assert err.getvalue() == ""
    monkeypatch.undo()
    assert main([MATMUL, "--roofline=all", "--hw", "H100_SXM"]) == 0
    assert capsys.readouterr().err == ""  # pytest's capture is not a terminal


def test_the_sandboxed_child_reports_on_the_parents_stream(tmp_path):
    from solar_compiler.frontends.sandbox import run_in_child

    log = tmp_path / "stderr.txt"
    with open(log, "w") as stream:
        progress.enable(stream)
        try:
            assert run_in_child(progress.phase, "capture", "from the child", timeout_s=60) is None
        finally:
            progress.disable()
    assert phases(log.read_text()) == ["capture"]
    assert log.read_text().rstrip().endswith("capture: from the child")
    assert run_in_child(progress.phase, "capture", "nobody listens", timeout_s=60) is None  # off: no fd
    assert log.read_text().count("\n") == 1
