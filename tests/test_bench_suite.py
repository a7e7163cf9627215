"""solar-bench end to end (real torch, real forks): planted failures and their error classes, timing,
resume after a kill, cancellation (SIGTERM/SIGINT to solar-opt and solar-bench mid-capture leave no
process), and Ray (two workers on a local Ray give the process pool's rows)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
BENCH = [sys.executable, "-c", "import sys; from solar_compiler.bench.cli import main; sys.exit(main())"]
OPT = [sys.executable, "-c", "import sys; from solar_compiler.driver import main; sys.exit(main())"]
STABLE = (
    "group",
    "model",
    "target",
    "status",
    "error_class",
    "error",
    "validated",
    "flops",
    "bytes_unfused",
    "bytes_fused",
    "bytes_cache_aware",
    "unfused_s",
    "fused_s",
    "cache_aware_s",
    "report",
)

TAIL = """

def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    return []
"""


def model(body: str) -> str:
    return "import torch\nimport torch.nn as nn\nN = 16\n\n\n" + textwrap.dedent(body) + TAIL


GOOD = model("""\
    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x @ x) * 2.0
    """)
MATMUL_SOFTMAX = model("""\
    class Model(nn.Module):
        def forward(self, x):
            return torch.softmax(x @ x.t(), dim=-1)
    """)
SYNTAX = "import torch\nclass Model(torch.nn.Module):\n    def forward(self x):\n        return x\n"
UNSUPPORTED = model("""\
    class Model(nn.Module):
        def forward(self, x):
            return torch.linalg.det(x)
    """)
SLEEPER = model("""\
    import time
    class Model(nn.Module):
        def forward(self, x):
            time.sleep(600)
            return x
    """)
HOG = model("""\
    class Model(nn.Module):
        def forward(self, x):
            scratch = bytearray(8 << 30)  # 8 GiB, really allocated (tensors are fake during capture)
            return x + len(scratch)
    """)
SEGV = model("""\
    import ctypes
    class Model(nn.Module):
        def forward(self, x):
            ctypes.string_at(0)
            return x
    """)


def slow_capture(marker: Path) -> str:
    """A forward that announces itself, then loops over .item() calls at 100% CPU (a slow capture)."""
    return model(f"""\
        class Model(nn.Module):
            def forward(self, x):
                open({str(marker)!r}, "w").close()
                s = 0.0
                for i in range(2048 * 100000):
                    s += float(x[i % N, 0].item())
                return x * s
        """)


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def bench(args: list[str], cwd: Path, timeout: float = 400) -> subprocess.CompletedProcess:
    env = dict(os.environ, XDG_CACHE_HOME=str(cwd / "cache"))
    return subprocess.run(BENCH + args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def rows(out: Path) -> list[dict]:
    return json.loads((out / "results.json").read_text())["rows"]


# ---- process-tree helpers -------------------------------------------------------------------------
def _ppids() -> dict[int, int]:
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                if fields[0] != "Z":
                    out[int(d.name)] = int(fields[1])
            except (OSError, ValueError):
                continue
    return out


def descendants(pid: int) -> set[int]:
    pp = _ppids()
    found, frontier = set(), {pid}
    while frontier:
        frontier = {c for c, p in pp.items() if p in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int], grace_s: float = 10.0) -> set[int]:
    """The processes of `pids` still running after `grace_s`: SIGKILL is asynchronous, and a process
    with a large address space (torch) takes a moment to be torn down after the tool has exited."""
    deadline = time.monotonic() + grace_s
    while (left := set(pids) & set(_ppids())) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


# ---- planted failures ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    base = tmp_path_factory.mktemp("planted")
    write(base / "suite" / "ok", {"good.py": GOOD, "matmul_softmax.py": MATMUL_SOFTMAX})
    write(
        base / "suite" / "bad",
        {
            "syntax.py": SYNTAX,
            "unsupported.py": UNSUPPORTED,
            "sleeper.py": SLEEPER,
            "hog.py": HOG,
            "segv.py": SEGV,
        },
    )
    t0 = time.monotonic()
    done = bench(
        [
            "suite",
            "--hw",
            "H100_SXM,H200",
            "--workers",
            "2",
            "--timeout",
            "20",
            "--memory-gb",
            "1",
            "--no-cache",
            "--out",
            "out",
        ],
        base,
    )
    return base, done, time.monotonic() - t0


def test_planted_failures_are_recorded_with_their_class_and_the_suite_finishes(planted):
    base, done, _ = planted
    assert done.returncode == 0, done.stderr
    got = {(r["group"], r["model"], r["target"]): r for r in rows(base / "out")}
    assert len(got) == 14  # 7 models x 2 targets
    classes = {
        m: got[("bad", m, "H100_SXM")]["error_class"]
        for m in ("syntax.py", "unsupported.py", "sleeper.py", "hog.py", "segv.py")
    }
    assert classes == {
        "syntax.py": "input",
        "unsupported.py": "unsupported op",
        "sleeper.py": "timeout",
        "hog.py": "memory",
        "segv.py": "crash",
    }
    assert got[("bad", "segv.py", "H200")]["error"] == "the interpreter died with signal SIGSEGV"
    assert got[("bad", "sleeper.py", "H100_SXM")]["error"] == "timed out after 20 s"
    assert "aten._linalg_det.default" in got[("bad", "unsupported.py", "H100_SXM")]["error"]
    assert got[("bad", "syntax.py", "H100_SXM")]["error"].endswith(
        "syntax.py:3: syntax error: invalid syntax"
    )
    assert "exceeded memory limit of 1 GB" in got[("bad", "hog.py", "H100_SXM")]["error"]
    for m in ("good.py", "matmul_softmax.py"):
        for t in ("H100_SXM", "H200"):
            r = got[("ok", m, t)]
            assert (r["status"], r["validated"]) == ("ok", True)
    # relu(x @ x) * 2 at N=16: 2*16^3 matrix FLOPs + 256 relu + 256 mul; fused bytes: x in, out out (f32)
    g = got[("ok", "good.py", "H100_SXM")]
    assert (g["flops"], g["bytes_fused"]) == (2 * 16**3 + 2 * 256, 2 * 256 * 4)
    # the CSV holds the same rows
    with open(base / "out" / "results.csv") as f:
        csv_rows = list(csv.DictReader(f))
    assert [(r["group"], r["model"], r["target"], r["error_class"]) for r in csv_rows] == [
        (r["group"], r["model"], r["target"], r["error_class"] or "") for r in rows(base / "out")
    ]
    # stdout summary: the per-group table and the failures
    assert (
        "bad    H100_SXM       5        0          0        0%  crash 1, input 1, memory 1, timeout 1, "
        "unsupported op 1" in done.stdout
    )
    assert "violations: 0" in done.stdout
    # every model has its own page, log and (when bounded) report
    assert (base / "out" / "models" / "ok" / "good.report.json").is_file()
    assert (base / "out" / "models" / "bad" / "segv.html").is_file()
    assert (
        "Fatal Python error: Segmentation fault"
        in (base / "out" / "models" / "bad" / "segv.bounds.log").read_text()
    )


def test_rerun_reuses_everything(planted):
    base, _, _ = planted
    done = bench(
        [
            "suite",
            "--hw",
            "H100_SXM,H200",
            "--workers",
            "2",
            "--timeout",
            "20",
            "--memory-gb",
            "1",
            "--no-cache",
            "--out",
            "out",
        ],
        base,
    )
    assert done.returncode == 0, done.stderr
    meta = json.loads((base / "out" / "results.json").read_text())["meta"]
    assert (meta["computed"], meta["reused"]) == ({"bounds": 0, "measure": 0}, 7)


def test_measure_headroom_is_measured_over_bound(tmp_path):
    write(tmp_path / "m", {"good.py": GOOD})
    done = bench(
        [
            "m",
            "--hw",
            "H100_SXM",
            "--workers",
            "1",
            "--measure",
            "--compile",
            "--trials",
            "5",
            "--measure-cap-s",
            "0.2",
            "--out",
            "out",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    (r,) = rows(tmp_path / "out")
    rec = json.loads((tmp_path / "out" / "models" / "m" / "good.measure.json").read_text())
    t = rec["timing"]
    assert t["device"] == "cpu" and t["eager"]["num_trials"] >= 5
    assert r["measured_s"] == pytest.approx(t["eager"]["median"] / 1e3)
    assert r["measured_min_s"] == pytest.approx(t["eager"]["min"] / 1e3)
    assert r["headroom_fused"] == pytest.approx(r["measured_s"] / r["fused_s"])
    c = t["compile"]  # torch.compile (inductor) timed in the same sandbox
    assert c["num_trials"] >= 5 and r["measured_compile_s"] == pytest.approx(c["median"] / 1e3)
    assert r["headroom_compile_fused"] == pytest.approx(r["measured_compile_s"] / r["fused_s"])
    assert r["violation"] is False  # a CPU is far slower than an H100 bound


def test_timings_file_gives_measured_times_and_train_mode(tmp_path):
    write(tmp_path / "level1", {"good.py": GOOD})
    (tmp_path / "t.json").write_text(json.dumps({"level1": {"good.py": {"mean": 0.02, "min": 0.015}}}))
    done = bench(
        ["level1", "--hw", "H100_SXM", "--workers", "1", "--timings", "t.json", "--out", "out"], tmp_path
    )
    assert done.returncode == 0, done.stderr
    (r,) = rows(tmp_path / "out")
    assert (r["measured_s"], r["measured_min_s"]) == (pytest.approx(2e-5), pytest.approx(1.5e-5))
    assert "train mode" in done.stdout and "mode train" in done.stdout


# ---- resume --------------------------------------------------------------------------------------------
def test_cancelled_run_resumes_without_recomputing(tmp_path):
    write(
        tmp_path / "s",
        {
            "a.py": GOOD,
            "b.py": MATMUL_SOFTMAX,
            "c.py": GOOD.replace("2.0", "3.0"),
            "d.py": SLEEPER,
            "e.py": GOOD.replace("2.0", "4.0"),
        },
    )
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    args = ["s", "--hw", "H100_SXM", "--workers", "1", "--no-cache", "--out", "out"]
    p = subprocess.Popen(
        BENCH + args + ["--timeout", "300"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    store = tmp_path / "out" / "models" / "s"
    deadline = time.monotonic() + 240
    while len(list(store.glob("*.bounds.json"))) < 3 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.2)
    tree = descendants(p.pid)
    while len(tree) < 2 and time.monotonic() < deadline:  # wait for the sleeper's fork of the worker
        time.sleep(0.2)
        tree = descendants(p.pid)
    assert len(tree) >= 2  # the worker and the sleeper's fork
    time.sleep(1.0)  # the sleeper is now in its sandbox
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 130
    assert (
        err.strip().splitlines()[-1]
        == "solar-bench: cancelled by SIGINT: 3 of 5 models stored in out; rerun to resume"
    )
    assert not alive(tree)
    first = {
        f.name: (f.stat().st_mtime_ns, json.loads(f.read_text())["run_id"])
        for f in store.glob("*.bounds.json")
    }
    assert sorted(first) == ["a.bounds.json", "b.bounds.json", "c.bounds.json"]
    done = bench(args + ["--timeout", "5"], tmp_path)
    assert done.returncode == 0, done.stderr
    meta = json.loads((tmp_path / "out" / "results.json").read_text())["meta"]
    assert (meta["computed"]["bounds"], meta["reused"]) == (2, 3)  # only d and e translated
    for name, (mtime, run_id) in first.items():
        f = store / name
        assert (f.stat().st_mtime_ns, json.loads(f.read_text())["run_id"]) == (mtime, run_id)
    got = {r["model"]: r for r in rows(tmp_path / "out")}
    assert got["d.py"]["error_class"] == "timeout" and got["e.py"]["status"] == "ok"


# ---- cancellation -------------------------------------------------------------------------------------
@pytest.mark.parametrize("tool", ["solar-opt", "solar-bench"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_mid_capture_leaves_no_process(tool, sig, tmp_path):
    marker = tmp_path / "capturing"
    write(tmp_path / "s", {"slow.py": slow_capture(marker)})
    if tool == "solar-opt":
        cmd = OPT + ["s/slow.py", "--translate", "--no-cache"]
    else:
        cmd = BENCH + ["s", "--hw", "H100_SXM", "--workers", "1", "--no-cache", "--out", "out"]
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    p = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.1)
    assert marker.exists(), p.communicate()[1]
    time.sleep(0.5)
    tree = descendants(p.pid)
    assert tree
    t0 = time.monotonic()
    p.send_signal(sig)
    _, err = p.communicate(timeout=10)
    gone = time.monotonic()
    while alive(tree) and time.monotonic() - t0 < 2.0:
        time.sleep(0.05)
        gone = time.monotonic()
    assert not alive(tree), f"left running: {alive(tree)}"
    assert gone - t0 < 2.0
    assert p.returncode == 128 + sig
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{tool}: cancelled by {signal.Signals(sig).name}"), err


# ---- Ray ---------------------------------------------------------------------------------------------
def test_ray_two_workers_give_the_pool_rows(tmp_path):
    if os.environ.get("SOLAR_TEST_REQUIRE_OPTIONAL") == "1":  # make test installs the extra: must run
        import ray
    else:
        ray = pytest.importorskip("ray")
    write(
        tmp_path / "s",
        {
            "good.py": GOOD,
            "matmul_softmax.py": MATMUL_SOFTMAX,
            "syntax.py": SYNTAX,
            "unsupported.py": UNSUPPORTED,
            "segv.py": SEGV,
        },
    )
    common = ["s", "--hw", "H100_SXM", "--workers", "2", "--no-cache", "--timeout", "60"]
    pool = bench(common + ["--out", "pool"], tmp_path)
    assert pool.returncode == 0, pool.stderr
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 2**20, logging_level="ERROR")
    try:
        address = ray.get_runtime_context().gcs_address
        done = bench(common + ["--out", "ray", "--ray", address], tmp_path)
    finally:
        ray.shutdown()
    assert done.returncode == 0, done.stderr
    a = [{k: r[k] for k in STABLE} for r in rows(tmp_path / "pool")]
    b = [{k: r[k] for k in STABLE} for r in rows(tmp_path / "ray")]
    assert a == b
    assert [r["error_class"] for r in a] == [None, None, "crash", None, "input", "unsupported op"][
        :0
    ] or {r["model"]: r["error_class"] for r in a} == {
        "good.py": None,
        "matmul_softmax.py": None,
        "segv.py": "crash",
        "syntax.py": "input",
        "unsupported.py": "unsupported op",
    }
    assert json.loads((tmp_path / "ray" / "results.json").read_text())["meta"]["backend"] == "ray"
