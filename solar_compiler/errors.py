"""The one root of the errors users see: a one-line diagnostic, printed without a traceback.

`SolarError` is an xDSL `DiagnosticException`, so xDSL's tools treat it as theirs: `xdsl-opt
--verify-diagnostics` prints it as one diagnostic, as it does a verifier's message (plain
`xdsl-opt` re-raises every diagnostic with its traceback, by xDSL's design), and `solar-opt`
prints it as one line with exit status 1. A pass's own failure is a `PassError`, which is also
xDSL's `PassFailedException`.

Every error carries an `error_class`, one of `ERROR_CLASSES`: what kind of failure it is, for
`solar-bench`'s per-suite tallies. A class states its usual kind; a raise site whose failure is of
another kind says so (`SolarError(msg, error_class="validate")`). The class travels with the error
through the sandboxed child (pickled with it), so no one has to guess it from the message.
"""

from __future__ import annotations

from xdsl.utils.exceptions import DiagnosticException, ParseError, PassFailedException

ERROR_CLASSES: dict[str, str] = {
    "input": "the input is wrong: a model file (syntax, get_inputs, sizes), a loop or MLIR file, an "
             "option or a pass option",
    "capture": "the framework's capture of the program failed (forward raised under tracing, export "
               "and the dispatch recorder both failed, an unsupported dtype)",
    "unsupported op": "the frontend has no translation for an op (no loop-IR template for aten.x)",
    "translate": "any other failure of the pipeline: translation, lifting, costs, bounds",
    "validate": "the translation ran but disagrees with the framework",
    "hw": "a hardware target is missing, malformed, or lacks the figure a bound needs",
    "timeout": "the sandbox ran past its time limit and was killed",
    "memory": "an allocation failed under the sandbox's memory limit, or the OOM killer struck",
    "crash": "the sandbox died from a signal or exited without a result",
    "internal": "an exception that is no user error: a bug in solar-opt",
    "measure": "the timing of a bounded model failed (building, running or timing it)",
}


class SolarError(DiagnosticException):
    """A user-facing error: `file:line: what is wrong` on one line, of class `error_class`."""

    error_class: str = "translate"  # the usual kind of this class; an instance may say otherwise

    def __init__(self, message: str = "", *, error_class: str | None = None):
        super().__init__(message)
        if error_class is not None:
            if error_class not in ERROR_CLASSES:
                raise ValueError(f"unknown error class {error_class!r} (known: {', '.join(ERROR_CLASSES)})")
            self.error_class = error_class

    def flattened(self) -> SolarError:
        """The same error (class and error class) with its message on one line: what a sandboxed
        child sends back, without the traceback and chained exceptions that may not pickle."""
        out = type(self)(" ".join(str(self).split()))
        out.error_class = self.error_class
        return out


class LoopIRError(SolarError, ValueError):
    """A semantic error in a loop-IR program; `loc` is `file:line:col` where known. (Also a
    ValueError, as an affine error is: evaluators that fold constants catch both.) Defined here, the
    lowest layer, so that the analyses, which read einsum ops, raise it without the loop AST;
    `solar_compiler.loopir.ast` re-exports it."""

    def __init__(self, message: str, loc: str | None = None):
        super().__init__(f"{loc}: {message}" if loc else message)
        self.message = message
        self.loc = loc


class PassError(SolarError, PassFailedException):
    """A pass could not do its work on this module or with these options: xDSL's
    `PassFailedException`, so that any xDSL driver reports it as a failed pass."""

    error_class: str = "input"


def error_class_of(exc: BaseException) -> str:
    """The class of any exception: a `SolarError`'s own; a failed allocation is "memory"; xDSL's
    diagnostics (parse and verification errors of the IR the pipeline built) are "translate";
    anything else is a bug ("internal")."""
    if isinstance(exc, SolarError):
        return exc.error_class
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, DiagnosticException | ParseError):
        return "translate"
    return "internal"
