"""`solar-bench DIR|FILE... [--hw ...] [--mode eval|train]`: bounds (and measured times) for a suite.

    solar-bench examples/torch --hw host --measure
    solar-bench KernelBench/level1 KernelBench/level2 KernelBench/level3 --hw H100_SXM \\
        --timings baseline_time_torch.json --workers 2

Outputs in `--out` (default solar-bench-out/): results.csv, results.json, report.html, and per model
models/<group>/<stem>.{bounds,report,measure}.json, .html and .log. A rerun resumes (`--force`
recomputes). Exit status: 0, or 1 when a measured time beats a bound (a violation), 2 on a usage
error, 128+N when cancelled by signal N.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from solar_compiler.errors import SolarError
from solar_compiler.lifetime import Cancelled, cancel_on_signals

from .errors import phase_class
from .forked import Outcome
from .jobs import BoundsConfig
from .problems import plan, unit_outcomes
from .store import Store, fingerprint
from .suite import Unit, discover
from .timing import TRACE_GROUP, TimingConfig, env_for_device, load_timings


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="solar-bench", description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", help="model files or folders (a sub-folder is a group)")
    p.add_argument("--hw", default="H100_SXM", help="target(s), as solar-opt --hw (default H100_SXM)")
    p.add_argument(
        "--mode",
        choices=("eval", "train"),
        default=None,
        help="eval() or train() semantics (default eval; train with --timings)",
    )
    p.add_argument("--step", choices=("forward", "train"), default="forward",
                   help="forward (default) or train: bound (and with --measure time) one training step, "
                        "forward + backward + update, as solar-opt --step (docs/training.md)")
    p.add_argument("--optimizer", choices=("sgd", "adamw"), default=None,
                   help="with --step train: the optimizer's update, as solar-opt --optimizer")
    p.add_argument("--precision", default=None, help="precision policy, as solar-opt --precision")
    p.add_argument("--no-narrow", action="store_true", help="price the programs as written")
    p.add_argument(
        "--cache-state",
        choices=("cold", "warm"),
        default="cold",
        help="timing contract (docs/bounds.md): cold (default; --measure flushes caches before each "
        "call, as KernelBench) or warm (bounds for warm caches; --measure does not flush)",
    )
    p.add_argument("--no-validate", action="store_true", help="skip validation (coverage will be 0)")
    p.add_argument("--no-cache", action="store_true", help="bypass the translation cache")
    p.add_argument(
        "--workers",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="warm worker processes (default: usable cores)",
    )
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per model (bounds)")
    p.add_argument("--memory-gb", type=float, default=8.0, help="address-space limit per model (GiB)")
    p.add_argument("--out", type=Path, default=Path("solar-bench-out"), help="output folder")
    p.add_argument("--force", action="store_true", help="recompute models already stored")
    m = p.add_argument_group("measured runtimes")
    m.add_argument("--measure", action="store_true",
                   help="time each model's forward (with --step train: its training step) in this run")
    m.add_argument("--compile", action="store_true", help="with --measure: also time torch.compile(model)")
    m.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="timing device (auto: cuda when available)",
    )
    m.add_argument("--trials", type=int, default=100, help="timed calls (KernelBench: 100)")
    m.add_argument("--warmup", type=int, default=3, help="warm-up calls (KernelBench: 3)")
    m.add_argument(
        "--measure-cap-s",
        type=float,
        default=2.0,
        help="CPU: cut the timed calls to about this many seconds (at least 5 calls)",
    )
    m.add_argument("--measure-timeout", type=float, default=600.0, help="seconds per model (timing)")
    m.add_argument(
        "--timings",
        default=None,
        metavar="FILE.json",
        help='times taken elsewhere: KernelBench format {"level1": {"<file>.py": {"mean": ms}}}, or '
        "a SOL-ExecBench trace JSONL (kernel and reference latency per workload uuid: SOL score)",
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="run the jobs as Ray tasks on a cluster (default: a local Ray started here)",
    )
    a = p.parse_args(argv)
    if a.measure and a.timings:
        p.error("--measure and --timings are exclusive (one measured time per model)")
    if a.optimizer and a.step != "train":
        p.error("--optimizer needs --step train")
    if a.step == "train" and a.timings:
        p.error("--timings are forward times; a training step is timed with --measure")
    if a.compile and not a.measure:
        p.error("--compile needs --measure")
    for flag, value, least in (("--workers", a.workers, 1), ("--trials", a.trials, 1),
                               ("--warmup", a.warmup, 0)):
        if value < least:
            p.error(f"{flag} must be at least {least}, got {value}")
    for flag, value in (("--timeout", a.timeout), ("--memory-gb", a.memory_gb),
                        ("--measure-timeout", a.measure_timeout), ("--measure-cap-s", a.measure_cap_s)):
        if not value > 0:
            p.error(f"{flag} must be positive, got {value:g}")
    if a.mode is None:  # KernelBench times models in train mode; SOL-ExecBench references are functions
        a.mode = "train" if a.timings else "eval"
    return a


class Progress:
    """A rich progress bar (done / failed / remaining, ETA) on a terminal; one line per model elsewhere."""

    def __init__(self, total: int, what: str):
        from rich.console import Console

        self.console = Console(stderr=True)
        self.total, self.done, self.failed = total, 0, 0
        self.bar = None
        if self.console.is_terminal and total:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn(f"{what}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("failed {task.fields[failed]}  remaining {task.fields[left]}"),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self.task = self.bar.add_task(what, total=total, failed=0, left=total)
            self.bar.start()

    def update(self, unit: Unit, ok: bool, text: str) -> None:
        self.done += 1
        self.failed += not ok
        if self.bar is not None:
            self.bar.update(self.task, advance=1, failed=self.failed, left=self.total - self.done)
        else:
            print(f"[{self.done}/{self.total}] {unit.key}: {text}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def target_files_sha(hw: str) -> dict[str, str | None]:
    """The content of each target that is a file outside the code (a YAML path, or the calibrated
    `host`), so that a recalibrated host or an edited YAML recomputes stored bounds."""
    import hashlib

    out: dict[str, str | None] = {}
    for name in (t.strip() for t in hw.split(",") if t.strip()):
        if name.lower() == "host":
            path: Path | None = host_file()
        else:
            path = Path(name) if name.endswith((".yaml", ".yml")) else None
        if path is not None:
            try:
                out[name] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            except OSError:
                out[name] = None
    return out


def host_file() -> Path | None:
    try:
        from solar_compiler.hw import host_cache_path
    except ImportError:
        return None
    return Path(host_cache_path())


def calibrate_host_once(hw: str) -> None:
    """`--hw host` on a machine not calibrated yet: calibrate here, once, before the workers start
    (not in each warm-up at the same time, and the stored bounds' fingerprint names the result)."""
    if "host" in [t.strip().lower() for t in hw.split(",")]:
        path = host_file()
        if path is not None and not path.exists():
            from solar_compiler.driver import main as solar_opt

            print("solar-bench: calibrating the host target (once)", file=sys.stderr, flush=True)
            if solar_opt(["--calibrate-host"]) != 0:
                raise SolarError("host calibration failed (the line above says why; "
                                 "`solar-opt --calibrate-host --force` records it on a busy machine)")


def stored_count(a: argparse.Namespace, units: list[Unit], store: Store, bfp: dict[str, str],
                 mfp: dict[str, str]) -> str:
    """What a cancelled run leaves stored, per phase: "3 of 5 models", and with --measure "4 of 4
    models' bounds and 1 of 4 timings" (bounds all stored says nothing of the timings)."""
    bounds = [u for u in units if store.load(u, "bounds", bfp[u.key]) is not None]
    text = f"{len(bounds)} of {len(units)} models"
    if not a.measure:
        return text
    timed = sum(store.load(u, "measure", mfp[u.key]) is not None for u in units)
    return f"{text}' bounds and {timed} of {len(units)} timings"


def make_backend(a: argparse.Namespace, init: dict[str, Any], log: str):
    if a.ray:
        from .ray_backend import RayPool

        return RayPool(None if a.ray == "local" else a.ray, a.workers, init, log)
    from .pool import Pool

    return Pool(a.workers, init, log)


def preflight(a: argparse.Namespace) -> None:
    """Every argument that can be checked before work starts, checked now: the named targets (with
    their did-you-mean), the precision policy. `host` is loaded after its calibration (`run`)."""
    from solar_compiler.hw import PRECISIONS, parse_hw_list

    named = [t.strip() for t in a.hw.split(",") if t.strip().lower() != "host"]
    if named or not a.hw.strip():
        parse_hw_list(",".join(named) if named else a.hw)
    if a.precision is not None and a.precision not in PRECISIONS:
        raise SolarError(f"--precision: unknown precision policy {a.precision!r}; "
                         f"expected one of {', '.join(PRECISIONS)}")


def run(a: argparse.Namespace) -> int:
    t_start = time.time()
    preflight(a)
    units = discover(a.paths)
    timings = load_timings(a.timings) if a.timings else None
    store = Store(a.out)
    a.out.mkdir(parents=True, exist_ok=True)
    run_id = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
    bcfg = BoundsConfig(
        hw=a.hw,
        mode=a.mode,
        step=a.step,
        optimizer=a.optimizer,
        precision=a.precision,
        no_narrow=a.no_narrow,
        cache_state=a.cache_state,
        validate=not a.no_validate,
        no_cache=a.no_cache,
        memory_gb=a.memory_gb,
    )
    tcfg = TimingConfig(
        device=a.device,
        mode=a.mode,
        step=a.step,
        optimizer=a.optimizer,
        compile=a.compile,
        warmup=a.warmup,
        trials=a.trials,
        cap_s=a.measure_cap_s,
        flush=a.cache_state == "cold",
    )
    calibrate_host_once(a.hw)
    if "host" in [t.strip().lower() for t in a.hw.split(",")]:
        from solar_compiler.hw import parse_hw_list

        parse_hw_list("host")  # calibrated: it loads, or the error says why before any worker starts
    bfields = {**bcfg.fingerprint_fields(), "hw_files": target_files_sha(a.hw)}
    bfp = {u.key: fingerprint({**bfields, **bcfg.for_unit(u).fingerprint_fields()}, u) for u in units}
    mfp = {u.key: fingerprint(tcfg.fingerprint_fields(), u) for u in units}
    cores = len(os.sched_getaffinity(0))
    todo = [u for u in units if a.force or store.load(u, "bounds", bfp[u.key]) is None]
    init = {"hw": a.hw, "mode": a.mode}
    log = str(a.out / "workers.log")
    backend = make_backend(a, init, log)
    by_id = {}

    def job(u: Unit, kind: str, cfg, timeout: float, threads: int) -> dict[str, Any]:
        j = {
            "id": f"{kind}:{u.key}",
            "kind": kind,
            "path": u.path,
            "cwd": u.cwd,
            "config": cfg,
            "timeout_s": timeout,
            "memory_gb": a.memory_gb,
            "threads": threads,
            "log": str(store.path(u, f"{kind}.log")),
            "env": env_for_device(),
            "unit": u,
        }
        store.path(u, "log").parent.mkdir(parents=True, exist_ok=True)
        by_id[j["id"]] = u
        return j

    def problem(us: list[Unit], threads: int) -> dict[str, Any]:
        """One job for the workloads `us` of a problem (`problems.py`): its time limit is theirs."""
        # each workload at its own configuration (its precision policy follows its tolerance)
        j = job(us[0], "bounds", [bcfg.for_unit(u) for u in us], a.timeout * len(us), threads)
        j.update(id=f"problem:{us[0].key}", kind="problem", paths=[u.path for u in us], units=us,
                 logs=[str(store.path(u, "bounds.log")) for u in us])
        return j

    computed = {"bounds": 0, "measure": 0}
    prog: Progress | None = None

    # workloads of a problem job to run again alone (`problems.py`), and why
    alone: dict[str, tuple[Unit, str]] = {}

    def on_done(j: dict[str, Any], o: Outcome) -> None:
        if j["kind"] == "problem":
            for u, uo in unit_outcomes(o, j["units"]):
                if uo is None:
                    why = f"{o.error_class}: {o.error}" if not o.ok else "memory, in the problem's job"
                    alone[u.key] = (u, why)
                else:
                    record(u, "bounds", uo)
            return
        record(j["unit"], j["kind"], o)

    def record(u: Unit, kind: str, o: Outcome) -> None:
        rec = {
            "fingerprint": (bfp if kind == "bounds" else mfp)[u.key],
            "unit": u.as_dict(),
            "phase": kind,
            "status": "ok" if o.ok else "failed",
            "error_class": None if o.ok else phase_class(kind, o.error_class),
            "error": o.error,
            "seconds": o.seconds,
            "cpu_s": o.cpu_s,
            "peak_rss_kb": o.peak_rss_kb,
            "worker_rss_kb": o.extra.get("worker_rss_kb"),
            "run_id": run_id,
            "backend": "ray" if a.ray else "pool",
        }
        if "problem_job" in o.extra:  # its workloads' job: how many, and the whole job's seconds
            rec["problem_job"] = o.extra["problem_job"]
        elif u.key in alone and kind == "bounds":
            rec["problem_job"] = {"ran_alone": alone[u.key][1]}
        report = None
        if o.ok and kind == "bounds":
            report = o.value["report"]
            rec["pipeline_s"] = o.value["pipeline_s"]
        elif o.ok:
            rec["timing"] = o.value
        store.save(u, kind, rec, report)
        computed[kind] += 1
        assert prog is not None
        done = f"{kind} ok {o.seconds:.1f} s" if o.ok else f"{kind} failed ({rec['error_class']}): {o.error}"
        prog.update(u, o.ok, done)

    interrupted: Cancelled | None = None
    try:
        with cancel_on_signals():
            try:
                prog = Progress(len(todo), "bounds")
                batches, single = plan(todo)
                threads = max(1, cores // max(1, min(a.workers, len(batches) + len(single) or 1)))
                # the biggest problems first: the last jobs to start are then short ones
                jobs = [problem(us, threads) for us in sorted(batches, key=len, reverse=True)]
                backend.run(jobs + [job(u, "bounds", bcfg.for_unit(u), a.timeout, threads) for u in single],
                            on_done)
                if alone:
                    print(f"solar-bench: {len(alone)} workloads run again one by one (their problem's job "
                          "failed as a whole, or they ran out of memory in it)", file=sys.stderr, flush=True)
                    again = [job(u, "bounds", bcfg.for_unit(u), a.timeout, threads)
                             for u, _ in alone.values()]
                    backend.run(again, on_done)
                prog.stop()
                if a.measure:
                    ok = [
                        u for u in units if (store.load(u, "bounds", bfp[u.key]) or {}).get("status") == "ok"
                    ]
                    mtodo = [u for u in ok if a.force or store.load(u, "measure", mfp[u.key]) is None]
                    prog = Progress(len(mtodo), "timing")
                    # one at a time: timings must not share the machine (or the GPU) with other work
                    backend.run(
                        [job(u, "measure", tcfg, a.measure_timeout, cores) for u in mtodo],
                        on_done,
                        max_parallel=1,
                    )
                    prog.stop()
                backend.close()
            except BaseException:
                if prog is not None:
                    prog.stop()
                backend.kill()
                raise
    except Cancelled as e:
        interrupted = e
    if interrupted is not None:
        print(f"solar-bench: cancelled by {interrupted.name}: {stored_count(a, units, store, bfp, mfp)} "
              f"stored in {a.out}; rerun to resume", file=sys.stderr)
        return interrupted.exit_code

    from .outputs import write_outputs

    meta = {
        "command": ["solar-bench", *sys.argv[1:]] if sys.argv else [],
        "run_id": run_id,
        "hw": a.hw,
        "mode": a.mode,
        "step": a.step,
        "optimizer": a.optimizer,
        "precision": a.precision or ("auto; SOL-ExecBench workloads: from their tolerance"
                                     if any(u.precision for u in units) else "auto"),
        "cache_state": a.cache_state,
        "workers": a.workers,
        "backend": "ray" if a.ray else "pool",
        "models": len(units),
        "computed": computed,
        "reused": len(units) - len(todo),
        "wall_s": round(time.time() - t_start, 2),
        "worker_info": getattr(backend, "infos", []),
        "timings_file": a.timings,
        "measure": tcfg.fingerprint_fields() if a.measure else None,
    }
    if a.timings:
        meta["timings_note"] = (
            f"measured times from {a.timings} (a SOL-ExecBench trace: mean kernel and reference "
            f"latency per workload)" if TRACE_GROUP in timings else
            f"measured times from {a.timings} (taken on another machine; KernelBench "
            f"times are in train mode: no .eval()); bounds computed in mode {a.mode}"
        )
    violations = write_outputs(a.out, units, store, bfp, mfp if a.measure else None, timings, a, meta)
    return 1 if violations else 0


def main(argv: list[str] | None = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(a)
    except SolarError as e:
        print(f"solar-bench: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a Ctrl-C outside the run (start-up)
        print("solar-bench: cancelled by SIGINT", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
