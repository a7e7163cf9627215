"""Four models a GPU performance engineer wrote (examples/models/: a GPT-2 stack in bf16 built with
`self.to`, a ViT block, a UNet down block in fp16, a DLRM with `nn.EmbeddingBag`) translate, validate
and print a default report (`--roofline=all --hw H100_SXM,B200`) that fits 120 columns and names
every top-level module; the reports are snapshots (tests/snapshots/<model>.txt; the validation's
error figure is masked, as it depends on the machine's arithmetic). After a deliberate change of
the report, regenerate them with `SOLAR_UPDATE_SNAPSHOTS=1 pytest tests/test_user_models.py`."""

from __future__ import annotations

import multiprocessing
import os
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("torch")

from solar_compiler.driver import main  # noqa: E402
from solar_compiler.errors import SolarError  # noqa: E402
from solar_compiler.frontends import FrontendOptions, cache  # noqa: E402
from solar_compiler.frontends.torch import frontend as fe  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
MODELS = ("gpt2_block_bf16", "vit_block", "unet_down_fp16", "dlrm_embeddingbag")
ARGV = ("--translate", "--frontend", "torch", "--roofline=all", "--hw", "H100_SXM,B200", "--width", "120")


def _translate(name: str) -> tuple[str, str | None]:
    path = f"examples/models/{name}.py"
    opts = FrontendOptions(llm=None)
    try:
        cache.cache_store(fe.cache_key(path, opts), fe.translate_job(path, opts))
        return name, None
    except SolarError as e:
        return name, str(e)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, tuple[int, str, str | None]]:
    """Per model: (exit status, stdout, translation error) of solar-opt on a translation cache filled
    first (two processes)."""
    old_env, old_cwd = os.environ.get("XDG_CACHE_HOME"), os.getcwd()
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg"))
    os.chdir(ROOT)
    try:
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            errors = dict(pool.map(_translate, MODELS))
        out = {}
        for name in MODELS:
            stdout = tmp_path_factory.mktemp("out") / f"{name}.txt"
            rc = main([f"examples/models/{name}.py", *ARGV, "-o", str(stdout)])
            out[name] = (rc, stdout.read_text() if rc == 0 else "", errors[name])
        yield out
    finally:
        os.chdir(old_cwd)
        if old_env is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old_env


def _report(reports, name: str) -> str:
    rc, text, error = reports[name]
    assert error is None and rc == 0, error
    return text


def _top_level_modules(name: str) -> list[str]:
    from solar_compiler.frontends.model_file import load_model_file

    model = load_model_file(str(ROOT / f"examples/models/{name}.py")).build_model()
    return [n for n, _ in model.named_children()]


def _masked(text: str) -> str:
    """The report with the validation's error figure (the machine's arithmetic) masked; the method,
    samples and elements compared stay (they follow from the budget estimates, not the machine)."""
    return re.sub(r"(max\s+relative\s+error\s+)\d\.\d\de[-+]\d+", r"\1<masked>", text)


@pytest.mark.parametrize("name", MODELS)
def test_report_fits_120_columns_and_names_every_top_level_module(reports, name):
    text = _report(reports, name)
    # the method and the output elements compared per sample (main's validation record)
    assert re.search(r"^validation: validated \(torch-\S+ frontend, (full|sampled|reduced)\): \d+ "
                     r"sample\(s\) of [\d,]+ output\s+elements", text, re.M), text.splitlines()[:4]
    assert max(len(line) for line in text.splitlines()) <= 120
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("modules (depth"))
    tree = [line.split()[0] for line in lines[at + 4:] if line.startswith("  ")]
    for child in _top_level_modules(name):
        assert any(re.match(rf"{re.escape(child)}(\.|$)", row) for row in tree), (child, tree)
    assert "statements (einsum nodes)" not in text  # the per-statement table only with --ops


@pytest.mark.parametrize("name", MODELS)
def test_report_snapshot(reports, name):
    text = _masked(_report(reports, name))
    snap = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("SOLAR_UPDATE_SNAPSHOTS"):
        snap.write_text(text)
    assert text == snap.read_text()


def test_gpt2_blocks_are_shown_once_with_their_count_and_rates_say_bf16(reports):
    text = _report(reports, "gpt2_block_bf16")
    assert re.search(r"^  h\.0-1 \(x2\) ", text, re.M)
    assert "  rates:    matrix bf16 989.4 TFLOP/s dense (BF16 tensor)" in text
    assert "h.0-1.mlp.c_fc" in text and "h.0-1.attn" in text
