"""Suite-wide test setup: the hypothesis profiles, and the one translation cache the session shares."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs in a fresh clone: an example database there is written and never read again. The example
# counts stay those each test's @settings names (fewer would test less).
settings.register_profile("ci", database=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "default")

# pytest-xdist's workers set COLUMNS=80 and LINES=24 (for their own terminal writer); the reports the
# tests read would then be fitted to 80 columns, not to a pipe's 120 as in a serial run. A test that
# wants a width sets it itself (monkeypatch, --width).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


@pytest.fixture(scope="session")
def translation_cache(tmp_path_factory) -> Path:
    """The XDG cache directory whose translations every test module shares (`translated.py`)."""
    from translated import session_cache_dir

    d = session_cache_dir(tmp_path_factory.getbasetemp())
    d.mkdir(exist_ok=True)
    return d
