"""Bad JAX model files through the whole command, as the PyTorch ones in test_bad_model_files.py:
`solar-opt bad.py --translate --lift-einsum --roofline=all -o out.txt` prints exactly one stderr line
naming the file (and line), exits 1, prints nothing on stdout and writes nothing (a new `-o` file is
not created, an existing one keeps its content). The frontend is chosen by the `import jax`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("jax")

SOLAR_OPT = str(Path(sys.executable).parent / "solar-opt")
HEAD = "import jax\nimport jax.numpy as jnp\nN = 8\n"
TAIL = "def get_inputs():\n    return [jnp.ones((N, N))]\n"
EXPECTED = "(expected def model(*inputs) or class Model, get_inputs, optionally get_init_inputs)"


def model(body: str) -> str:
    return f"{HEAD}def model(x):\n{textwrap.indent(textwrap.dedent(body), ' ' * 4)}{TAIL}"


# name: (source, extra arguments, message after "<file>"), line numbers counted in the source
CASES: dict[str, tuple[str, list[str], str]] = {
    "syntax": ("import jax\ndef model(x)\n    return x\n", [], ":2: syntax error: expected ':'"),
    "no_model": (HEAD + TAIL, [], f":5: missing 'model' or 'Model' {EXPECTED}"),
    "no_get_inputs": (model("return x * 2.0\n").split("def get_inputs")[0], [],
                      f":5: missing 'get_inputs' {EXPECTED}"),
    "model_raises": (model("raise ValueError('shape mismatch in model')\n"), [],
                     ":5: model raised ValueError: shape mismatch in model"),
    "nnx_init_raises": (HEAD + "from flax import nnx\nclass Model(nnx.Module):\n"
                        "    def __init__(self, rngs):\n        raise RuntimeError('bad init')\n"
                        "    def __call__(self, x):\n        return x\n" + TAIL, [],
                        ":7: Model.__init__ raised RuntimeError: bad init"),
    "no_template": (model("return jax.lax.erf_inv(x)\n"), [],
                    ":5: no loop-IR template for jax primitive 'erf_inv' (%x -> f32[8, 8])"),
    "data_dependent": (model("return jax.lax.cond(x[0, 0] > 0, lambda v: v + 1.0, lambda v: v, x)\n"), [],
                       ":5: cond on a data-dependent predicate has no loop-IR template (in jax.cond)"),
    # tracing allocates 8 GiB of numpy ones under a 1 GB limit
    "memory": (model("y = np.ones((1024, 1024, 1024))\nreturn x + float(y[0, 0, 0])\n")
               .replace("import jax\n", "import jax\nimport numpy as np\n", 1),
               ["--frontend-options", "memory-gb=1"], ":6: exceeded memory limit of 1 GB"),
    "timeout": (model("while True:\n    x = x + 1.0\nreturn x\n"), ["--frontend-options", "timeout=1"],
                ": timed out after 1 s"),
}
OLD = "an earlier report\n"


def _run(name: str, root: Path) -> tuple[Path, subprocess.CompletedProcess, bool, str]:
    source, extra, _ = CASES[name]
    d = root / name
    d.mkdir()
    path = d / "bad.py"
    path.write_text(source)
    env = {**os.environ, "XDG_CACHE_HOME": str(d / "cache")}
    cmd = [SOLAR_OPT, str(path), "--translate", "--lift-einsum", "--roofline=all", *extra]
    fresh = subprocess.run([*cmd, "-o", str(d / "new.txt")], capture_output=True, text=True, env=env,
                           timeout=300)
    (d / "old.txt").write_text(OLD)
    subprocess.run([*cmd, "-o", str(d / "old.txt")], capture_output=True, text=True, env=env, timeout=300)
    return path, fresh, (d / "new.txt").exists(), (d / "old.txt").read_text()


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("jaxbad")
    with ThreadPoolExecutor(3) as pool:
        return dict(zip(CASES, pool.map(lambda n: _run(n, root), CASES), strict=True))


@pytest.mark.parametrize("name", list(CASES))
def test_bad_jax_file_is_one_line_and_writes_nothing(name, runs):
    path, r, new_exists, old = runs[name]
    assert r.stderr == f"solar-opt: error: {path}{CASES[name][2]}\n"
    assert (r.returncode, r.stdout) == (1, "")
    assert not new_exists
    assert old == OLD
