"""`solar-opt`: the xdsl-opt style driver.

Input by extension: `.mlir` (MLIR, generic or custom syntax), `.loop` (the loop-IR text form),
`.py` (a source program, translated by `--translate` / `-p translate`). Shorthand flags only
add registered passes, so `--lift-einsum` and `-p lift-einsum` give the same output.

`--roofline` (or `--inverse-roofline`) runs: `--translate`, `--lift-einsum`, the `-p` passes, then
`lift-einsum` unless already there (the `-p` passes may need the loop dialect), with `narrow-needed`
just before the first `lift-einsum` unless `--no-narrow` or `-p` has it, and `roofline{...}` last.
`--reorder-chains` puts `reorder-chains` right after the first `lift-einsum` (adding both if needed).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import signal
import sys
import tempfile
from dataclasses import dataclass
from functools import partial
from typing import IO, Any, ClassVar, NoReturn

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.frontend.mlir import MLIRFrontend
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.utils.frontend import Frontend
from xdsl.utils.target import Target
from xdsl.xdsl_opt_main import xDSLOptMain

from solar_compiler.analysis.manager import renew_analyses
from solar_compiler.errors import SolarError
from solar_compiler.gc_policy import relax_gc
from solar_compiler.lifetime import Cancelled, cancel_on_signals
from solar_compiler.records import ProgramInfo

MODEL_ENV = "SOLAR_LLM_MODEL"

ROOFLINE_CHOICES = ("unfused", "fused", "cache-aware", "all")


@dataclass(frozen=True)
class LoopTextFrontend(Frontend):
    name: ClassVar[str] = "loop"

    def parse(self, ctx: Context, input: IO[bytes], input_name: str = "input") -> ModuleOp:
        from solar_compiler.dialects.convert import kernels_to_module
        from solar_compiler.loopir.domain import check_bounds
        from solar_compiler.text.parser import parse_kernels

        kernels = parse_kernels(input.read().decode(), input_name)
        for k in kernels:
            check_bounds(k)
        module = kernels_to_module(kernels)
        ProgramInfo(input_name, "loop-text").store(module)
        return module


@dataclass(frozen=True)
class SourceFileFrontend(Frontend):
    """A program in a source language: an empty module naming the file, for `translate`."""

    name: ClassVar[str] = "py"

    def parse(self, ctx: Context, input: IO[bytes], input_name: str = "input") -> ModuleOp:
        input.read()
        module = ModuleOp([])
        ProgramInfo(input_name).store(module)
        return module


@dataclass(frozen=True)
class LocatedMLIRFrontend(MLIRFrontend):
    """MLIR input whose ops without an explicit `loc(...)` get their position in the input file, so
    that a verification error names the line it is about (as mlir-opt's do)."""

    def parse(self, ctx: Context, input: IO[bytes], input_name: str = "input") -> ModuleOp:
        return _LocatingParser(ctx, input.read(), input_name).parse_module(not self.no_implicit_module)


class _LocatingParser(Parser):
    """An op written without a location gets its MLIR position; one written with `loc(...)` (even
    `loc(unknown)`) keeps it. Statements and nodes keep only what the input says: their location is
    the user's source position, which the loop text form prints."""

    _wrote_loc: list[bool]

    def parse_optional_location(self):  # noqa: ANN201 - xDSL's signature
        loc = super().parse_optional_location()
        if loc is not None and getattr(self, "_wrote_loc", None):
            self._wrote_loc[-1] = True
        return loc

    def parse_affine_map(self):  # noqa: ANN201 - xDSL's signature
        start = self._current_token.span
        try:
            return super().parse_affine_map()
        except NotImplementedError as e:  # xDSL's word for a semi-affine map: bad input, not a bug
            self.raise_error(f"not an affine map: {e}", start.start, self._current_token.span.start)

    def parse_affine_set(self):  # noqa: ANN201 - xDSL's signature
        start = self._current_token.span
        try:
            return super().parse_affine_set()
        except NotImplementedError as e:
            self.raise_error(f"not an affine set: {e}", start.start, self._current_token.span.start)

    def parse_operation(self) -> Operation:
        from solar_compiler.dialects.einsum import NodeOp
        from solar_compiler.dialects.loop import StmtOp

        if not hasattr(self, "_wrote_loc"):
            self._wrote_loc = []
        start = self._current_token.span
        self._wrote_loc.append(False)
        try:
            op = super().parse_operation()
        finally:
            wrote = self._wrote_loc.pop()
        if not wrote and isinstance(op.location, UnknownLoc) and not isinstance(op, StmtOp | NodeOp):
            loc = start.get_location()
            op.location = FileLineColLoc(StringAttr(loc.file), IntAttr(loc.line), IntAttr(loc.col))
        return op


@dataclass(frozen=True)
class LoopTextTarget(Target):
    """Print every kernel in the loop-IR text form."""

    name: ClassVar[str] = "loop"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from solar_compiler.text.printer import print_kernels
        from solar_compiler.transforms.kernels import module_kernels

        kernels = module_kernels(module)
        if not kernels:
            raise SolarError("no loop.kernel to print (is the input translated?)")
        output.write(print_kernels(kernels))


class _DeferredOutput(io.StringIO):
    """`-o FILE` output held in memory and written only once the whole run succeeded, atomically:
    a failed run neither creates FILE nor truncates an existing one."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def close(self) -> None:  # xDSLOptMain closes the stream in a `finally`; keep the text
        pass

    def commit(self) -> None:
        target = os.path.abspath(self.path)
        fd, tmp = tempfile.mkstemp(prefix=".solar-opt-", dir=os.path.dirname(target))
        try:
            with os.fdopen(fd, "w") as f:
                f.write(self.getvalue())
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise


class SolarOptMain(xDSLOptMain):
    _deferred: _DeferredOutput | None = None
    json_report: dict[str, Any] | None = None  # the last chunk's report, when the output is JSON
    below_bound: list[str] = []  # where a --measured time is below a bound (any chunk): exit 4

    def prepare_output(self) -> IO[str]:
        out = self.args.output_file
        if out is None:
            return sys.stdout
        inp = self.args.input_file
        if inp is not None and os.path.exists(out) and os.path.samefile(inp, out):
            raise SolarError(f"{out}: refusing to overwrite the input file with the output")
        self._deferred = _DeferredOutput(out)
        return self._deferred

    def run(self) -> None:
        super().run()
        if self._deferred is not None:
            self._deferred.commit()

    version_format = "solar-opt (xdsl {xdsl_version})"

    # solar-opt's own constructs come from its xDSL universe (`universe.py`); when the package's
    # `xdsl.universe` entry point is installed, xDSL's multiverse already holds them.
    def register_all_dialects(self) -> None:
        from solar_compiler.universe import SOLAR_UNIVERSE

        super().register_all_dialects()
        for name, factory in SOLAR_UNIVERSE.all_dialects.items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_frontends(self) -> None:
        from solar_compiler.universe import SOLAR_UNIVERSE

        self.available_frontends["mlir"] = lambda: LocatedMLIRFrontend
        self.available_frontends.update(SOLAR_UNIVERSE.all_frontends)
        super().register_all_frontends()

    def register_all_passes(self) -> None:
        from solar_compiler.passes import all_passes

        super().register_all_passes()
        for name, factory in all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        from solar_compiler.universe import SOLAR_UNIVERSE

        self.available_targets.update(SOLAR_UNIVERSE.all_targets)
        super().register_all_targets()

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.error = partial(_usage_error, arg_parser)  # type: ignore[method-assign]
        arg_parser.allow_abbrev = False  # a typo must not silently select another option
        _input_format_is_short_only(arg_parser)
        g = arg_parser.add_argument_group("solar-opt")
        g.add_argument("--translate", action="store_true",
                       help="translate a source program (.py) into loop IR (pass 'translate')")
        g.add_argument("--frontend", dest="translate_frontend", default=None, metavar="NAME",
                       help="with --translate: auto (default: deterministic, LLM where it cannot), "
                            "torch, jax, or llm (the whole program through the LLM)")
        g.add_argument("--llm-model", default=None, metavar="MODEL",
                       help=f"litellm model string, or 'manual' (default: ${MODEL_ENV})")
        g.add_argument("--llm-api-base", default=None, metavar="URL",
                       help="OpenAI-compatible server for the model (Ollama, vLLM: http://127.0.0.1:8000/v1)")
        g.add_argument("--llm-attempts", type=int, default=None, metavar="N",
                       help="attempts per translation, repairs included (default 4)")
        g.add_argument("--llm-transcript-dir", default=None, metavar="DIR",
                       help="transcript and manual prompts (default .solar-llm/<source hash>/)")
        g.add_argument("--llm-replay", default=None, metavar="FILE",
                       help="replay a recorded JSON-lines transcript instead of asking a model")
        g.add_argument("--llm-timeout", type=float, default=None, metavar="S",
                       help="seconds per LLM request (default 120)")
        g.add_argument("--llm-max-tokens", type=int, default=None, metavar="N",
                       help="token budget of the run (default 200000)")
        g.add_argument("--llm-max-cost", type=float, default=None, metavar="USD",
                       help="cost budget of the run, as litellm prices it (default 2)")
        g.add_argument("--llm-max-response", type=int, default=None, metavar="CHARS",
                       help="largest response accepted (default 64000 characters)")
        g.add_argument("--llm-ops", default=None, metavar="OPS",
                       help="comma-separated ops the LLM writes even where a template exists "
                            "(aten.kthvalue.default, or kthvalue for every overload)")
        g.add_argument("--frontend-options", default="", metavar="OPTS",
                       help="options of the translate pass, e.g. 'mode=train no-cache=true'")
        g.add_argument("--mode", choices=("eval", "train"), default=None, help="torch frontend mode")
        g.add_argument("--step", choices=("forward", "train"), default=None,
                       help="forward (default) or train: one training step, loss + parameter gradients "
                            "(docs/training.md)")
        g.add_argument("--optimizer", choices=("sgd", "adamw"), default=None,
                       help="with --step train: append the optimizer's parameter update")
        g.add_argument("--no-cache", action="store_true", help="bypass the translation cache")
        g.add_argument("--lift-einsum", action="store_true",
                       help="loop IR -> einsum graph (pass 'lift-einsum')")
        g.add_argument("--reorder-chains", action="store_true",
                       help="rewrite contraction trees to their cheapest association order "
                            "(pass 'reorder-chains', after lift-einsum)")
        g.add_argument("--roofline", choices=ROOFLINE_CHOICES, default=None,
                       help="compute bounds (pass 'roofline') and print the report")
        g.add_argument("--no-narrow", action="store_true",
                       help="with --roofline: price the kernels as written (skip pass 'narrow-needed')")
        g.add_argument("--hw", default=None,
                       help="hardware target(s): H100_SXM or H100_SXM,H200 or a YAML path")
        g.add_argument("--precision", default=None, help="precision policy: auto|fp32|tf32|bf16|fp16|fp8")
        g.add_argument("--precision-reason", default=None, metavar="TEXT",
                       help="why the precision policy, printed beside it (a SOL-ExecBench problem folder "
                            "sets both from the workload's tolerance)")
        g.add_argument("--cache-size", default=None,
                       help="cache-aware what-if: DRAM-level on-chip capacity in bytes (64MB, 0.5MiB)")
        g.add_argument("--cache-state", choices=("cold", "warm"), default=None,
                       help="timing contract: cold caches (default; flushed before each timed call) or warm "
                            "(a working set that fits on-chip storage may start there)")
        g.add_argument("--indirect", choices=("traced", "min"), default=None,
                       help="indirect reads and writes: distinct elements the traced sample touched "
                            "(default) or the minimum over all index values")
        g.add_argument("--algorithms", choices=("default", "classical"), default=None,
                       help="model of computation: default (the catalogue of rewrites a library or "
                            "kernel writer makes: docs/bounds.md section 0) or classical (the products "
                            "as written, SOLAR's model)")
        g.add_argument("--inverse-roofline", default=None, metavar="LATENCY",
                       help="required hardware for a target latency, e.g. 2ms or 500Hz")
        g.add_argument("--format", choices=("text", "json"), default=None, help="report format")
        g.add_argument("--plot", default=None, metavar="FILE", help="roofline chart (.png or .svg)")
        g.add_argument("--measured", default=None, metavar="TIME|FILE.json",
                       help="with --roofline: a measured time (310us) or a JSON of per-module times: "
                            "%% of SOL and headroom per fidelity")
        g.add_argument("--depth", type=_count("--depth"), default=None, metavar="N",
                       help="text report: module tree to depth N (default: the deepest that fits)")
        g.add_argument("--top", type=_count("--top"), default=None, metavar="N",
                       help="text report: rows per table (0: all; default: what fits the terminal)")
        g.add_argument("--ops", action="store_true",
                       help="text report: add the per-statement table (each statement priced alone)")
        g.add_argument("--explain", action="store_true",
                       help="text report: add the glossary of its terms (alone: print the glossary)")
        g.add_argument("--width", type=_count("--width", 40), default=None, metavar="COLUMNS",
                       help="text report width (default: the terminal's, else 120)")
        g.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
        g.add_argument("--calibrate-host", action="store_true",
                       help="derive this machine's ceilings as target 'host' (docs/hw-targets.md)")
        g.add_argument("--force", action="store_true", help="with --calibrate-host: even on a busy machine")
        g.add_argument("--debug", action="store_true", help="show Python tracebacks")

    def setup_pipeline(self) -> None:
        a = self.args
        pre: list[str] = []
        if a.translate:
            opts = [o for o in a.frontend_options.split() if o]
            if a.mode:
                opts.append(f"mode={a.mode}")
            if a.step:
                opts.append(f"step={a.step}")
            if a.optimizer:
                opts.append(f"optimizer={a.optimizer}")
            if a.no_cache:
                opts.append("no-cache=true")
            if a.translate_frontend:
                opts.append(f"frontend={_quote(a.translate_frontend)}")
            for flag in LLM_FLAGS:
                value = getattr(a, flag)
                if value is not None:
                    text = _quote(value) if isinstance(value, str) else value
                    opts.append(f"{flag.replace('_', '-')}={text}")
            pre.append("translate" + (f"{{{' '.join(opts)}}}" if opts else ""))
        passes = pre + ([a.passes] if a.passes else [])
        if a.lift_einsum:
            passes.insert(len(pre), "lift-einsum")
        post: list[str] = []
        if a.roofline or a.inverse_roofline:
            opts = [f"fidelity={a.roofline or 'all'}"]
            if a.hw:
                opts.append(f"hw={_quote(a.hw)}")
            if a.precision:
                opts.append(f"precision={_quote(a.precision)}")
            if a.precision_reason:
                opts.append(f"precision-reason={_quote(a.precision_reason)}")
            if a.cache_size:
                opts.append(f"cache-size={_quote(a.cache_size)}")
            if a.cache_state:
                opts.append(f"cache-state={a.cache_state}")
            if a.indirect:
                opts.append(f"indirect={a.indirect}")
            if a.algorithms:
                opts.append(f"algorithms={a.algorithms}")
            if a.inverse_roofline:
                opts.append(f"inverse={_quote(a.inverse_roofline)}")
            if a.measured:
                opts.append(f"measured={_quote(a.measured)}")
            passes = roofline_pipeline(passes, narrow=not a.no_narrow)
            post.append(f"roofline{{{' '.join(opts)}}}")
            if a.target == "mlir":
                a.target = "json" if a.format == "json" else "report"
        elif a.format:
            a.target = "json" if a.format == "json" else "report"
        elif a.measured:
            raise SolarError("--measured compares measured times with the bounds: add --roofline")
        self._text_report_options()
        if a.reorder_chains:
            passes = with_reorder_chains(passes)
        a.passes = ",".join(passes + post)
        try:
            super().setup_pipeline()
        except ValueError as e:  # xDSL's pipeline parser: an unknown pass or pass option
            raise SolarError(f"bad pass pipeline '{a.passes}': {' '.join(str(e).split())}",
                             error_class="input") from None
        for p in self.pipeline.passes:  # pre-flight: a bad option fails now, before any capture
            check = getattr(p, "check_options", None)
            if check is not None:
                check()
        checked = self.pipeline.callback

        def callback(previous: ModulePass | None, module: ModuleOp, following: ModulePass | None) -> None:
            if previous is not None and not getattr(previous, "preserves_analyses", False):
                renew_analyses(module)  # its results are stale; the results it seeded are not
            if following is not None:
                _pass_phase(following)
            if checked is None:
                return
            # The module is verified after parsing and after every pass, except a pass that changes
            # no op (an analysis: `preserves_analyses`) or verifies what it builds itself
            # (`verifies_output`): re-verifying ~16k unchanged ops costs seconds on a large network.
            skip = previous is not None and (getattr(previous, "preserves_analyses", False)
                                             or getattr(previous, "verifies_output", False))
            was = self.args.disable_verify
            self.args.disable_verify = was or skip
            try:
                checked(previous, module, following)
            finally:
                self.args.disable_verify = was

        self.pipeline = dataclasses.replace(self.pipeline, callback=callback)

    def _text_report_options(self) -> None:
        """The text report's view flags become options of the `report` target (`report{width=..}`):
        the width of the terminal (else $COLUMNS, else 120) and as many rows as fit it."""
        a = self.args
        view = a.depth is not None or a.top is not None or a.ops or a.explain or a.width is not None
        if a.target != "report":
            if view and a.target != "report" and not a.target.startswith("report{"):
                flags = [f for f, on in (("--depth", a.depth is not None), ("--top", a.top is not None),
                                         ("--ops", a.ops), ("--explain", a.explain),
                                         ("--width", a.width is not None)) if on]
                raise SolarError(f"{', '.join(flags)}: options of the text report; the output here is "
                                 f"'{a.target}'")
            return
        width, rows = _terminal(None if a.output_file else sys.stdout)
        opts = [f"width={a.width or width}", f"top={a.top if a.top is not None else max(10, rows // 2)}"]
        if a.depth is not None:
            opts.append(f"depth={a.depth}")
        if a.ops:
            opts.append("ops=true")
        if a.explain:
            opts.append("explain=true")
        a.target = f"report{{{' '.join(opts)}}}"

    def prepare_input(self):  # noqa: ANN201 - xDSL's signature
        try:
            return super().prepare_input()
        except OSError as e:
            raise SolarError(f"{self.args.input_file}: cannot read the input: {e.strerror}",
                             error_class="input") from None
        except ValueError as e:  # an unknown file extension
            raise SolarError(f"{self.args.input_file}: {e}; use -f loop|mlir|py",
                             error_class="input") from None

    def output_resulting_program(self, prog: ModuleOp) -> str:
        if self.args.plot:
            from solar_compiler.plot import write_plot
            from solar_compiler.report import module_report

            write_plot(module_report(prog), self.args.plot)
        text = super().output_resulting_program(prog)
        if getattr(self.args, "measured", None):
            from solar_compiler.analysis.measured import violations
            from solar_compiler.analysis.summary import module_report

            report = module_report(prog)
            if report is not None:
                self.below_bound = [*self.below_bound, *violations(report.get("measured"))]
        if self.args.target == "json":  # for run_pipeline's caller (solar-bench)
            self.json_report = json.loads(text)
        return text


LLM_FLAGS = ("llm_model", "llm_api_base", "llm_attempts", "llm_transcript_dir", "llm_replay", "llm_timeout",
             "llm_max_tokens", "llm_max_cost", "llm_max_response", "llm_ops")


def _input_format_is_short_only(parser: argparse.ArgumentParser) -> None:
    """xDSL spells its input-format option `-f/--frontend`; here `--frontend` picks the translation
    frontend (auto|torch|jax|llm), so the input format keeps `-f` and gets `--input-format`."""
    action = parser._option_string_actions.pop("--frontend")
    action.option_strings = ["-f", "--input-format"]
    parser._option_string_actions["--input-format"] = action


def split_pipeline(pipeline: str) -> list[str]:
    """The passes of a `-p` pipeline with their options: 'a,b{x=1,2},c' -> ['a', 'b{x=1,2}', 'c']."""
    out, depth, cur = [], 0, ""
    for ch in pipeline + ",":
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [p for p in out if p]


def roofline_pipeline(passes: list[str], narrow: bool = True) -> list[str]:
    """The passes before `roofline`: `lift-einsum` appended unless present (after the user's passes,
    which may need the loop dialect), and `narrow-needed` just before the first `lift-einsum`
    (so after a `translate` that makes the kernels) unless `narrow` is off or it is already there."""
    segs = [p for spec in passes for p in split_pipeline(spec)]
    names = [p.split("{", 1)[0].strip() for p in segs]
    if "lift-einsum" not in names:
        segs.append("lift-einsum")
        names.append("lift-einsum")
    if narrow and "narrow-needed" not in names:
        segs.insert(names.index("lift-einsum"), "narrow-needed")
    return segs


#: The progress line of a pass about to run (`translate` reports its own phases from the frontend).
PHASES = {"narrow-needed": ("narrow", "dropping work no output needs"),
          "lift-einsum": ("lift", "loop nests to einsum nodes"),
          "annotate-costs": ("cost", "exact FLOPs and bytes (islpy)")}


def _pass_phase(p: ModulePass) -> None:
    from solar_compiler import progress

    if p.name == "roofline":
        fid = getattr(p, "fidelity", "all")
        hw = getattr(p, "hw", "")
        progress.phase("bound", f"{'every fidelity' if fid == 'all' else fid} on "
                                f"{hw if isinstance(hw, str) else ','.join(hw)}")
    elif p.name in PHASES:
        progress.phase(*PHASES[p.name])


def _terminal(stream: IO[str] | None) -> tuple[int, int]:
    """(columns, lines) for the text report: $COLUMNS/$LINES when set, else the terminal's when
    `stream` is one, else 120 x 40 (a file or a pipe)."""
    import shutil

    fallback = (120, 40)
    if os.environ.get("COLUMNS") or (stream is not None and stream.isatty()):
        size = shutil.get_terminal_size(fallback)
        return max(size.columns, 40), max(size.lines, 10)
    return fallback


def _count(flag: str, least: int = 0):  # noqa: ANN202 - an argparse type
    """An argparse type: a whole number >= `least`, else the one-line usage error naming `flag`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} expects a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{flag} must be at least {least}, got {value}")
        return value

    return parse
def with_reorder_chains(passes: list[str]) -> list[str]:
    """`reorder-chains` right after the first `lift-einsum` (appended, with it, when absent)."""
    segs = [p for spec in passes for p in split_pipeline(spec)]
    names = [p.split("{", 1)[0].strip() for p in segs]
    if "reorder-chains" in names:
        return segs
    if "lift-einsum" not in names:
        return [*segs, "lift-einsum", "reorder-chains"]
    at = names.index("lift-einsum") + 1
    return [*segs[:at], "reorder-chains", *segs[at:]]


def _quote(value: str) -> str:
    """A pass-option string literal: unquoted, '0.5ms' or 'out/r.png' or 'A,B' would not lex as one."""
    return json.dumps(value)


def run_pipeline(argv: list[str]) -> dict[str, Any] | None:
    """Run `solar-opt` for the command line `argv` in this process: the output goes where `argv` says
    (stdout, or `-o FILE`, written only on success); returns the report dict (schema
    `solar-report/1`) when the output is the JSON report (`--format=json`), else None. Errors raise
    (SolarError and others); `main` turns them into one line. `solar-bench` calls this in its
    sandboxed workers, so both tools build the same pipeline."""
    return _run_opt(argv).json_report


def _run_opt(argv: list[str]) -> SolarOptMain:
    relax_gc()
    opt = SolarOptMain(args=argv)
    opt.run()
    return opt


def run_problem_or_file(argv: list[str]) -> list[str]:
    """`solar-opt` for `argv`, or for a SOL-ExecBench problem folder once per selected workload
    (`--workload N|UUID|all`, default the first), each output headed by a line naming the workload when
    several. Returns where a measured time fell below a bound (`--measured`), over every run."""
    from solar_compiler.frontends.solexec.problem import expand_argv
    from solar_compiler.frontends.zoo.spec import expand_argv as expand_spec

    argv = expand_spec(argv) or argv  # hf:NAME -> its generated model file (docs/model-zoo.md)
    runs = expand_argv(argv)
    if runs is None:
        return list(_run_opt(argv).below_bound)
    if len(runs) > 1 and "-o" in argv:
        raise SolarError("--workload all writes one report per workload: drop -o (or pick one workload)")
    from solar_compiler.frontends.job import translation_batch

    below: list[str] = []
    # the workloads are one program at several shapes: translated together in one warm child
    with translation_batch([path for _, _, path in runs] if len(runs) > 1 else []):
        for label, args, _ in runs:
            if len(runs) > 1:
                print(f"# workload {label}", flush=True)
            below += [f"workload {label}: {w}" if len(runs) > 1 else w for w in _run_opt(args).below_bound]
            sys.stdout.flush()
    return below


def main(argv: list[str] | None = None) -> int:
    """Run `solar-opt`. A user error (SolarError, a parse or verification error) is one line on stderr
    and exit 1; anything else is a bug, reported as one line saying so (the traceback with --debug)
    and exit 70. A `--measured` time below a bound is reported (the output is still written) and
    exits 4 (SOL_VIOLATION_EXIT), so CI can gate on it."""
    if argv is None:
        argv = sys.argv[1:]
    debug = "--debug" in argv
    from solar_compiler import progress

    progress.disable()
    if "--quiet" not in argv and sys.stderr.isatty():
        progress.enable(sys.stderr)
    try:
        with cancel_on_signals():  # SIGTERM/SIGINT: children killed in `finally`s, one line, 128+N
            if argv == ["--explain"]:  # the glossary alone
                from solar_compiler.render.glossary import explain_lines

                print("\n".join(explain_lines(_terminal(sys.stdout)[0])))
                return 0
            if "--calibrate-host" in argv:
                from solar_compiler.hw.host import calibrate_host, summary

                target = calibrate_host(force="--force" in argv)
                print("\n".join([*summary(target), f"host calibrated: {target.path}"]))
                return 0
            below_bound = run_problem_or_file(argv)
            progress.phase("done")
            if below_bound:
                from solar_compiler.analysis.measured import SOL_VIOLATION_EXIT

                where = ", ".join(below_bound)
                print(f"solar-opt: SOL violation: the measured time is below the bound ({where}): a bug in "
                      "the bound, or a measurement of something else", file=sys.stderr)
                return SOL_VIOLATION_EXIT
    except SystemExit:
        raise
    except KeyboardInterrupt as e:
        sig = e if isinstance(e, Cancelled) else Cancelled(signal.SIGINT)
        print(f"solar-opt: cancelled by {sig.name}", file=sys.stderr)
        return sig.exit_code
    except BrokenPipeError:  # the reader of our output went away (`| head`): nothing to report
        return 1
    except (ParseError, DiagnosticException) as e:  # SolarError and VerifyException among them
        if debug:
            raise
        print(f"solar-opt: error: {one_line(e)}", file=sys.stderr)
        return int(getattr(e, "exit_code", 1))  # 3: the manual LLM provider waits for a response
    except Exception as e:
        if debug:
            raise
        text = " ".join(str(e).split())
        print(f"solar-opt: internal error (a bug in solar-opt, not in the input): {type(e).__name__}: "
              f"{text} (rerun with --debug for the traceback)", file=sys.stderr)
        return 70
    finally:
        progress.disable()
    return 0


def cli() -> None:
    """The `solar-opt` command: `main`, then an exit that skips the interpreter's teardown. A large
    network's IR is a cyclic heap of ~10^6 objects that the final collection would free one by one
    (1.5 s of 11 for KernelBench's DenseNet201) just before the process ends anyway. Output is
    flushed and atexit handlers (temporary directories' finalizers among them) run first."""
    import atexit

    rc = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`| head`)
        rc = rc or 1
    sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(rc)


def one_line(e: BaseException) -> str:
    """The one-line form of a user error: `file:line:col: what` where the position is known. A
    SolarError (an xDSL diagnostic too) says where itself; xDSL's own diagnostics get the position
    of their op."""
    if isinstance(e, SolarError):
        return " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, ParseError):
        loc = e.span.get_location()  # Location(file, line, col)
        what = " ".join(str(e.msg).split()) or "parse error"
        return f"{loc.file}:{loc.line}:{loc.col}: {what}"
    if isinstance(e, DiagnosticException):  # VerifyException among them
        text = " ".join(str(e.args[0] if e.args else e).split()) or type(e).__name__
        at = _op_position(getattr(e, "op", None))
        return f"{at}: {text}" if at else f"verification failed: {text}"
    return " ".join(str(e).split()) or type(e).__name__


def _op_position(op: Operation | None) -> str | None:
    """The source position of an op, or of the nearest enclosing op that has one."""
    from solar_compiler.dialects.loop import location_text

    while op is not None:
        text = location_text(op.location)
        if text:
            return text
        op = op.parent_op()
    return None


def _usage_error(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    """argparse's error, as one line with a suggestion instead of the whole usage text."""
    import difflib
    import re

    m = re.match(r"unrecognized arguments: (\S+)", message)
    if m:
        flag = m.group(1).split("=")[0]
        known = [o for a in parser._actions for o in a.option_strings]
        close = difflib.get_close_matches(flag, known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else " (solar-opt --help lists the options)"
        raise SolarError(f"unknown option '{flag}'{hint}", error_class="input")
    text = " ".join(message.split())
    m = re.match(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)$", text)
    if m:  # a typo in a value: the closest choice, then all of them
        choices = [c.strip().strip("'") for c in m.group(3).split(",")]
        close = difflib.get_close_matches(m.group(2), choices, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise SolarError(f"argument {m.group(1)}: invalid choice '{m.group(2)}' ({hint}choose from "
                         f"{', '.join(choices)})", error_class="input")
    raise SolarError(text, error_class="input")


if __name__ == "__main__":
    sys.exit(main())
