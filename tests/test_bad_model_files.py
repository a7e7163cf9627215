"""Bad model files through the whole command, `solar-opt bad.py --translate --lift-einsum
--roofline=all -o out.txt`, as a user runs it (a real process): each failure is exactly one stderr
line naming the file, exit status 1, no traceback, nothing on stdout, and nothing written: a new
`-o` file is not created, an existing one keeps its content.

The runs are independent processes, so the fixture starts them all at once (the timeout case waits 3 s).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("torch")

SOLAR_OPT = str(Path(sys.executable).parent / "solar-opt")
HEAD = "import torch\nimport torch.nn as nn\nN = 8\n"
TAIL = "def get_inputs():\n    return [torch.randn(N, N)]\ndef get_init_inputs():\n    return []\n"


def model(forward_body: str) -> str:
    body = textwrap.indent(textwrap.dedent(forward_body), " " * 8)
    return f"{HEAD}class Model(nn.Module):\n    def forward(self, x):\n{body}{TAIL}"


# name: (source, extra arguments, message after "<file>"), line numbers counted in the source
CASES: dict[str, tuple[str, list[str], str]] = {
    "syntax": ("import torch\nclass Model(torch.nn.Module)\n    def forward(self, x):\n        return x\n",
               [], ":2: syntax error: expected ':'"),
    "no_model": (HEAD + TAIL, [],
                 ":7: missing 'Model' (expected class Model, get_inputs, get_init_inputs)"),
    "no_get_inputs": (model("return x * 2.0\n").split("def get_inputs")[0] +
                      "def get_init_inputs():\n    return []\n", [],
                      ":8: missing 'get_inputs' (expected class Model, get_inputs, get_init_inputs)"),
    "forward_raises": (model("raise ValueError('shape mismatch in forward')\n"), [],
                       ":6: forward raised ValueError: shape mismatch in forward"),
    # capture on fake tensors fails at .numpy(); the real run then allocates 4 GiB under a 1 GB limit
    "memory": (model("y = torch.ones(1024, 1024, 1024).numpy()\nreturn x + float(y[0, 0, 0])\n"),
               ["--frontend-options", "memory-gb=1"], ":6: exceeded memory limit of 1 GB"),
    "timeout": (model("while True:\n    x = x + 1.0\nreturn x\n"),
                ["--frontend-options", "timeout=1"], ": timed out after 1 s"),
}
OLD = "an earlier report\n"


@dataclass(frozen=True)
class Run:
    path: Path
    returncode: int
    stdout: str
    stderr: str
    new_out_exists: bool   # the run with a fresh -o path created it
    old_out: str           # content of the pre-existing -o file after the other run


def _solar_opt(path: Path, extra: list[str], out: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = [SOLAR_OPT, str(path), "--translate", "--lift-einsum", "--roofline=all", *extra, "-o", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def _run(name: str, root: Path) -> Run:
    source, extra, _ = CASES[name]
    d = root / name
    d.mkdir()
    path = d / "bad.py"
    path.write_text(source)
    env = {**os.environ, "XDG_CACHE_HOME": str(d / "cache")}
    fresh = _solar_opt(path, extra, d / "new.txt", env)
    (d / "old.txt").write_text(OLD)
    _solar_opt(path, extra, d / "old.txt", env)
    return Run(path, fresh.returncode, fresh.stdout, fresh.stderr, (d / "new.txt").exists(),
               (d / "old.txt").read_text())


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("bad")
    with ThreadPoolExecutor(len(CASES)) as pool:
        return dict(zip(CASES, pool.map(lambda n: _run(n, root), CASES), strict=True))


@pytest.mark.parametrize("name", list(CASES))
def test_bad_model_file_is_one_line_and_writes_nothing(name, runs):
    r = runs[name]
    assert r.stderr == f"solar-opt: error: {r.path}{CASES[name][2]}\n"
    assert (r.returncode, r.stdout) == (1, "")
    assert "Traceback" not in r.stderr
    assert not r.new_out_exists
    assert r.old_out == OLD


def test_memory_limit_message_follows_the_cause_chain():
    """The capture wraps a failed allocation (`raise CaptureError(...) from exc`) and translate_job
    re-raises it as a SolarError; the sandboxed job reports the limit, with the line when named."""
    from solar_compiler.errors import SolarError
    from solar_compiler.frontends.sandbox import memory_limit_message

    def wrapped(msg: str, cause: BaseException) -> SolarError:
        try:
            try:
                raise cause
            except BaseException as e:
                raise RuntimeError("capture failed") from e
        except RuntimeError as e:
            try:
                raise SolarError(msg) from None  # __context__ still links the chain
            except SolarError as s:
                assert s.__context__ is e
                return s

    e = wrapped("m.py:6: forward raised RuntimeError: [enforce fail] ...", MemoryError())
    assert memory_limit_message(e, "m.py", 1.0) == "m.py:6: exceeded memory limit of 1 GB"
    e = wrapped("m.py: forward raised ...", RuntimeError("DefaultCPUAllocator: can't allocate memory"))
    assert memory_limit_message(e, "m.py", 0.5) == "m.py: exceeded memory limit of 0.5 GB"
    e = wrapped("m.py:6: forward raised ValueError: bad shape", ValueError("bad shape"))
    assert memory_limit_message(e, "m.py", 1.0) is None
