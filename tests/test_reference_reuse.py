"""Validation's samples share one model (`capture.reference.ModelReuse`): the same inputs, weights,
outputs and random draws as a model built for each sample, with one build; a forward that changes
the model ends the sharing, and each sample still sees the model as built."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from solar_compiler.frontends.model_file import load_model_file  # noqa: E402
from solar_compiler.frontends.torch.capture import ModelReuse, capture, fresh_inputs, run_reference  # noqa: E402

MODEL = """
import torch
import torch.nn as nn

BUILDS = []


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        BUILDS.append(n)
        self.fc = nn.Linear(n, n)
        self.register_buffer("acc", torch.zeros(n))

    def forward(self, x):
{mutation}        return torch.nn.functional.dropout(torch.relu(self.fc(x)), 0.5, True) + self.acc


n = 64


def get_inputs():
    return [torch.randn(8, n)]


def get_init_inputs():
    return [n]
"""


def _runs(tmp_path, mutation: str):
    """(runs without sharing, runs sharing one model, builds while sharing, the ModelReuse) over
    get_inputs() and two fresh samples."""
    path = tmp_path / "m.py"
    path.write_text(MODEL.format(mutation=mutation))
    spec = load_model_file(str(path))
    prog = capture(spec)
    samples = [None, fresh_inputs(spec, 1), fresh_inputs(spec, 2)]
    alone = [run_reference(spec, "eval", inputs=s, seed=0, program=prog) for s in samples]
    builds = spec.module.BUILDS
    builds.clear()
    reuse = ModelReuse(seed=0)
    shared = [run_reference(spec, "eval", inputs=s, seed=0, program=prog, reuse=reuse) for s in samples]
    return alone, shared, len(builds), reuse


def _same(a, b) -> bool:
    return all(x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
               for x, y in zip(a, b, strict=True))


def test_samples_share_one_model_with_the_same_values(tmp_path):
    alone, shared, builds, reuse = _runs(tmp_path, "")
    assert builds == 1 and reuse.on
    for a, s in zip(alone, shared, strict=True):
        assert _same(a, s)  # inputs (get_inputs() drawn after the build), weights, outputs, dropout draws
        assert len(s[3]) == 1  # the dropout mask is a recorded draw
    assert not shared[0][1]["fc_weight"].flags.writeable  # a view of the model's weight


def test_a_forward_that_writes_the_model_ends_the_sharing(tmp_path):
    alone, shared, builds, reuse = _runs(tmp_path, "        self.acc.add_(1.0)\n")
    assert not reuse.on
    assert builds == 4  # the shared build, the first run's weights again, then one per later sample
    for a, s in zip(alone, shared, strict=True):
        assert _same(a, s)
        assert np.array_equal(s[1]["acc"], np.zeros(64, np.float32))  # as built, not as written
