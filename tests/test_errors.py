"""The one error root (solar_compiler/errors.py): every user-facing error is a SolarError, which is an
xDSL DiagnosticException; a pass's own failure is also xDSL's PassFailedException; every error
carries an `error_class` that travels with it through pickling and the sandboxed child, and that
solar-bench records instead of guessing from the message."""

from __future__ import annotations

import ast
import pickle
import time
from pathlib import Path

import pytest
from xdsl.utils.exceptions import DiagnosticException, PassFailedException, VerifyException

from solar_compiler.errors import ERROR_CLASSES, PassError, SolarError, error_class_of
from solar_compiler.frontends import CaptureFailed
from solar_compiler.frontends.builder.translator import NoTemplate, TranslateError
from solar_compiler.frontends.captured_program import CaptureError
from solar_compiler.frontends.llm.config import LLMError
from solar_compiler.frontends.model_file import ModelFileError, load_model_file
from solar_compiler.frontends.sandbox import SandboxError, run_in_child, run_in_process
from solar_compiler.hw.errors import HwTargetError
from solar_compiler.loopir.affine import AffineError
from solar_compiler.loopir.ast import LoopIRError
from solar_compiler.loopir.rules import RuleError
from solar_compiler.options import OptionError

ROOT = Path(__file__).resolve().parent.parent


def test_a_solar_error_is_an_xdsl_diagnostic():
    assert issubclass(SolarError, DiagnosticException)
    assert isinstance(SolarError("m.py:1: bad"), DiagnosticException)
    e = PassError("annotate-costs: no einsum.graph")
    assert isinstance(e, PassFailedException) and isinstance(e, SolarError)
    assert e.error_class == "input"


@pytest.mark.parametrize("cls, error_class", [
    (SolarError, "translate"), (PassError, "input"), (OptionError, "input"), (ModelFileError, "input"),
    (CaptureError, "capture"), (CaptureFailed, "capture"), (NoTemplate, "unsupported op"),
    (TranslateError, "translate"), (HwTargetError, "hw"), (SandboxError, "translate"),
    (LoopIRError, "translate"), (AffineError, "translate"), (RuleError, "translate"), (LLMError, "translate"),
])
def test_every_error_joins_the_root_with_its_class(cls, error_class):
    assert issubclass(cls, SolarError) and issubclass(cls, DiagnosticException)
    assert cls.error_class == error_class and error_class in ERROR_CLASSES


def test_passes_raise_pass_errors():
    """A pass's own failures are PassFailedExceptions: no pass raises a bare SolarError."""
    for path in sorted((ROOT / "passes").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                assert getattr(node.exc.func, "id", None) != "SolarError", f"{path.name}:{node.lineno}"


def test_an_instance_says_its_own_class_and_keeps_it():
    e = CaptureFailed("m.py: validation failed on get_inputs():\n  out[0] 1.0 vs 2.0", error_class="validate")
    assert (e.error_class, CaptureFailed.error_class) == ("validate", "capture")
    back = pickle.loads(pickle.dumps(e))
    assert (type(back), back.error_class, str(back)) == (CaptureFailed, "validate", str(e))
    flat = e.flattened()
    assert (type(flat), flat.error_class, str(flat)) == (
        CaptureFailed, "validate", "m.py: validation failed on get_inputs(): out[0] 1.0 vs 2.0")
    loop = LoopIRError("bad\nindex", "k.loop:3:5").flattened()
    assert (type(loop), str(loop), loop.error_class) == (LoopIRError, "k.loop:3:5: bad index", "translate")
    with pytest.raises(ValueError, match="unknown error class 'oops'"):
        SolarError("x", error_class="oops")


def test_the_class_of_any_exception():
    assert error_class_of(NoTemplate("m.py:3: no loop-IR template for aten.det")) == "unsupported op"
    assert error_class_of(MemoryError()) == "memory"
    assert error_class_of(VerifyException("bad op")) == "translate"
    assert error_class_of(KeyError("x")) == "internal"  # no user error: a bug


# ---- the sandbox: the class crosses the process boundary ------------------------------------------
def _raises_capture_error() -> None:
    raise CaptureError("m.py:4: forward raised ValueError: no")


def _raises_bug() -> None:
    raise KeyError("oops")


def test_in_process_sandbox_errors_keep_their_class(tmp_path):
    with pytest.raises(SandboxError) as info:
        run_in_process(_raises_capture_error, user_file="m.py")
    assert (str(info.value), info.value.error_class) == ("m.py:4: forward raised ValueError: no", "capture")
    with pytest.raises(SandboxError) as info:
        run_in_process(_raises_bug, user_file="m.py")
    assert (str(info.value), info.value.error_class) == ("m.py: KeyError: 'oops'", "internal")
    # an exception raised by the user's own file is a capture failure, named at its line
    user = tmp_path / "user_model.py"
    user.write_text("def forward(x):\n    return x / 0\n")
    namespace: dict = {}
    exec(compile(user.read_text(), str(user), "exec"), namespace)
    with pytest.raises(SandboxError) as info:
        run_in_process(namespace["forward"], 1, user_file=str(user))
    assert str(info.value) == f"{user}:2: forward raised ZeroDivisionError: division by zero"
    assert info.value.error_class == "capture"


def test_child_sandbox_errors_keep_their_class(tmp_path):
    bad = tmp_path / "syntax.py"
    bad.write_text("def forward(self x):\n    return x\n")
    with pytest.raises(SandboxError) as info:
        run_in_child(load_model_file, str(bad), timeout_s=60)
    assert str(info.value) == f"{bad}:1: syntax error: invalid syntax"
    assert info.value.error_class == "input"
    with pytest.raises(SandboxError) as info:
        run_in_child(time.sleep, 30, timeout_s=1)
    assert (str(info.value), info.value.error_class) == ("sleep: timed out after 1 s", "timeout")
