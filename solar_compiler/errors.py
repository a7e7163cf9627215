"""The one exception type users see: a one-line diagnostic, printed without a traceback."""


class SolarError(Exception):
    """A user-facing error: `file:line: what is wrong` on one line."""
