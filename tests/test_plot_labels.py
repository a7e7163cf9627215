"""Plot labels name their own point (issue 25: a label sat beside the SDPA dot while naming
o_proj): every label has a leader line that ends at the centre of its own point, starts at the
label's box, and no label box overlaps another label or covers another point's centre."""

from __future__ import annotations

import math

from test_report import _crowded_report

from solar_compiler.render.fmt import fmt_pct
from solar_compiler.render.kernels import kernel_groups


def test_each_label_has_a_leader_line_to_its_own_point():
    from matplotlib.text import Text

    from solar_compiler.plot import roofline_figure

    r = _crowded_report()
    fig = roofline_figure(r)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    labels = [t for t in ax.texts if getattr(t, "arrow_patch", None) is not None]
    assert len(labels) >= 8
    groups: dict[tuple, list] = {}  # point -> the kernels there (kernels of one intensity coincide)
    for g in kernel_groups(r):
        groups.setdefault((g.intensity, g.fig.flops / g.fig.bound_s["H100_SXM"]), []).append(g)
    boxes = [Text.get_window_extent(t, renderer) for t in labels]
    points = [ax.transData.transform(xy) for xy in groups]
    kernels = 0
    for t, box in zip(labels, boxes, strict=True):
        start, end = t.arrow_patch.get_path().vertices[[0, -1]]
        px, py = ax.transData.transform(t.xy)
        assert math.hypot(end[0] - px, end[1] - py) < 0.5, t.get_text()  # ends at its point
        near = max(box.x0 - start[0], start[0] - box.x1, box.y0 - start[1], start[1] - box.y1)
        assert near < 4, (t.get_text(), start, box)  # starts at its label (matplotlib pads the text)
        there = groups.get(tuple(t.xy), [])
        if there:  # a kernel's label names a kernel at that point
            kernels += 1
            text = t.get_text()
            assert any(text.startswith(f"{g.module} mul") and f"({fmt_pct(g.fig.share['H100_SXM'])})" in text
                       for g in there), (text, [g.module for g in there])
        for q in points:  # no label covers another point's centre
            if (abs(q[0] - px), abs(q[1] - py)) != (0, 0):
                assert not box.contains(*q), t.get_text()
    assert kernels >= 6
    assert not [(a.get_text(), b.get_text()) for i, (a, ba) in enumerate(zip(labels, boxes, strict=True))
                for b, bb in zip(labels[i + 1:], boxes[i + 1:], strict=True) if ba.overlaps(bb)]
