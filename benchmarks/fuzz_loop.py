"""Mutation fuzzer for the loop-IR text form and everything that consumes it.

Every example in `examples/loop/`, and `lit_tests/loop/everything.loop`, is mutated (characters,
tokens and lines deleted, duplicated or swapped; numbers replaced by huge, zero or negative ones;
indentation changed; random tokens inserted) and pushed in-process through parse -> check_bounds ->
conversion -> verify -> text and MLIR printers (each re-parsed: a printed program must read back
identical) -> loop-stats counts and footprints.
A failure must be one of the tool's own diagnostics; any other exception, or a round trip that
changes the program, is a bug and is reported with the input that caused it.

    .venv/bin/python benchmarks/fuzz_loop.py --n 10000 [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

from solar_compiler.dialects.convert import kernels_to_module, module_kernels
from solar_compiler.dialects.loop import Loop
from solar_compiler.errors import SolarError
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import LoopIRError, statements
from solar_compiler.loopir.domain import check_bounds, footprint, iteration_count
from solar_compiler.text.parser import parse_kernels
from solar_compiler.text.printer import print_kernels

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "loop"
EVERYTHING = REPO / "lit_tests" / "loop" / "everything.loop"  # every construct of the text form
DIAGNOSTICS = (LoopIRError, SolarError, VerifyException, ParseError)
VOCAB = ["kernel", "for", "in", "range", "scan", "if", "and", "or", "not", "else", "local", "input",
         "weight", "output", "f32", "i64", "bool", "bf16", "i8", "exp", "max", "min", "select", "sqrt",
         "inf", "nan", "True", "i", "j", "k", "A", "C", "X", "Y", "=", "+=", "max=", "*=", "==", "!=",
         ">=", "<", "+", "-", "*", "/", "//", "%", "**", "(", ")", "[", "]", ",", ":", "@", '"f.py:1"',
         "0", "1", "-1", "7", "0.5", "1e300", "99999999999999999999", "\n", "    ", "\t", "#", "\\\n"]
NUMBERS = ["0", "-1", "-7", "99999999999999999999", "18446744073709551617", "1000000000", "3", "1e999",
           "-0.0", "2147483648"]
TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\*\*|//|[-+*<>=!]=|\S")


def examples() -> dict[str, str]:
    """The seeds: every documented example, plus the kernel that uses every construct."""
    return {p.name: p.read_text() for p in [*sorted(EXAMPLES.glob("*.loop")), EVERYTHING]}


# ---- mutations ----------------------------------------------------------------------------------
def _spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in TOKEN.finditer(text)]


def _char(rng: random.Random, t: str) -> str:
    if not t:
        return t
    i = rng.randrange(len(t))
    op = rng.randrange(3)
    if op == 0:
        return t[:i] + t[i + 1:]
    if op == 1:
        return t[:i] + t[i] + t[i:]
    j = min(i + 1, len(t) - 1)
    return t[:i] + t[j] + t[i] + t[j + 1:] if j > i else t


def _token(rng: random.Random, t: str) -> str:
    spans = _spans(t)
    if len(spans) < 2:
        return t
    a, b = rng.sample(spans, 2)
    if a > b:
        a, b = b, a
    op = rng.randrange(3)
    if op == 0:
        return t[:a[0]] + t[a[1]:]
    if op == 1:
        return t[:a[1]] + " " + t[a[0]:a[1]] + t[a[1]:]
    return t[:a[0]] + t[b[0]:b[1]] + t[a[1]:b[0]] + t[a[0]:a[1]] + t[b[1]:]


def _line(rng: random.Random, t: str) -> str:
    lines = t.split("\n")
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    op = rng.randrange(3)
    if op == 0:
        del lines[i]
    elif op == 1:
        lines.insert(j, lines[i])
    else:
        lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def _number(rng: random.Random, t: str) -> str:
    nums = [m.span() for m in re.finditer(r"\d+(?:\.\d*)?(?:[eE][-+]?\d+)?", t)]
    if not nums:
        return t
    a, b = rng.choice(nums)
    return t[:a] + rng.choice(NUMBERS) + t[b:]


def _indent(rng: random.Random, t: str) -> str:
    lines = t.split("\n")
    i = rng.randrange(len(lines))
    body = lines[i].lstrip(" \t")
    depth = len(lines[i]) - len(body)
    new = rng.choice([0, max(depth - 4, 0), depth + 4, depth + 1, max(depth - 1, 0)])
    lines[i] = (" " * new if rng.random() < 0.9 else "\t" * (new // 4 + 1)) + body
    return "\n".join(lines)


def _insert(rng: random.Random, t: str) -> str:
    spans = _spans(t)
    at = rng.choice(spans)[rng.randrange(2)] if spans else 0
    return t[:at] + " " + rng.choice(VOCAB) + " " + t[at:]


MUTATORS: list[Callable[[random.Random, str], str]] = [_char, _token, _line, _number, _indent, _insert]


def mutate(rng: random.Random, text: str) -> str:
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        text = rng.choice(MUTATORS)(rng, text)
    return text


# ---- the pipeline under test ----------------------------------------------------------------------
_CTX: Context | None = None


def _ctx() -> Context:
    global _CTX
    if _CTX is None:
        _CTX = Context()
        _CTX.load_dialect(Builtin)
        _CTX.load_dialect(Loop)
    return _CTX


def _mlir(module, generic: bool) -> str:
    import io

    buf = io.StringIO()
    Printer(stream=buf, print_generic_format=generic).print_op(module)
    return buf.getvalue()


class RoundTripError(AssertionError):
    """A printed program that does not read back as the same program: a printer/parser bug."""


def run_pipeline(text: str, filename: str = "fuzz.loop") -> str:
    """Everything `solar-opt x.loop -p loop-stats -t loop` does, plus the MLIR round trips.
    Returns "ok" or raises (a diagnostic, or a bug)."""
    kernels = parse_kernels(text, filename)
    for k in kernels:
        check_bounds(k)
    module = kernels_to_module(kernels)
    module.verify()
    printed = print_kernels(module_kernels(module))
    again = parse_kernels(printed, "printed.loop")
    if print_kernels(again) != printed or again != kernels:
        raise RoundTripError(f"text round trip changed the program:\n{printed}")
    custom = _mlir(module, generic=False)
    for generic in (False, True):
        src = _mlir(module, generic)
        back = Parser(_ctx(), src, "printed.mlir").parse_module()
        back.verify()
        if _mlir(back, generic=False) != custom:
            raise RoundTripError(f"MLIR ({'generic' if generic else 'custom'}) round trip changed:\n{src}")
    for k in module_kernels(module):
        for s in statements(k):
            n = iteration_count(s)
            if n < 0:
                raise RoundTripError(f"negative iteration count {n}")
            footprint(s, [i for i in s.stmt.indices if isinstance(i, AffExpr)])  # a scatter: affine dims
    return "ok"


class _Timeout(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001
    raise _Timeout()


def classify(text: str, seconds: int = 10) -> tuple[str, str]:
    """("ok" | "diagnostic" | "bug" | "timeout", detail)."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        run_pipeline(text)
        return "ok", ""
    except _Timeout:
        return "timeout", ""
    except DIAGNOSTICS as e:
        msg = str(e)
        if "\n" in msg.strip() and not isinstance(e, ParseError | VerifyException):
            return "bug", f"multi-line diagnostic: {msg!r}"
        return "diagnostic", type(e).__name__
    except Exception:  # noqa: BLE001 - the point is to catch everything else
        return "bug", traceback.format_exc()
    finally:
        signal.alarm(0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="number of mutated inputs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=5, help="bugs to print in full")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    srcs = examples()
    names = sorted(srcs)
    for name in names:  # the unmutated examples must go through cleanly
        status, detail = classify(srcs[name])
        if status != "ok":
            print(f"example {name} fails: {status} {detail}", file=sys.stderr)
            return 1
    counts: dict[str, int] = {}
    bugs: list[tuple[str, str, str]] = []
    t0 = time.perf_counter()
    for _ in range(args.n):
        name = rng.choice(names)
        text = mutate(rng, srcs[name])
        status, detail = classify(text)
        counts[status] = counts.get(status, 0) + 1
        if status in ("bug", "timeout"):
            bugs.append((name, text, detail))
    dt = time.perf_counter() - t0
    print(f"fuzz_loop: {args.n} inputs from {len(names)} examples in {dt:.1f} s "
          f"({args.n / dt:.0f}/s): " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    for name, text, detail in bugs[:args.show]:
        print(f"--- {name} mutated:\n{text}\n--- {detail}", file=sys.stderr)
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
