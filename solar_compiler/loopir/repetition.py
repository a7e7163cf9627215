"""Repeated blocks of a kernel (a network's identical layers), and whether a kernel with fewer
repetitions is the same program.

A network of 32 identical layers translates into a kernel whose top-level loop nests repeat with a
period of one layer. A size-reduced instance with 3 layers is then the same program with fewer
repetitions, and validating it validates the translation of every layer of the full one, provided
the check below holds. Module paths are not enough to find the layers: some per-layer work runs
outside the layer's module (a decode step's KV-cache copies, one per layer, before the first layer),
so the repeats are found on the statements themselves.

`same_program_repeated(full, reduced)` proves, on the two kernels alone:

1. **Structure.** Each kernel's top-level nodes are compressed into runs of repeats, greedily
   (at each position the tandem repeat covering the most nodes), recursively inside a repeat's body
   (a denoising loop of steps, each step a run of layers). A node's signature is its loop nest,
   guards, index expressions and ops with tensors replaced by slots (dtype, role and rank): sizes,
   coefficients and literal values may differ, as for `same_program`. The two trees must be equal
   but for the repeat counts (each at least 2: a single copy is no repeat, so a reduced instance
   keeps 2 or more).
2. **Data flow.** Every tensor a node reads or writes is named by where its value comes from: the
   last node before it that wrote the tensor, or for an input or weight its home (the innermost
   repeat copy that holds all its readers) and where below it it is first read. A name inside the
   same repeat copy, or one before it, is relative (this copy, the previous one); any other is a
   path with the copy indices spelled out. Every copy of a repeat must name its sources alike: the
   same node of the previous copy, the same shared tensor, or a copy index that moves with the copy
   (`2c + 1`: layer c reads the second of the two KV-cache copies a decode step makes per layer
   before the first one). The first and the last copy may name other sources (the first layer reads
   the embedding; a last layer cut short by dead-code removal); those ends are part of the form
   and compared between the kernels like the rest. A repeat whose copies do not name their sources
   alike is tried with 2, 3, ... copies as one (two alike output nests per layer, its K and its V,
   each reading its layer), and else left as single nodes (a cos and a sin of one angle).
3. **Interface.** The inputs and outputs, in declaration order, come from corresponding places
   (those of the copies between the first and the last aside: their number differs, and their
   nodes are checked alike by 2).

`repeats(kernel)` is the compression alone.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from solar_compiler.loopir.ast import (
    Assign,
    Kernel,
    Node,
    Read,
    SExpr,
)
from solar_compiler.loopir.same_program import node_form

_MOD = (1 << 61) - 1
_BASE = 1_000_003


@dataclass
class Repeat:
    """`count` copies of `body` (items), starting at top-level node `start`, each `period` nodes."""

    start: int
    period: int
    count: int
    body: list[Item] = field(default_factory=list)


Item = int | Repeat  # a top-level node's index, or a repeat


# ---- signatures ---------------------------------------------------------------------------------
class _Slots:
    """The tensors a node names, in order of first mention, replaced by their slot numbers."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.names: list[str] = []
        self._slot: dict[str, int] = {}

    def __call__(self, name: str) -> int:
        slot = self._slot.get(name)
        if slot is None:
            slot = self._slot[name] = len(self.names)
            self.names.append(name)
        return slot

    def decls(self) -> tuple[tuple[str, str, int], ...]:
        out = []
        for n in self.names:
            t = self.kernel.tensor(n)
            out.append((t.dtype, t.role, len(t.shape)))
        return tuple(out)


def signature(kernel: Kernel, n: Node) -> tuple:
    """The node without its sizes (`node_form`), its tensors replaced by slots, with their dtype,
    role and rank."""
    slots = _Slots(kernel)
    return node_form(n, slots), slots.decls()


def _accesses(n: Node) -> list[tuple[str, bool]]:
    """(tensor, is_write) in the order `node_form` names them: per statement its reads, then its
    target."""
    out: list[tuple[str, bool]] = []

    def expr(e: SExpr) -> None:
        for x in e.walk():
            if isinstance(x, Read):
                out.append((x.tensor, False))

    def go(m: Node) -> None:
        if isinstance(m, Assign):
            expr(m.value)
            for i in m.indices:
                if isinstance(i, SExpr):
                    expr(i)
            out.append((m.target, True))
        else:
            for c in m.body:
                go(c)

    go(n)
    return out


# ---- compression --------------------------------------------------------------------------------
def _compress(ids: list[int], lo: int, hi: int, prefix: list[int], powers: list[int],
              where: dict[int, list[int]]) -> list[Item]:
    def window(a: int, p: int) -> int:
        return (prefix[a + p] - prefix[a] * powers[p]) % _MOD

    out: list[Item] = []
    i = lo
    while i < hi:
        best: tuple[int, int, int] | None = None  # (-coverage, period, count)
        occ = where[ids[i]]
        limit = i + (hi - i) // 2
        for j in occ[bisect_right(occ, i):bisect_right(occ, limit)]:
            p = j - i
            h = window(i, p)
            if window(j, p) != h:
                continue
            k = 2
            while i + (k + 1) * p <= hi and window(i + k * p, p) == h:
                k += 1
            cand = (-p * k, p, k)
            if best is None or cand < best:
                best = cand
        if best is None:
            out.append(i)
            i += 1
            continue
        _, p, k = best
        first = ids[i:i + p]
        k = next((c for c in range(1, k) if ids[i + c * p:i + (c + 1) * p] != first), k)  # no hash luck
        if k < 2:
            out.append(i)
            i += 1
            continue
        out.append(Repeat(i, p, k, _compress(ids, i, i + p, prefix, powers, where)))
        i += p * k
    return out


def repeats(kernel: Kernel) -> list[Item]:
    """The kernel's top-level nodes as a tree of repeats (see the module docstring)."""
    return _tree([signature(kernel, n) for n in kernel.body])


def _tree(sigs: list[tuple]) -> list[Item]:
    numbering: dict[tuple, int] = {}
    ids = [numbering.setdefault(s, len(numbering)) for s in sigs]
    prefix, powers = [0], [1]
    for x in ids:
        prefix.append((prefix[-1] * _BASE + x + 1) % _MOD)
        powers.append(powers[-1] * _BASE % _MOD)
    where: dict[int, list[int]] = {}
    for pos, x in enumerate(ids):
        where.setdefault(x, []).append(pos)
    return _compress(ids, 0, len(ids), prefix, powers, where)


# ---- paths and data flow ------------------------------------------------------------------------
Path = tuple[tuple[int, int], ...]  # per level: (item index, copy index; -1 for a plain node)


def _paths(items: list[Item], base: Path, out: dict[int, Path], counts: dict[Path, int]) -> None:
    for pos, it in enumerate(items):
        if isinstance(it, int):
            out[it] = base + ((pos, -1),)
            continue
        counts[base + ((pos, 0),)] = it.count  # keyed by the repeat's first copy
        for c in range(it.count):
            body = _shifted(it.body, c * it.period)
            _paths(body, base + ((pos, c),), out, counts)


def _shifted(items: list[Item], by: int) -> list[Item]:
    if by == 0:
        return items
    return [i + by if isinstance(i, int) else Repeat(i.start + by, i.period, i.count, _shifted(i.body, by))
            for i in items]


def _count_of(counts: dict[Path, int], path: Path, level: int) -> int:
    return counts[path[:level] + ((path[level][0], 0),)]


def _absolute(path: Path, counts: dict[Path, int], start: int) -> tuple:
    """`path[start:]` with each copy index a leaf `("#", copy, count)` (None for a plain node)."""
    out = []
    for lvl in range(start, len(path)):
        item, copy = path[lvl]
        out.append((item, ("#", copy, _count_of(counts, path, lvl)) if copy >= 0 else None))
    return tuple(out)


def _code(reader: Path, source: Path | None, counts: dict[Path, int], extra: object) -> tuple:
    """How a node at `reader` names a value made at `source`: relative to the copy of a repeat both
    are in (`rel`: level, copy offset, the rest of the path), else the path below the levels they
    share (`abs`). None: nowhere (a local read before any write). An input's source is its home, with
    `extra` its order there."""
    if source is None:
        return ("none", extra)
    lvl = 0
    while lvl < min(len(reader), len(source)) and reader[lvl] == source[lvl]:
        lvl += 1
    if lvl < len(source) and lvl < len(reader) and reader[lvl][0] == source[lvl][0] and reader[lvl][1] >= 0:
        return ("rel", lvl, source[lvl][1] - reader[lvl][1], _absolute(source, counts, lvl + 1), extra)
    return ("abs", lvl, _absolute(source, counts, lvl), extra)


@dataclass
class _Flow:
    tree: list[Item]
    paths: dict[int, Path]
    counts: dict[Path, int]
    codes: list[tuple]          # per top-level node: the code of each slot
    interface: list[tuple]      # inputs and outputs in declaration order: (role, place)


def _common(paths: list[Path]) -> Path:
    first = paths[0]
    n = len(first)
    for p in paths[1:]:
        n = min(n, len(p))
        n = next((i for i in range(n) if p[i] != first[i]), n)
    return first[:n]


def _flow(kernel: Kernel, tree: list[Item]) -> _Flow:
    paths: dict[int, Path] = {}
    counts: dict[Path, int] = {}
    _paths(tree, (), paths, counts)
    readers: dict[str, list[Path]] = {}
    first: dict[str, tuple[int, int]] = {}  # an input's first reader and its slot there
    for pos, n in enumerate(kernel.body):
        names = list(dict.fromkeys(name for name, _ in _accesses(n)))
        for name, write in _accesses(n):
            if kernel.tensor(name).role in ("input", "weight") and not write:
                readers.setdefault(name, []).append(paths[pos])
                first.setdefault(name, (pos, names.index(name)))
    # an input is named by its home (the innermost copy that holds all its readers) and where below it
    # it is first read: each layer's weights, read again by every denoising step, move with the layer
    homes: dict[str, tuple[Path, tuple]] = {}
    for name, ps in readers.items():
        home = _common(ps)
        pos, slot = first[name]
        homes[name] = (home, ("in", _absolute(paths[pos], counts, len(home)), slot))
    last_writer: dict[str, int] = {}
    codes: list[tuple] = []
    for pos, n in enumerate(kernel.body):
        here = paths[pos]
        node_codes = []
        for name in dict.fromkeys(name for name, _ in _accesses(n)):
            if name in homes and name not in last_writer:
                home, where = homes[name]
                node_codes.append(_code(here, home, counts, where))
            else:
                src = last_writer.get(name)
                node_codes.append(_code(here, paths[src] if src is not None else None, counts, None))
        for name, write in _accesses(n):
            if write:
                last_writer[name] = pos
        codes.append(tuple(node_codes))
    interface = []
    for t in kernel.tensors:
        if t.role == "input":
            place = ("in", _absolute(homes[t.name][0], counts, 0), homes[t.name][1]) \
                if t.name in homes else ("unread", t.dtype, len(t.shape))
            interface.append(("input", place))
        elif t.role == "output":
            w = last_writer.get(t.name)
            interface.append(("output", _absolute(paths[w], counts, 0) if w is not None else ("unwritten",)))
    return _Flow(tree, paths, counts, codes, interface)


# ---- the check ----------------------------------------------------------------------------------
class _Differs(Exception):
    pass


_CODES = ("rel", "abs", "none")


def _fit(vals: list, cs: list[int], level: int):
    """One form for the values the copies `cs` of a repeat at `level` give a slot. A copy index that
    moves with the copy (`2c + 1`: the second of two per-layer tensors a block before the layers
    wrote) becomes `("#@", level, stride, base)`. Where a source is not alike in every copy, the first
    copy, the last, or both may read another one (the first layer reads the embedding where the
    others read the layer before; the last layer's KV rows come from a shorter last layer): the
    form is then `("ends", form of the others, first or None, last or None)`, and the ends are
    compared with the other kernel's like every other form. Raises `_Differs` otherwise."""
    v0 = vals[0]
    if all(v == v0 for v in vals[1:]):
        return v0
    alike = all(isinstance(v, (tuple, list)) and type(v) is type(v0) and len(v) == len(v0) for v in vals)
    if alike and isinstance(v0, tuple) and v0 and v0[0] == "#":
        xs = [v[1] for v in vals]
        step = (xs[1] - xs[0]) // (cs[1] - cs[0])
        base = xs[0] - step * cs[0]
        if any(x != base + step * c for x, c in zip(xs, cs, strict=True)) or \
                any(v[2] != v0[2] for v in vals):
            raise _Differs
        return ("#@", level, step, ("#", base, v0[2]))
    if isinstance(v0, tuple) and v0 and v0[0] in _CODES:  # one source: alike, or alike but its ends
        n = len(vals)
        for lo, hi in ((0, n), (1, n), (0, n - 1), (1, n - 1)):
            if hi - lo < 1 or (lo, hi) != (0, n) and cs[0] != 0:
                continue
            try:
                rest = _fit_parts(vals[lo:hi], cs[lo:hi], level)
            except _Differs:
                continue
            return rest if (lo, hi) == (0, n) else \
                ("ends", rest, vals[0] if lo else None, vals[-1] if hi < n else None)
        raise _Differs
    if not alike:
        raise _Differs
    return _fit_parts(vals, cs, level)


def _fit_parts(vals: list, cs: list[int], level: int):
    v0 = vals[0]
    if all(v == v0 for v in vals[1:]):
        return v0
    if not all(isinstance(v, (tuple, list)) and type(v) is type(v0) and len(v) == len(v0) for v in vals):
        raise _Differs
    fitted = [_fit([v[i] for v in vals], cs, level) for i in range(len(v0))]
    return fitted if isinstance(v0, list) else tuple(fitted)


def _form(flow: _Flow, sigs: list[tuple], items: list[Item], level: int = 0) -> list:
    """The kernel as one comparable value: per node its signature and sources, per repeat the one
    form all its copies share (their count left out)."""
    out: list = []
    for it in items:
        if isinstance(it, int):
            out.append(("node", sigs[it], flow.codes[it]))
            continue
        for m in (1, *(m for m in range(2, it.count // 2 + 1) if it.count % m == 0)):
            # m copies as one: per layer a K and a V output, alike nests, each reading its layer
            body = [x for c in range(m) for x in _shifted(it.body, c * it.period)]
            period, count = it.period * m, it.count // m
            copies = [_form(flow, sigs, _shifted(body, c * period), level + 1) for c in range(count)]
            try:
                out.append(("repeat", _fit(copies, list(range(count)), level)))
                break
            except _Differs:
                continue
        else:  # alike nests that compute different things (a cos and a sin): no repeat
            out += [x for c in range(it.count) for x in _form(flow, sigs, _shifted(it.body, c * it.period),
                                                                level + 1)]
    return out


def _closed(v):
    """Copy indices that no repeat moved: "last" for a repeat's last copy, else the index."""
    if isinstance(v, tuple):
        if len(v) == 3 and v[0] == "#":
            return "last" if v[1] == v[2] - 1 else v[1]
        return tuple(_closed(x) for x in v)
    if isinstance(v, list):
        return [_closed(x) for x in v]
    return v


def _first_difference(a, b, where: str = "top level") -> str:
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{len(a)} vs {len(b)} blocks at {where}"
        for pos, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                if x[0] == y[0] == "repeat" and isinstance(x[1], list) and isinstance(y[1], list):
                    return _first_difference(x[1], y[1], f"item {pos} of {where}")
                what = "structure" if x[0] != y[0] or x[1] != y[1] else "sources"
                return f"item {pos} of {where} differs ({what})"
    return f"{where} differs"


def same_program_repeated(full: Kernel, reduced: Kernel) -> str | None:
    """None when `reduced` is `full` with only sizes changed and fewer copies of its repeated blocks
    (see the module docstring); otherwise the first difference, in words."""
    forms = []
    for k, what in ((full, "the full-size kernel"), (reduced, "the reduced kernel")):
        sigs = [signature(k, n) for n in k.body]
        flow = _flow(k, _tree(sigs))
        try:
            forms.append((_closed(_form(flow, sigs, flow.tree)), _interface(flow)))
        except _Differs as e:
            return f"{what}: {e}"
    (fa, ia), (fb, ib) = forms
    if fa != fb:
        return _first_difference(fa, fb)
    if ia != ib:
        return "the inputs and outputs differ"
    return None


def _interface(flow: _Flow) -> list[tuple]:
    """The inputs and outputs, without those made in copies between the first and the last of a
    repeat (the kernels have different numbers of them; `_form` checks those copies alike)."""
    keep = []
    for role, place in _closed(flow.interface):
        path = place[1] if place[0] == "in" else place if role == "output" and place != ("unwritten",) \
            else ()
        if all(copy is None or copy in (0, "last") for _, copy in path):
            keep.append((role, place))
    return keep
