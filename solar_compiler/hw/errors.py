"""The hardware package's user-facing error (a ``SolarError``: one line, no traceback)."""

from solar_compiler.errors import SolarError


class HwTargetError(SolarError):
    """A target cannot be found, is malformed, or lacks the rate a query needs (one-line message)."""

    error_class = "hw"
