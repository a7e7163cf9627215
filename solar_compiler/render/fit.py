"""Tables that fit a width. A cell is never wrapped by the table library: numbers, units and words
stay on one line, and names (module paths, op names, equations) are broken only after a separator
(`.`, `_`, `,`, a space). When a table is wider than the report, it gives way in a stated order:

1. columns of elision rank 2 (the least useful: source line, FLOP/B, ...) are left out, highest rank
   and rightmost first, until the table fits with its names whole;
2. names break after separators, down to their longest unbreakable piece;
3. the columns of further targets (`group`) fold into a second block (and a third ...), which
   repeats the rows' identifying (`key`) columns, so that no target's column is ever dropped;
4. columns of rank 1 are left out (FLOPs, bytes, ...);
5. a name piece longer than what is left is cut with '~' (said under the table).

Every column left out is named under the table, with the width that shows it. Rank 0 columns are
never left out. The table is rendered by rich with every column `no_wrap`, at widths computed here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Col:
    """A column: its header (lines), alignment, elision rank (0: always shown; higher: left out
    first), the target it belongs to (its columns fold together into a further block), whether it
    identifies a row (repeated in every block), and for a name column the characters after which
    it may break."""

    header: str
    right: bool = False
    rank: int = 0
    group: str | None = None
    key: bool = False
    breaks: str = ""


@dataclass
class Fit:
    """A table to be fitted: title, columns, rows of strings; `box` 'simple' (a rule under the
    header) or 'ascii' (ruled cells); `wider` says how to ask for the width that shows all."""

    title: str | None
    cols: list[Col]
    rows: list[list[str]] = field(default_factory=list)
    box: str = "simple"
    wider: str = "--width {n} shows all"  # how a user gets the width that shows every column

    def add_row(self, *cells: str) -> None:
        assert len(cells) == len(self.cols), (len(cells), len(self.cols))
        self.rows.append([str(c) for c in cells])

    def __rich_console__(self, console: Any, options: Any) -> Any:
        """rich's protocol: a table printed on a console fits the console's width."""
        yield from fitted(self, options.max_width)


# ---- names -----------------------------------------------------------------------------------------

def _pieces(text: str, breaks: str) -> list[str]:
    """`text` split after each break character (the separator stays on its piece)."""
    if not breaks:
        return [text]
    return [p for p in re.split(f"(?<=[{re.escape(breaks)}])", text) if p]


def _indent(text: str) -> tuple[str, str]:
    body = text.lstrip(" ")
    return text[: len(text) - len(body)], body


def min_name_width(text: str, breaks: str) -> int:
    """The narrowest a name cell can be without cutting a piece (continuation lines are indented
    two spaces past the first line's indentation)."""
    out = 0
    for line in text.split("\n"):
        lead, body = _indent(line)
        pieces = [p.rstrip(" ") for p in _pieces(body, breaks)] or [""]
        first, rest = len(lead) + len(pieces[0]), [len(lead) + 2 + len(p.lstrip(" ")) for p in pieces[1:]]
        out = max(out, first, *rest)
    return out


def wrap_name(text: str, room: int, breaks: str) -> tuple[str, bool]:
    """`text` in lines of at most `room` characters, broken after separators; a piece longer than
    a line is cut with '~' (then the second value is True)."""
    out: list[str] = []
    cut = False
    for line in text.split("\n"):
        if len(line) <= room:
            out.append(line)
            continue
        lead, body = _indent(line)
        cur, indent = lead, lead
        for piece in _pieces(body, breaks):
            if cur.strip() and len(cur) + len(piece.rstrip(" ")) > room:
                out.append(cur.rstrip(" "))
                indent = lead + "  "
                cur = indent + piece.lstrip(" ")
            else:
                cur += piece
        out.append(cur.rstrip(" "))
    fixed = []
    for line in out:
        if len(line) > room:
            line, cut = line[: room - 1] + "~", True
        fixed.append(line)
    return "\n".join(fixed), cut


# ---- layout ----------------------------------------------------------------------------------------

def _lines_width(text: str) -> int:
    return max((len(x) for x in text.split("\n")), default=0)


@functools.lru_cache(maxsize=64)
def overhead(box: str, n: int) -> int:
    """What rich adds to the cell widths of an `n`-column table in `box` style (padding, rules),
    measured by rendering one."""
    import io

    from rich.console import Console

    t = _rich_table(box, [Col("x")] * n, [None] * n)
    t.add_row(*["x"] * n)
    buf = io.StringIO()
    Console(file=buf, width=10_000, no_color=True, color_system=None, force_terminal=False).print(t)
    return max(len(line.rstrip()) for line in buf.getvalue().splitlines()) - n


def _rich_table(box: str, cols: Sequence[Col], widths: Sequence[int | None]) -> Any:
    from rich import box as boxes
    from rich.table import Table

    if box == "ascii":
        t = Table(box=boxes.ASCII2)
    else:
        t = Table(box=boxes.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    for c, w in zip(cols, widths, strict=True):
        t.add_column(c.header, justify="right" if c.right else "left", no_wrap=True, overflow="crop",
                     min_width=w, max_width=w)
    return t


@dataclass
class Layout:
    blocks: list[list[int]]          # column indices of each block
    widths: list[dict[int, int]]     # per block, the width of each name column
    elided: list[int]                # columns left out
    cut: bool = False                # a name piece was cut


def layout(fit: Fit, width: int) -> Layout:
    """Which columns go in which block, and how wide the names are (module docstring: the order)."""
    cols = fit.cols
    n = len(cols)
    nat = [max([_lines_width(c.header)] + [_lines_width(r[i]) for r in fit.rows]) for i, c in enumerate(cols)]
    low = [max([_lines_width(c.header)] + [min_name_width(r[i], c.breaks) for r in fit.rows])
           if c.breaks else nat[i] for i, c in enumerate(cols)]

    def need(idx: Sequence[int], at: Sequence[int]) -> int:
        return sum(at[i] for i in idx) + overhead(fit.box, len(idx))

    shown = list(range(n))
    if need(shown, nat) <= width:
        return Layout([shown], [{}], [])
    groups = list(dict.fromkeys(c.group for c in cols if c.group is not None))

    def drop(rank: int, idx: list[int], at: Sequence[int]) -> tuple[list[int], list[int]]:
        left = [i for i in idx if cols[i].rank >= rank]
        out: list[int] = []
        for i in sorted(left, key=lambda i: (-cols[i].rank, -i)):
            if need(idx, at) <= width:
                break
            idx = [j for j in idx if j != i]
            out.append(i)
        return idx, out

    shown, elided = drop(2, shown, nat)
    blocks = [shown]
    if need(shown, low) > width and len(groups) > 1:
        blocks = _fold(cols, shown, groups, lambda idx: need(idx, low) <= width)
    if need(blocks[0], low) > width:
        first, out = drop(1, blocks[0], low)
        elided += out
        blocks = [first] + [[i for i in b if i not in out] for b in blocks[1:]]
    widths: list[dict[int, int]] = []
    cut = False
    for b in blocks:
        names = [i for i in b if cols[i].breaks]
        spare = width - need(b, low)
        want = sum(nat[i] - low[i] for i in names)
        w: dict[int, int] = {}
        for k, i in enumerate(names):
            if spare >= 0:
                w[i] = min(nat[i], low[i] + (spare * (nat[i] - low[i]) // want if want else 0))
            else:  # step 5: the first name gives what is missing
                w[i] = max(_lines_width(cols[i].header), low[i] + spare) if k == 0 else low[i]
                cut = True
        widths.append(w)
    return Layout(blocks, widths, sorted(elided), cut)


def _fold(cols: Sequence[Col], shown: list[int], groups: list[str | None], fits: Any) -> list[list[int]]:
    """The shown columns in blocks: the first holds every ungrouped column and the first targets
    that fit; each further block the key columns and the next targets that fit (one at least)."""
    per = {g: [i for i in shown if cols[i].group == g] for g in groups}
    base = [i for i in shown if cols[i].group is None]
    keys = [i for i in base if cols[i].key]
    blocks: list[list[int]] = []
    cur_base, cur = base, list(base)
    for g in groups:
        trial = sorted(cur + per[g])
        if fits(trial) or cur == cur_base:
            cur = trial
            continue
        blocks.append(cur)
        cur_base, cur = keys, sorted(keys + per[g])
    blocks.append(cur)
    return blocks


# ---- rendering -------------------------------------------------------------------------------------

def needed_width(fit: Fit) -> int:
    """The width at which the table shows every column in one block, names unbroken."""
    nat = [max([_lines_width(c.header)] + [_lines_width(r[i]) for r in fit.rows])
           for i, c in enumerate(fit.cols)]
    return sum(nat) + overhead(fit.box, len(fit.cols))


def fitted(fit: Fit, width: int) -> list[Any]:
    """The renderables of `fit` at `width`: title, block(s), and a note of what was left out."""
    from rich.text import Text

    lay = layout(fit, width)
    out: list[Any] = []
    if fit.title:
        out.append(Text(fit.title))
    cut = False
    for b, idx in enumerate(lay.blocks):
        if b:
            targets = ", ".join(dict.fromkeys(str(fit.cols[i].group) for i in idx if fit.cols[i].group))
            out.append(Text(f"(continued: {targets})"))
        ws = lay.widths[b]
        t = _rich_table(fit.box, [fit.cols[i] for i in idx], [ws.get(i) for i in idx])
        for row in fit.rows:
            cells = []
            for i in idx:
                if i in ws:
                    text, c = wrap_name(row[i], ws[i], fit.cols[i].breaks)
                    cut |= c
                    cells.append(text)
                else:
                    cells.append(row[i])
            t.add_row(*cells)
        out.append(t)
    notes = []
    if lay.elided:
        names = ", ".join(dict.fromkeys(" ".join(fit.cols[i].header.split()) for i in lay.elided))
        notes.append(f"not shown at width {width}: {names}")
    if cut:
        notes.append("names cut at '~'")
    if notes:
        out.append(Text(f"({'; '.join(notes)}; {fit.wider.format(n=needed_width(fit))})"))
    return out

