"""`solar-opt`: the xdsl-opt style driver.

Input by extension: `.mlir` (MLIR, generic or custom syntax), `.loop` (the loop-IR text form),
`.py` (a source program, translated by `--translate` / `-p translate`). Shorthand flags only
add registered passes, so `--lift-einsum` and `-p lift-einsum` give the same output.

`--roofline` (or `--inverse-roofline`) runs: `--translate`, `--lift-einsum`, the `-p` passes, then
`lift-einsum` unless already there (the `-p` passes may need the loop dialect), with `narrow-needed`
just before the first `lift-einsum` unless `--no-narrow` or `-p` has it, and `roofline{...}` last.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import sys
import tempfile
from dataclasses import dataclass
from typing import IO, Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.utils.frontend import Frontend
from xdsl.utils.target import Target
from xdsl.xdsl_opt_main import xDSLOptMain

from solar_compiler.errors import SolarError
from solar_compiler.lifetime import Cancelled, cancel_on_signals

ROOFLINE_CHOICES = ("unfused", "fused", "cache-aware", "all")


@dataclass(frozen=True)
class LoopTextFrontend(Frontend):
    name: ClassVar[str] = "loop"

    def parse(self, ctx: Context, input: IO[bytes], input_name: str = "input") -> ModuleOp:
        from solar_compiler.loopir.convert import kernels_to_module
        from solar_compiler.polyhedral import check_bounds
        from solar_compiler.text.parser import parse_kernels

        kernels = parse_kernels(input.read().decode(), input_name)
        for k in kernels:
            check_bounds(k)
        module = kernels_to_module(kernels)
        module.attributes["solar.source"] = StringAttr(input_name)
        module.attributes["solar.frontend"] = StringAttr("loop-text")
        return module


@dataclass(frozen=True)
class SourceFileFrontend(Frontend):
    """A program in a source language: an empty module naming the file, for `translate`."""

    name: ClassVar[str] = "py"

    def parse(self, ctx: Context, input: IO[bytes], input_name: str = "input") -> ModuleOp:
        input.read()
        module = ModuleOp([])
        module.attributes["solar.source"] = StringAttr(input_name)
        return module


@dataclass(frozen=True)
class LoopTextTarget(Target):
    """Print every kernel in the loop-IR text form."""

    name: ClassVar[str] = "loop"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from solar_compiler.loopir.convert import module_kernels
        from solar_compiler.text.printer import print_kernels

        kernels = module_kernels(module)
        if not kernels:
            raise SolarError("no loop.kernel to print (is the input translated?)")
        output.write(print_kernels(kernels))


TARGETS: dict[str, str] = {
    "loop": "solar_compiler.driver:LoopTextTarget",
    "report": "solar_compiler.report:TextReportTarget",
    "json": "solar_compiler.report:JsonReportTarget",
}


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

    def output_resulting_program(self, prog: ModuleOp) -> str:
        text = super().output_resulting_program(prog)
        if self.args.target == "json":
            self.json_report = json.loads(text)
        return text

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

    def register_all_dialects(self) -> None:
        super().register_all_dialects()

        def loop():
            from solar_compiler.dialects.loop import Loop

            return Loop

        def einsum():
            from solar_compiler.dialects.einsum import Einsum

            return Einsum

        self.ctx.register_dialect("loop", loop)
        self.ctx.register_dialect("einsum", einsum)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["loop"] = lambda: LoopTextFrontend
        self.available_frontends["py"] = lambda: SourceFileFrontend

    def register_all_passes(self) -> None:
        from solar_compiler.passes import all_passes

        super().register_all_passes()
        for name, factory in all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        import importlib

        super().register_all_targets()
        def lazy(path: str):
            mod, _, cls = path.partition(":")
            return lambda: getattr(importlib.import_module(mod), cls)

        for name, path in TARGETS.items():
            self.available_targets[name] = lazy(path)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        g = arg_parser.add_argument_group("solar-opt")
        g.add_argument("--translate", action="store_true",
                       help="translate a source program (.py) into loop IR (pass 'translate')")
        g.add_argument("--frontend-options", default="", metavar="OPTS",
                       help="options of the translate pass, e.g. 'mode=train no-cache=true'")
        g.add_argument("--mode", choices=("eval", "train"), default=None, help="torch frontend mode")
        g.add_argument("--no-cache", action="store_true", help="bypass the translation cache")
        g.add_argument("--lift-einsum", action="store_true",
                       help="loop IR -> einsum graph (pass 'lift-einsum')")
        g.add_argument("--roofline", choices=ROOFLINE_CHOICES, default=None,
                       help="compute bounds (pass 'roofline') and print the report")
        g.add_argument("--no-narrow", action="store_true",
                       help="with --roofline: price the kernels as written (skip pass 'narrow-needed')")
        g.add_argument("--hw", default=None,
                       help="hardware target(s): H100_SXM or H100_SXM,H200 or a YAML path")
        g.add_argument("--precision", default=None, help="precision policy: auto|fp32|tf32|bf16|fp16|fp8")
        g.add_argument("--cache-size", default=None,
                       help="cache-aware what-if: DRAM-level on-chip capacity in bytes (64MB, 0.5MiB)")
        g.add_argument("--inverse-roofline", default=None, metavar="LATENCY",
                       help="required hardware for a target latency, e.g. 2ms or 500Hz")
        g.add_argument("--format", choices=("text", "json"), default=None, help="report format")
        g.add_argument("--plot", default=None, metavar="FILE", help="roofline chart (.png or .svg)")
        g.add_argument("--calibrate-host", action="store_true", help="measure this machine as target 'host'")
        g.add_argument("--debug", action="store_true", help="show Python tracebacks")

    def setup_pipeline(self) -> None:
        a = self.args
        pre: list[str] = []
        if a.translate:
            opts = [o for o in a.frontend_options.split() if o]
            if a.mode:
                opts.append(f"mode={a.mode}")
            if a.no_cache:
                opts.append("no-cache=true")
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
            if a.cache_size:
                opts.append(f"cache-size={_quote(a.cache_size)}")
            if a.inverse_roofline:
                opts.append(f"inverse={_quote(a.inverse_roofline)}")
            if a.plot:
                opts.append(f"plot={_quote(a.plot)}")
            passes = roofline_pipeline(passes, narrow=not a.no_narrow)
            post.append(f"roofline{{{' '.join(opts)}}}")
            if a.target == "mlir":
                a.target = "json" if a.format == "json" else "report"
        elif a.format:
            a.target = "json" if a.format == "json" else "report"
        a.passes = ",".join(passes + post)
        super().setup_pipeline()


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


def _quote(value: str) -> str:
    """A pass-option string literal: unquoted, '0.5ms' or 'out/r.png' or 'A,B' would not lex as one."""
    return json.dumps(value)


def run_pipeline(argv: list[str]) -> dict[str, Any] | None:
    """Run `solar-opt` for the command line `argv` in this process: the output goes where `argv` says
    (stdout, or `-o FILE`, written only on success); returns the report dict (schema
    `solar-report/1`) when the output is the JSON report (`--format=json`), else None. Errors raise
    (SolarError and others); `main` turns them into one line. `solar-bench` calls this in its
    sandboxed workers, so both tools build the same pipeline."""
    opt = SolarOptMain(args=argv)
    opt.run()
    return opt.json_report


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    debug = "--debug" in argv
    try:
        with cancel_on_signals():  # SIGTERM/SIGINT: children killed in `finally`s, one line, 128+N
            if "--calibrate-host" in argv:
                from solar_compiler.hw import calibrate_host

                target = calibrate_host()
                print(f"host calibrated: {target.path}")
                return 0
            run_pipeline(argv)
    except SystemExit:
        raise
    except KeyboardInterrupt as e:
        sig = e if isinstance(e, Cancelled) else Cancelled(signal.SIGINT)
        print(f"solar-opt: cancelled by {sig.name}", file=sys.stderr)
        return sig.exit_code
    except BaseException as e:  # every failure is one line on stderr unless --debug
        if debug:
            raise
        print(f"solar-opt: error: {one_line(e)}", file=sys.stderr)
        return 1
    return 0


def one_line(e: BaseException) -> str:
    from xdsl.utils.exceptions import ParseError

    if isinstance(e, ParseError):
        loc = e.span.get_location()  # Location(file, line, col)
        what = " ".join(str(e.msg).split()) or "parse error"
        return f"{loc.file}:{loc.line}:{loc.col}: {what}"
    text = " ".join(str(e).split()) or type(e).__name__
    if type(e).__name__ in ("VerifyException", "DiagnosticException"):
        return f"verification failed: {text}"
    if isinstance(e, (SolarError, ValueError, OSError)):
        return text
    return f"{type(e).__name__}: {text}"


if __name__ == "__main__":
    sys.exit(main())
