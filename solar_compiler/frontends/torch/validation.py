"""Validation of a translation: execute the loop IR and compare with the model's own outputs.

Three methods, tried in this order (docs/torch-frontend.md, "Validation"):

1. **full**: the loop IR executed whole at full size, on `get_inputs()` and fresh samples, when the
   expected time fits `time_budget` and every kernel tensor fits `memory_budget_gb`;
2. **sampled**: the framework runs at full size (natively) when its own memory and time fit the
   budgets, and the loop IR computes only a random sample of output elements (a few hundred per
   output, plus corners and edges) by executing their backward slice (`executor.slicing`),
   compared element by element;
3. **reduced**: the module-level size definitions are scaled down (`ModelSpec.with_sizes`), the
   reduced file is re-captured, re-translated and validated (full or sampled), and the full-size
   kernel must be the same program with only sizes changed (`same_program`). Layer counts a file
   marks `repeated(N)` drop to `REPEAT_KEEP` when the full-size kernel is checked to be the reduced
   one with more copies of its repeated blocks (`same_program_repeated`); else they are kept.

When none applies the record says `validated: false` with the reason in one line; the program is
still bounded. A mismatch is never a "could not validate": it fails the translation.

Tolerances grow with the reduction length feeding each output
(`executor.compare.summation_tolerances`), the forward error bound of floating-point summation
derived in docs/torch-frontend.md. The indices of an op whose tie order torch leaves unspecified
(`topk`, an unstable `sort`, ...) pass where they differ from torch's among tied values of the op's
input only, that input compared too (`ties.py`, `executor/ties.py`: why no wrong program passes).
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

import numpy as np

from solar_compiler import progress
from solar_compiler.errors import SolarError
from solar_compiler.frontends import CaptureFailed, FrontendOptions
from solar_compiler.frontends.torch.ties import recorded_inputs, sampled_inputs
from solar_compiler.frontends.torch.ties import rules as tie_rules
from solar_compiler.frontends.validation import (
    REDUCIBLE,
    RETRACE_SECONDS,
    RETRACE_SEEDS,
    SAMPLE_SEEDS,
    Cost,
    as_array,
    candidates,
    estimate,
    executor_bytes,
    shrink,
    size_rounds,
    statement_seconds,
)

REPEAT_KEEP = 3          # copies of a repeated layer a reduced instance keeps: a block after a
                         # different first layer (a dense layer before MoE ones) still repeats
SAMPLE_POINTS = 256     # random output elements per output in sampled validation (plus corners, edges)
SLICE_MIN_SECONDS = 1.0  # CPU seconds the backward slice may always take


# ---- the three methods ----------------------------------------------------------------------------
def validate(spec, prog, tt, options: FrontendOptions, filler=None, trace=None) -> dict[str, Any]:
    """Full, sampled or reduced validation (module doc); the record says which, how many output
    elements were compared per sample, and at which sizes. `filler` is the LLM's per-op fill-in of
    the full-size translation, continued by the reduced instance's (frontend.op_filler). `trace` (an
    `IndirectTrace`) records what the indirect accesses touch on get_inputs(), by full validation
    only (the other methods do not execute the whole program at its own sizes)."""
    record, why = at_size(spec, prog, tt, options, trace)
    if record is not None:
        return record
    progress.phase("validate", f"not at full size ({why}): on a reduced instance")
    reduced = reduce_instance(spec, prog, tt, options, filler)
    if isinstance(reduced, str):
        return {"validated": False, "method": None, "max_rel_err": None, "samples": 0, "sizes": None,
                "elements_checked": 0, "reason": f"{why}; {reduced}"}
    overrides, spec_r, prog_r, tt_r, rec = reduced
    full = {**spec.size_constants, **spec.repeat_counts}
    sizes = ", ".join(f"{k}={v} (of {full[k]})" for k, v in overrides.items())
    fewer = [k for k in overrides if k in spec.repeat_counts]
    return {**rec, "method": "reduced", "reduced_method": rec["method"], "sizes": f"reduced: {sizes}",
            "full_size_same_program": True, "why_reduced": why,
            **({"repeated_blocks": fewer} if fewer else {})}


def at_size(spec, prog, tt, options: FrontendOptions, trace=None,
             where: str = "at full size") -> tuple[dict[str, Any] | None, str]:
    """(record, "") of full or sampled validation at the program's own sizes, or (None, why not).
    `where` names the instance in progress lines ("at full size", or the reduced instance)."""
    if prog.value_dependent:
        reject_baked(spec, prog, options.mode)
    budget_b = options.memory_budget_gb * 2**30
    cost = estimate(tt.validation_kernel())
    n = _samples_within(cost.seconds, options.time_budget, prog)
    if n and cost.kernel_bytes <= budget_b:
        progress.phase("validate", f"executing the loop IR against torch {where}, {n} sample(s) "
                                   f"(loop IR estimated {cost.seconds:.1f} s per sample)")
        return {**run_samples(spec, prog, tt, options.mode, n, trace), "method": "full", "sizes": "full"}, ""
    why = f"whole execution {cost.describe()}"
    if cost.framework_bytes > budget_b:
        return None, f"{why}; the framework needs {cost.framework_bytes / 2**30:.2f} GB {where}"
    if cost.framework_bytes + cost.converted_bytes > budget_b:  # Mixtral's 3-layer instance: 6.9 GB
        return None, (f"{why}; the framework needs {cost.framework_bytes / 2**30:.2f} GB {where}, and "
                      f"the executor {cost.converted_bytes / 2**30:.2f} GB more for float32 copies of its "
                      "narrow-float inputs and weights")
    if cost.framework_seconds > options.time_budget:
        return None, f"{why}; the framework alone is estimated {cost.framework_seconds:.1f} s {where}"
    progress.phase("validate", f"whole execution does not fit the budget ({cost.describe()}): torch "
                               f"{where}, the loop IR on sampled output elements")
    got = run_sampled(spec, prog, tt, options, cost)
    if isinstance(got, str):
        return None, f"{why}; {got}"
    return {**got, "method": "sampled", "sizes": "full"}, ""


def baked_outputs(prog) -> list[str]:
    """Outputs of the captured graph that no program input reaches: a constant, or a value the
    capture baked in from a Python computation on the traced sample (`.item()`, `tolist()`)."""
    from solar_compiler.frontends.captured_program import tensor_refs

    reach = {t.name for t in prog.inputs}
    for node in prog.nodes:
        if any(r in reach for r in (*tensor_refs(node.args), *tensor_refs(node.kwargs))):
            reach |= {o.name for o in node.outputs if o is not None}
    return [o for o in prog.outputs if o not in reach] if prog.inputs else []


def reject_baked(spec, prog, mode: str) -> None:
    """A value-dependent graph is compared on its traced sample only, where a baked constant agrees by
    construction: each output the graph computes without its inputs is checked against the model on
    a fresh sample first, and one the model changes fails the translation (it is no translation)."""
    from .capture import fresh_inputs, run_reference

    baked = baked_outputs(prog)
    if not baked:
        return
    seed = SAMPLE_SEEDS[0]
    outs = run_reference(spec, mode, seed=0, program=prog)[2]
    fresh = run_reference(spec, mode, inputs=fresh_inputs(spec, seed), seed=0, program=prog)[2]
    for name in baked:
        if not _same(np.asarray(outs[name]), np.asarray(fresh[name])):
            raise CaptureFailed(
                f"{spec.path}: validation failed on fresh sample (seed {seed}): output {name} is a "
                f"constant of the traced sample in the capture (after {prog.value_dependent[0]}), but "
                "the model's output changes with its inputs", error_class="validate")


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal elements, NaN equal to NaN (a NaN constant stays constant)."""
    if a.shape != b.shape:
        return False
    if np.issubdtype(a.dtype, np.inexact) and np.issubdtype(b.dtype, np.inexact):
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def _samples_within(seconds: float, budget: float, prog) -> int:
    """How many samples (3, else 1) fit the budget; 0 when not even one does."""
    return 1 + len(SAMPLE_SEEDS) if seconds * (1 + len(SAMPLE_SEEDS)) <= budget else \
        1 if seconds <= budget else 0


def _sample_done(i: int, n: int, t0: float) -> None:
    """A line per compared sample, with what it took (torch, the loop IR and the comparison): a
    long validation is never silent, and the estimate is followed by the real figure."""
    progress.phase("validate", f"sample {i} of {n} agrees ({time.monotonic() - t0:.1f} s)")


def _feed(tt, kernel, ins, ws, rnd):
    feed = {tt.inputs[n]: a for n, a in {**ins, **ws}.items()}
    feed.update({tt.random[n]: a for n, a in rnd.items()})
    return {k: as_array(a, kernel.tensor(k)) for k, a in feed.items()}


def _seeds(spec, prog, tt, mode: str, n: int, retraced: dict[int, tuple] | None = None) \
        -> tuple[list[int | None], str | None]:
    """(get_inputs() and the fresh samples to compare on, n in all; why fewer). A value-dependent
    program recorded on real values (the dispatch capture: a value Python reads may choose its
    statements, shapes or constants) is compared on a fresh sample only where capturing again on
    that sample gives the same program: the same kernel text and the same constants. Up to
    `RETRACE_SEEDS` fresh samples are tried (a branch on a sum takes the traced side on about half
    of them), for `RETRACE_SECONDS` at most once one has traced another program. Where none traces
    it again, the list is the traced sample alone, which `_record` does not call validated. With
    `retraced` (a dict), a fresh sample whose capture differs from `prog` in sizes and positions
    only (`_sizes_only`: an expert's token count from `nonzero`) is taken too, after the samples that
    trace `prog` itself, and its (program, translation) stored there: compared against its own
    capture, it shows the translation of values it was not traced on. An exported graph was traced
    on fake tensors, so no value chose it: its value-dependent work (routing, gathers) is computed
    by the kernel on any sample."""
    seeds: list[int | None] = [None, *SAMPLE_SEEDS][:n]
    if not prog.value_dependent or prog.method != "dispatch":
        return seeds, None
    want = max(n - 1, 1)  # one sample fits the budget: a fresh one where it traces the same program
    same: list[int] = []
    other: list[tuple[int, str]] = []
    t0 = time.monotonic()
    again: dict[int, tuple] = {}
    for seed in RETRACE_SEEDS:
        if len(same) == want or (other and time.monotonic() - t0 > RETRACE_SECONDS):
            break
        why, got = _traces_another(spec, prog, tt, mode, seed)
        if why is None:
            same.append(seed)
        else:
            other.append((seed, why))
            if got is not None and retraced is not None:
                again[seed] = got
    if len(same) < want and again:
        extra = list(again)[:want - len(same)]
        retraced.update({s: again[s] for s in extra})  # type: ignore[union-attr]
        same += extra
    picked: list[int | None] = same[:1] if n == 1 and same else [None, *same][:n]
    if len(same) >= want:
        return picked, None
    first = other[0][1]
    if len(other) == 1:
        return picked, f"fresh sample (seed {other[0][0]}) {first}"
    return picked, (f"fresh samples (seeds {', '.join(str(s) for s, _ in other)}) trace other programs "
                    f"(seed {other[0][0]}: {first.removeprefix('traces another program: ')})")


def _traces_another(spec, prog, tt, mode: str, seed: int) -> tuple[str | None, tuple | None]:
    """(None, None) when the program captured on the fresh sample `seed` is `prog` (`_seeds`), else
    why it is not shown to be (a clause following "fresh sample (seed N)") and, where it differs in
    sizes and positions only, (its program, its translation)."""
    from solar_compiler.text.printer import print_kernel

    from .capture import capture, on_fresh_sample
    from .translate import translate_program

    progress.phase("validate", f"capturing again on fresh sample (seed {seed}): a value-dependent program")
    try:
        again = capture(on_fresh_sample(spec, seed), mode=mode)
        tt_again = translate_program(again, kernel_name=tt.kernel.name)
    except Exception as e:  # noqa: BLE001 - a probe: any failure means "not shown to be the same program"
        return f"could not be captured and translated again ({' '.join(str(e).split())[:120]})", None
    if again.constants.keys() != prog.constants.keys() or not all(
            _same(np.asarray(again.constants[k]), np.asarray(v)) for k, v in prog.constants.items()):
        return "traces another program: its constants differ", None
    if print_kernel(tt_again.kernel) != print_kernel(tt.kernel):
        sizes = _sizes_only(tt_again.kernel, tt.kernel)
        return "traces another program: its kernel differs", (again, tt_again) if sizes else None
    return None, None


_INTEGER = re.compile(r"(?<![\w.])\d+(?![\w.])")


def _sizes_only(a, b) -> bool:
    """Whether kernels `a` and `b` differ in integers of their shapes, loop bounds and index positions
    only: the same text with every such integer masked, and the same literals (a value Python read
    into a literal, `x * x.sum().item()`, is no size)."""
    from solar_compiler.loopir.ast import Const, statements
    from solar_compiler.text.printer import print_kernel

    def literals(k) -> list:
        return [(e.value, e.dtype) for c in statements(k) for e in c.stmt.value.walk()
                if isinstance(e, Const)]

    masked = [_INTEGER.sub("#", print_kernel(k)) for k in (a, b)]
    return masked[0] == masked[1] and literals(a) == literals(b)


def run_samples(spec, prog, tt, mode: str, n: int = 1 + len(SAMPLE_SEEDS), trace=None) -> dict[str, Any]:
    """Execute the whole kernel and compare on get_inputs() and fresh samples (n in all); a mismatch
    fails the translation. `trace` records the get_inputs() sample's indirect footprints, keyed by
    the statements of `tt.kernel`."""
    from solar_compiler.executor import compare, execute
    from solar_compiler.executor.compare import summation_tolerances

    from .capture import ModelReuse, fresh_inputs, run_reference

    retraced: dict[int, tuple] = {}
    seeds, fewer = _seeds(spec, prog, tt, mode, n, retraced)
    worst = 0.0
    f64: dict[str, float] = {}
    chosen: dict[str, int] = {}
    reuse = ModelReuse(seed=0)  # one model for every sample (built once)
    for i, seed in enumerate(seeds, 1):
        t_sample = time.monotonic()
        # a sample captured again (its sizes only differ) is compared against its own translation
        p, t = retraced.get(seed, (prog, tt)) if seed is not None else (prog, tt)
        kernel = t.validation_kernel()
        dtypes = {d.name: d.dtype for d in kernel.tensors}
        inputs = None if seed is None else fresh_inputs(spec, seed)
        recorded = _wanted(t)
        ins, ws, outs, rnd = run_reference(spec, mode, inputs=inputs, seed=0, program=p, reuse=reuse,
                                           ties=recorded)
        feed = _feed(t, kernel, ins, ws, rnd)
        traced = None if seed is not None or trace is None else _KernelTrace(trace, kernel, t.kernel)
        got = execute(kernel, feed, trace=traced)
        ref = {k: outs[name] for k, name in zip(t.outputs, p.outputs, strict=True)}
        ref.update(recorded_inputs(t, recorded, ref))
        cmp = compare(ref, got, dtypes, tolerances=summation_tolerances(kernel), ties=tie_rules(t))
        verdict = cmp if cmp.ok else \
            _against_f64(spec, p, t, kernel, mode, ins, feed, ref, None, None, f64)
        _check(spec, seed, verdict or cmp)
        worst = max(worst, cmp.max_rel_err)
        _add(chosen, cmp.tie_choices)
        _sample_done(i, len(seeds), t_sample)
    checked = sum(math.prod(d.shape) for d in tt.validation_kernel().by_role("output")
                  if d.name not in tt.tie_inputs)
    return _record(prog, worst, seeds, checked, f64, fewer, len(retraced), chosen)


def _wanted(tt) -> dict[tuple[str, int], Any]:
    """The calls whose input and indices the reference run records (`TieRecorder`), to be filled."""
    return {(s.op, s.occurrence): None for s in tt.ties}


def _add(total: dict[str, int], more: dict[str, int]) -> None:
    for k, v in more.items():
        total[k] = total.get(k, 0) + v


def run_sampled(spec, prog, tt, options: FrontendOptions, cost: Cost) -> dict[str, Any] | str:
    """Sampled validation (module doc), or why it does not fit the budgets."""
    from solar_compiler.executor import compare, execute
    from solar_compiler.executor.compare import summation_tolerances
    from solar_compiler.executor.slicing import SliceTooCostly

    from .capture import ModelReuse, fresh_inputs, run_reference

    kernel = tt.validation_kernel()
    rules = tie_rules(tt)
    # computing the slice may take a quarter of the budget (CPU seconds), and at least SLICE_MIN_SECONDS
    # (islpy's fixed cost: a tiny budget must not turn a cheap slice down)
    allowed = max(options.time_budget / 4, SLICE_MIN_SECONDS)
    try:
        samples, sl, secs, nbytes = plan_sampled(kernel, cost, time.process_time() + allowed, rules)
    except SliceTooCostly as e:
        return f"sampled: {e} ({allowed:.0f} s)"
    n = _samples_within(secs, options.time_budget, prog)
    if not n or nbytes > options.memory_budget_gb * 2**30:
        count = sum(len(v) for v in samples.values())
        return (f"sampled: the framework at full size plus the slice of {count} sampled elements "
                f"estimated {secs:.1f} s, {nbytes / 2**30:.2f} GB per sample")
    dtypes = {t.name: t.dtype for t in kernel.tensors}
    tols = summation_tolerances(kernel)
    worst = 0.0
    f64: dict[str, float] = {}
    chosen: dict[str, int] = {}
    seeds, fewer = _seeds(spec, prog, tt, options.mode, n)
    progress.phase("validate", f"sampled: {sum(len(v) for v in samples.values())} output elements, "
                               f"{len(seeds)} sample(s) (estimated {secs:.1f} s per sample)")
    reuse = ModelReuse(seed=0)  # one model for every sample (built once)
    for i, seed in enumerate(seeds, 1):
        t_sample = time.monotonic()
        inputs = None if seed is None else fresh_inputs(spec, seed)
        recorded = _wanted(tt)
        ins, ws, outs, rnd = run_reference(spec, options.mode, inputs=inputs, seed=0, program=prog,
                                           reuse=reuse, ties=recorded)
        whole = {k: outs[name] for k, name in zip(tt.outputs, prog.outputs, strict=True)}
        whole.update(recorded_inputs(tt, recorded, whole))
        ref = {k: np.asarray(v)[tuple(samples[k].T)] for k, v in whole.items()}
        del outs, whole
        feed = _feed(tt, kernel, ins, ws, rnd)
        got = execute(kernel, feed, pieces=sl.pieces)
        got = {k: got[k][tuple(samples[k].T)] for k in ref}
        cmp = compare(ref, got, dtypes, tolerances=tols, positions=samples, ties=rules)
        verdict = cmp if cmp.ok else \
            _against_f64(spec, prog, tt, kernel, options.mode, ins, feed, ref, sl.pieces, samples, f64)
        _check(spec, seed, verdict or cmp)
        worst = max(worst, cmp.max_rel_err)
        _add(chosen, cmp.tie_choices)
        _sample_done(i, len(seeds), t_sample)
    checked = sum(len(v) for k, v in samples.items() if k not in tt.tie_inputs)
    return _record(prog, worst, seeds, checked, f64, fewer, ties=chosen)


def plan_sampled(kernel, cost: Cost, deadline: float | None = None, ties=None):
    """(sampled output elements, their backward slice, expected seconds and bytes of one sample).
    `ties` (index output -> `Tie`): the copy of each op input is sampled in whole op rows, those of
    its index outputs' samples (`ties.sampled_inputs`), so differing indices can be shown to tie."""
    from solar_compiler.executor.slicing import backward_slice, sample_points

    rng = np.random.default_rng(0)
    samples = {t.name: sample_points(t.shape, SAMPLE_POINTS, rng) for t in kernel.by_role("output")}
    samples.update(sampled_inputs(ties or {}, samples))

    sl = backward_slice(kernel, samples, deadline=deadline)
    secs = cost.framework_seconds + _slice_seconds(kernel, sl)
    nbytes = cost.framework_bytes + sum(executor_bytes(t) for t in kernel.tensors
                                        if t.name in sl.tensors and t.role not in ("input", "weight"))
    return samples, sl, secs, nbytes


def _slice_seconds(kernel, sl) -> float:
    from solar_compiler.loopir.ast import statements

    secs = 0.0
    for ctx in statements(kernel):
        if ctx.index in sl.pieces:
            scans = {f.iv for f in ctx.loops if f.sequential}
            runs = sum(math.prod(hi - lo + 1 for v, lo, hi in p.box if v in scans)
                       for p in sl.pieces[ctx.index])
            secs += statement_seconds(ctx, sl.points[ctx.index], runs)
    return secs


F64_PROBE = 16 * 2.0**-53   # relative size of the perturbation probing rounding amplification
F64_SLACK = 10.0            # times the probe's output change the float64 results may differ by


def _against_f64(spec, prog, tt, kernel, mode, ins, feed, ref, pieces, positions, f64):
    """A second opinion when the comparison with the framework failed: the framework (`.double()`,
    `run_reference_f64`) and the loop IR (every f32 tensor and value widened to f64) both run in
    float64, on the same inputs, and are compared. A program that amplifies rounding (train-mode
    batch norms over few elements, deep chains) can put two correct float32 evaluations far apart
    (and far from the exact result); in float64 the same amplification acts on a 2^29 times smaller
    unit roundoff, while a wrong translation stays wrong. How much this program amplifies
    rounding-sized changes is measured, not guessed: the float64 framework run is repeated with
    every input, weight and buffer perturbed by F64_PROBE (relative, a few float64 ulps), and its
    outputs' relative change `p` sets the tolerance: the f64 summation tolerance plus
    F64_SLACK * p. Returns the comparison (float64 loop IR against float64 framework), or None
    when no float64 evaluation exists. `f64` collects, per output, p and the float64 distance."""
    from solar_compiler.executor import compare, execute
    from solar_compiler.executor.compare import summation_tolerances

    from .capture import run_reference_f64

    full = run_reference_f64(spec, mode, ins, prog)
    probe = run_reference_f64(spec, mode, ins, prog, perturb=F64_PROBE) if full is not None else None
    if full is None or probe is None:
        return None
    wide = _widen_kernel(kernel)
    wfeed = {k: as_array(a, wide.tensor(k)) for k, a in feed.items()}
    got = execute(wide, wfeed, pieces=pieces)
    wdtypes = {t.name: t.dtype for t in wide.tensors}
    tols = summation_tolerances(wide)
    ref64, got64 = {}, {}
    for k, name in zip(tt.outputs, prog.outputs, strict=True):
        pick = (lambda a: a) if positions is None else (lambda a, k=k: a[tuple(positions[k].T)])  # noqa: E731
        ref64[k], got64[k] = pick(full[name]), pick(got[k])
        if k in tols:
            p = compare({k: ref64[k]}, {k: pick(probe[name])}, wdtypes, tolerances={k: math.inf}).max_rel_err
            tols[k] += F64_SLACK * p
            f64[f"{k}:probe"] = max(f64.get(f"{k}:probe", 0.0), p)
    cmp = compare(ref64, got64, wdtypes, tolerances=tols, positions=positions)
    for k in (k for k in tols if k in ref64):  # an intermediate a returned view reads is no output here
        e = compare({k: ref64[k]}, {k: got64[k]}, wdtypes, tolerances={k: math.inf}).max_rel_err
        f64[f"{k}:loop_ir_vs_framework_f64"] = max(f64.get(f"{k}:loop_ir_vs_framework_f64", 0.0), e)
    return cmp


def _widen_kernel(kernel):
    """The kernel with every f32 tensor, constant, cast and operation made f64."""
    from dataclasses import fields, replace

    from solar_compiler.loopir.ast import Assign, Bitcast, For, If, Kernel, SExpr, TensorDecl, widened_bitcast

    def expr(e):
        if not isinstance(e, SExpr):
            return e
        if isinstance(e, Bitcast):  # a bit cast keeps its width
            return widened_bitcast(e, expr(e.x), "f64" if e.dtype == "f32" else e.dtype)
        changes = {}
        for f in fields(e):
            v = getattr(e, f.name)
            if f.name == "dtype" and v == "f32":
                changes["dtype"] = "f64"
            elif isinstance(v, SExpr):
                changes[f.name] = expr(v)
            elif isinstance(v, tuple) and any(isinstance(x, SExpr) for x in v):
                changes[f.name] = tuple(expr(x) for x in v)
        return replace(e, **changes) if changes else e

    def node(n):
        if isinstance(n, Assign):
            return replace(n, value=expr(n.value), indices=tuple(expr(i) for i in n.indices))
        if isinstance(n, (For, If)):
            return replace(n, body=[node(c) for c in n.body])
        return n

    tensors = [TensorDecl(t.name, t.shape, "f64" if t.dtype == "f32" else t.dtype, t.role)
               for t in kernel.tensors]
    return Kernel(kernel.name, tensors, [node(n) for n in kernel.body])


def _check(spec, seed, cmp) -> None:
    """A mismatch: the captured program is not the source program, or a template is wrong."""
    if not cmp.ok:
        what = "get_inputs()" if seed is None else f"fresh sample (seed {seed})"
        raise CaptureFailed(f"{spec.path}: validation failed on {what}: {cmp.first_mismatch}",
                            error_class="validate")


def _record(prog, worst: float, seeds: list[int | None], checked: int, f64: dict[str, float] | None = None,
            fewer: str | None = None, retraced: int = 0,
            ties: dict[str, int] | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {"validated": True, "max_rel_err": worst, "samples": len(seeds),
                              "elements_checked": checked}
    if f64:  # compared in float64 too (`_against_f64`): the distances, per output
        record["float64_check"] = {k: float(v) for k, v in sorted(f64.items())}
    if ties:  # index outputs that differ from the reference's at tied values, positions over all samples
        record["tie_choices"] = dict(sorted(ties.items()))
    if prog.value_dependent and seeds == [None]:
        # the values chose the program: agreeing on them shows nothing a fresh input would
        record["validated"] = False
        record["reason"] = ("value-dependent program: no fresh sample traces it again, so it is compared on "
                            "the traced sample only, which does not validate it"
                            + (f" ({fewer})" if fewer else ""))
    elif prog.value_dependent and retraced:
        record["reason"] = (f"value-dependent program: validated on {len(seeds)} samples, {retraced} of them "
                            "captured again (their values chose sizes and positions only) and compared "
                            "against their own translations")
    elif prog.value_dependent and fewer:
        record["reason"] = f"value-dependent program: validated on {len(seeds)} samples ({fewer})"
    return record


class _KernelTrace:
    """An `IndirectTrace` for the validation kernel that files its records under the statements of the
    translated kernel (the validation kernel shares their objects, minus random draws, plus the
    alias copies, which have no counterpart)."""

    def __init__(self, trace, vkernel, kernel):
        from solar_compiler.loopir.ast import statements

        pos = {id(c.stmt): c.index for c in statements(kernel)}
        self.trace = trace
        self.to_kernel = {c.index: pos.get(id(c.stmt)) for c in statements(vkernel)}

    def bind(self, stmt_index: int, shapes):
        from solar_compiler.executor.trace import IndirectTrace

        j = self.to_kernel.get(stmt_index)
        return (self.trace if j is not None else IndirectTrace()).bind(j if j is not None else -1, shapes)


# ---- reduced instances ----------------------------------------------------------------------------
def reduce_instance(spec, prog, tt, options: FrontendOptions, filler=None):
    """(overrides, spec, program, translation, record) of the mildest reduction that validates within
    the budgets and is the same program as the full-size one, or a string saying why there is none.
    When scaling every size together does not build (a size tied to a literal inside the model), the
    sizes that can be scaled alone are found and scaled together. Layer counts (`repeated(N)`) drop to
    `REPEAT_KEEP` in every candidate until one is not the same program with fewer layers (or does
    not build with them); then to `REPEAT_KEEP + 1` (two copies of a block of two layers) until
    that fails too; from then on every layer is kept."""
    sizes = {k: v for k, v in spec.size_constants.items() if v >= REDUCIBLE}
    fewer = {k: REPEAT_KEEP for k, v in spec.repeat_counts.items() if v > REPEAT_KEEP}
    if not sizes and not fewer:
        return "the file has no module-level size definition to scale down"
    why = "no reduction of its size definitions fits the budget"
    seen: list[dict[str, int]] = []

    def attempt(ov: dict[str, int]):
        seen.append(ov)
        progress.phase("validate", f"reduced instance {_sizes_text(ov)}: capturing and translating")
        got = _try(spec, tt, ov, options, filler)
        if isinstance(got, str):
            progress.phase("validate", f"not usable: {got}")
        return got

    layers = dict(fewer)
    for keys in _key_sets(spec, tt, options, sizes, filler):
        for ov in _with_fewer(candidates({k: sizes[k] for k in keys}), fewer):
            if not ov or ov in seen:
                continue
            got, tried = attempt(ov), True
            while isinstance(got, str) and _unlike(got) and any(k in fewer for k in ov):
                # fewer layers are not the same program: two copies of a two-layer block (layers of
                # two kinds alternating), then every layer kept from here on
                more = {k: REPEAT_KEEP + 1 for k, v in fewer.items()
                        if v == REPEAT_KEEP and spec.repeat_counts[k] > REPEAT_KEEP + 1}
                fewer.clear()
                fewer.update(more)
                ov = {**{k: v for k, v in ov.items() if k not in spec.repeat_counts}, **fewer}
                tried = bool(ov) and ov not in seen
                if not tried:
                    break
                got = attempt(ov)
            if not tried:
                continue
            if isinstance(got, str):
                why = got
                if _unlike(got):
                    if not fewer and ov:
                        # the sizes alone differ too: the layers are not to blame (the next key
                        # set, sizes that scale alone, lowers them again)
                        fewer.update(layers)
                    break  # scaling further only moves further from the full-size program
                continue
            return (ov, *got)
    return why


def _unlike(why: str) -> bool:
    return "does not build" in why or "different program" in why


def _with_fewer(scaled, fewer: dict[str, int]):
    """The scaled sizes, each with the layer counts lowered while `fewer` is not emptied (read at
    each step: the caller empties it when fewer layers are not the same program)."""
    for _, ov in scaled:
        yield {**ov, **fewer}


def _sizes_text(ov: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in ov.items())


def _key_sets(spec, tt, options, sizes: dict[str, int], filler):
    """All sizes first (the early ones before all, `size_rounds`); then, when that fails at the
    mildest factor, the sizes that build alone."""
    yield from size_rounds(spec, sizes)
    if len(sizes) == 1:
        return
    alone = []
    for k in sizes:
        ov = {k: shrink(sizes[k], 4)}
        if ov[k] == sizes[k]:
            continue
        got = _build(spec, tt, ov, options, filler)
        if isinstance(got, str):
            progress.phase("validate", f"{k} cannot be scaled alone: {got}")
        else:
            alone.append(k)
    if alone and len(alone) < len(sizes):
        yield alone


def _build(spec, tt, ov: dict[str, int], options: FrontendOptions, filler=None):
    """(spec, program, translation) of the reduced instance, or why it is not usable."""
    from solar_compiler.frontends.model_file import ModelFileError
    from solar_compiler.loopir.repetition import same_program_repeated
    from solar_compiler.loopir.same_program import same_program

    from .capture import CaptureError, capture
    from .frontend import op_filler
    from .translate import translate_program

    try:
        spec_r = spec.with_sizes(ov)
        prog_r = capture(spec_r, mode=options.mode, step=options.step, optimizer=options.optimizer or None)
        tt_r = translate_program(prog_r, kernel_name=tt.kernel.name,
                                 filler=op_filler(spec_r, prog_r, options, filler))
    except (ModelFileError, CaptureError, SolarError) as e:
        return f"the reduced instance {ov} does not build ({' '.join(str(e).split())[:160]})"
    if any(k in spec.repeat_counts for k in ov):
        diff = same_program_repeated(tt.kernel, tt_r.kernel)
    else:
        diff = same_program(tt.kernel, tt_r.kernel)
    if diff is not None:
        return f"the reduced instance {ov} is a different program ({diff})"
    return spec_r, prog_r, tt_r


def _try(spec, tt, ov: dict[str, int], options: FrontendOptions, filler=None):
    got = _build(spec, tt, ov, options, filler)
    if isinstance(got, str):
        return got
    spec_r, prog_r, tt_r = got
    record, why = at_size(spec_r, prog_r, tt_r, options, where=f"on the reduced instance {_sizes_text(ov)}")
    if record is None:
        return f"the reduced instance {_sizes_text(ov)}: {why}"
    return spec_r, prog_r, tt_r, record
