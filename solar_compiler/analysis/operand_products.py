"""The dtypes of a contraction's two operands when its body multiplies more than two data factors: how
`kE2M1[code] * where(sign, -1, 1)`, scaled per block, is seen to be an fp4 operand.

The catalogue's reordered trees fold the elementwise products that build an operand into the
contraction (`C[i, j] += s_a[i, kb] * t[a_ik] * sgn[a_ik] * s_b[j, kb] * t[b_jk] * sgn[b_jk]`). With
the block scales set aside (`value_dtypes.is_block_scale`), the remaining *data* factors are split
into the matrix unit's two operands by the free (non-reduced) dims they use: factors that share a
dim beyond those every factor uses (a batch dim) are multiplied into the same operand (`i`: A, `j`:
B). A factor that uses no such dim (a vector `w[k]`) may be multiplied into either operand; each
placement is a legal implementation, so the narrowest pair is taken. Factors that do not fall into
one or two such groups give None (the caller joins their dtypes, as before).

Each operand's dtype is the narrowest dtype holding every value of the *product* of its factors,
not the join of their dtypes. The join fails exactly when the factors' dtypes are incomparable but
their product is narrow: a sign {-1, 1} is an i8 value, an e2m1 table entry is none (0.5), their
join is bf16, yet every product is an e2m1 value (vLLM's `break_fp4_bytes` writes the sign so). In
order, the first rule that applies:

1. every factor's values are a known set (`value_sets.py`): the narrowest dtype representing each
   product, computed in the product's dtype;
2. every factor is integer-valued in a known range: the narrowest dtype holding every integer of the
   range of products;
3. the factors whose values all lie in {-1, 0, 1} (signs, masks) are dropped when the product of the
   others is of a float format: every float format (e2m1 and fp8 included) is symmetric about zero
   and holds 0, so negating or zeroing any of its values keeps it in the format. An integer format
   is not symmetric (-128 * -1 = 128 is no int8 value); rules 1 and 2 price that case exactly (an
   int8 value times a sign lies in [-128, 128]: bf16, which holds every integer up to 256);
4. else the join of the factors' dtypes (each factor's values are held; a product of two narrow
   values may need more bits than either, so this may price low, never above the factors' widest).

A factor's values are its value set where its priced dtype (`ValueDtypes.stored`) represents each of
them, else every value of that dtype (a factor whose writer's block scale was looked through carries
the codes' values, not the scaled ones).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
from xdsl.ir import SSAValue

from solar_compiler.analysis import structured as st
from solar_compiler.analysis.value_dtypes import ORDER, ValueDtypes, join, represents
from solar_compiler.analysis.value_sets import (
    dtype_range,
    dtype_values,
    holds_range,
    narrowest,
    narrowest_range,
    product_range,
    product_values,
)
from solar_compiler.dialects.einsum import NodeOp
from solar_compiler.dialects.loop import type_dtype
from solar_compiler.executor.numeric import quantize
from solar_compiler.loopir.rules import DTYPES, FLOAT_DTYPES

_SIGNS = frozenset({-1.0, 0.0, 1.0})
MAX_FREE = 3  # factors of no operand's own dim: each placement is tried (2 ** MAX_FREE at most)


def operand_pair(node: NodeOp, data: Sequence[SSAValue], values: ValueDtypes,
                 reduced: frozenset[int]) -> tuple[str, str] | None:
    """The narrowest (by width) pair of operand dtypes over the splits of `data` (module doc), or None
    when the factors do not split into two operands."""
    best: tuple[str, str] | None = None
    for a, b in operand_splits(node, data, reduced):
        got = (product_dtype(node, a, values, reduced), product_dtype(node, b, values, reduced))
        if best is None or _rank(got) < _rank(best):
            best = got
    return best


def _rank(pair: tuple[str, str]) -> tuple[float, float]:
    """Narrower formats are never priced slower: the widest operand first, then both together."""
    w = [DTYPES[d] for d in pair]
    return max(w), sum(w)


def operand_splits(node: NodeOp, data: Sequence[SSAValue], reduced: frozenset[int]) \
        -> list[tuple[list[SSAValue], list[SSAValue]]]:
    """The ways to multiply `data` into two operands (module doc); empty when they do not split."""
    memo: dict = {}
    dims = [node.value_dims(f, memo) - reduced for f in data]
    common = frozenset.intersection(*dims)
    groups: list[tuple[set[int], list[SSAValue]]] = []
    free: list[SSAValue] = []
    for f, d in zip(data, dims, strict=True):
        own = set(d - common)
        if not own:
            free.append(f)
            continue
        hit = [g for g in groups if g[0] & own]
        merged = (own.union(*(g[0] for g in hit)), [x for g in hit for x in g[1]] + [f])
        groups = [g for g in groups if not any(g is h for h in hit)] + [merged]
    if not 1 <= len(groups) <= 2 or len(free) > MAX_FREE:
        return []
    out = []
    other = list(groups[1][1]) if len(groups) == 2 else []
    for sides in itertools.product((0, 1), repeat=len(free)):
        a = list(groups[0][1]) + [f for f, s in zip(free, sides, strict=True) if s == 0]
        b = other + [f for f, s in zip(free, sides, strict=True) if s]
        if b:
            out.append((a, b))
    return out


def product_dtype(node: NodeOp, factors: Sequence[SSAValue], values: ValueDtypes,
                  reduced: frozenset[int]) -> str:
    """The narrowest dtype holding every value of the product of `factors` (module doc, rules 1-4)."""
    dts = [values.stored(node, f, reduced) for f in factors]
    if len(factors) == 1:
        return dts[0]
    sets = []
    for f, d in zip(factors, dts, strict=True):
        s = values.sets.of(node, f)
        sets.append(s if s is not None and all(exact_in(d, v) for v in s) else dtype_values(d))
    dtype = type_dtype(st.stored_value(node).type)
    found = narrowest(product_values(sets, dtype), ORDER, exact_in)
    if found is not None:
        return found
    ranges = []
    for f, d, vs in zip(factors, dts, sets, strict=True):
        r = _set_range(vs) or values.sets.integral(node, f)
        ranges.append(r if r is not None and holds_range(d, r) else dtype_range(d))
    found = narrowest_range(product_range(ranges, dtype), ORDER)
    if found is not None:
        return found
    signs = [s is not None and s <= _SIGNS for s in sets]
    rest = [f for f, s in zip(factors, signs, strict=True) if not s]
    if rest and len(rest) < len(factors):
        kept = product_dtype(node, rest, values, reduced)
        if kept in FLOAT_DTYPES:
            return kept
    return join(dts)


def _set_range(vs: frozenset[float] | None) -> tuple[float, float] | None:
    """The range of a known set of integers (None: unknown, or a value that is no finite integer)."""
    if not vs or not all(math.isfinite(v) and v == int(v) for v in vs):
        return None
    return min(vs), max(vs)


def exact_in(d: str, v: float) -> bool:
    """Whether dtype `d` represents `v`: `value_dtypes.represents`, and for the fp8 formats a finite
    value they round to itself (a product of two e2m1 values, 1.5 * 1.5 = 2.25, is an e4m3 value)."""
    if d in ("f8e4m3", "f8e5m2"):
        return math.isfinite(v) and float(quantize(np.array([v], dtype=np.float32), d)[0]) == v
    return represents(d, v)
