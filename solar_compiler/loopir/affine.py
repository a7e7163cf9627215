"""Affine expressions over named induction variables, in a canonical form.

Canonical form = sum of (coefficient x atom) + constant, where an atom is a variable name or a
floor-division / modulo of an affine expression by a positive constant. Two equal expressions
print identically, which makes the text form round-trip and keeps islpy conversion trivial.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Union

from solar_compiler.errors import SolarError

Atom = Union[str, "FloorDiv", "Mod"]


class AffineError(SolarError, ValueError):
    """An expression that is not affine where an affine one is required."""


@dataclass(frozen=True)
class FloorDiv:
    num: AffExpr
    den: int

    def __str__(self) -> str:
        return f"{_paren(self.num)} // {self.den}"


@dataclass(frozen=True)
class Mod:
    num: AffExpr
    den: int

    def __str__(self) -> str:
        return f"{_paren(self.num)} % {self.den}"


def _paren(e: AffExpr) -> str:
    s = str(e)
    return s if (e.is_var() or e.is_const()) and not s.startswith("-") else f"({s})"


def _atom_key(a: Atom) -> tuple[int, str]:
    return (0, a) if isinstance(a, str) else (1, str(a))


def _fold_div_mod(coeffs: Mapping[Atom, int], const: int) -> tuple[dict[Atom, int], int]:
    """`c * (e % n) + c * n * (e // n)` is `c * e`: a view reshaped and reshaped back (a flat row
    `i` split as `(i // 256, i % 256)`, then joined again) reads its own index. Without the fold the
    index nests once more at every such pair: OPT's 24 layers made `e` a 2^24-term string."""
    out = dict(coeffs)
    for a in [a for a in coeffs if type(a) is Mod]:
        c = out.get(a, 0)
        div = FloorDiv(a.num, a.den)
        if c and out.get(div, 0) == c * a.den:
            del out[a], out[div]
            for t, k in a.num.terms:
                out[t] = out.get(t, 0) + c * k
            const += c * a.num.const
    return out, const


def _kept_hash(self: Any) -> int:
    """A frozen dataclass's hash, computed once and kept on the instance."""
    got = self.__dict__.get("_hash")
    if got is None:
        got = self.__dict__["_hash"] = hash(tuple(getattr(self, n) for n in self.__dataclass_fields__))
    return got


def _fields_only(self: Any) -> dict[str, Any]:
    """The pickled state: the fields, not what was kept (a str hash differs between processes)."""
    return {n: getattr(self, n) for n in self.__dataclass_fields__}


@dataclass(frozen=True)
class AffExpr:
    terms: tuple[tuple[Atom, int], ...] = ()
    const: int = 0

    # An expression's hash and variables are kept on it once asked (analyses of a large network
    # ask millions of times).
    __hash__ = _kept_hash
    __getstate__ = _fields_only

    # ---- construction -------------------------------------------------------------------
    @staticmethod
    def var(name: str) -> AffExpr:
        return AffExpr(((name, 1),), 0)

    @staticmethod
    def lit(value: int) -> AffExpr:
        return AffExpr((), int(value))

    @staticmethod
    def of(x: AffExpr | int | str) -> AffExpr:
        if isinstance(x, AffExpr):
            return x
        if isinstance(x, str):
            return AffExpr.var(x)
        if isinstance(x, bool) or not isinstance(x, int):
            raise AffineError(f"not an affine expression: {x!r}")
        return AffExpr.lit(x)

    @staticmethod
    def _make(coeffs: Mapping[Atom, int], const: int) -> AffExpr:
        if any(type(a) is Mod for a in coeffs):
            coeffs, const = _fold_div_mod(coeffs, const)
        items = [(a, c) for a, c in coeffs.items() if c != 0]
        if len(items) > 1:
            if all(type(a) is str for a, _ in items):
                items.sort()  # distinct names: the order of `_atom_key`
            else:
                items.sort(key=lambda t: _atom_key(t[0]))
        return AffExpr(tuple(items), const)

    # ---- arithmetic -----------------------------------------------------------------------
    # The fast paths below (a constant operand, scaling) skip the canonical re-sort: adding a
    # constant or scaling by a non-zero one keeps the terms' order. Analyses of a large network build
    # hundreds of thousands of expressions (every domain bound is one), so this is measurable.
    def __add__(self, other: AffExpr | int) -> AffExpr:
        if type(other) is int:
            return AffExpr(self.terms, self.const + other) if other else self
        o = AffExpr.of(other)
        if not o.terms:
            return AffExpr(self.terms, self.const + o.const)
        if not self.terms:
            return AffExpr(o.terms, self.const + o.const)
        acc: dict[Atom, int] = dict(self.terms)
        for a, c in o.terms:
            acc[a] = acc.get(a, 0) + c
        return AffExpr._make(acc, self.const + o.const)

    __radd__ = __add__

    def __neg__(self) -> AffExpr:
        return AffExpr(tuple((a, -c) for a, c in self.terms), -self.const)

    def __sub__(self, other: AffExpr | int) -> AffExpr:
        if type(other) is int:
            return AffExpr(self.terms, self.const - other) if other else self
        return self + (-AffExpr.of(other))

    def __rsub__(self, other: AffExpr | int) -> AffExpr:
        return AffExpr.of(other) - self

    def __mul__(self, other: AffExpr | int) -> AffExpr:
        if type(other) is int:
            if other == 1:
                return self
            return AffExpr(tuple((a, c * other) for a, c in self.terms), self.const * other) if other \
                else AffExpr((), 0)
        o = AffExpr.of(other)
        if o.is_const():
            k = o.const
            return AffExpr._make({a: c * k for a, c in self.terms}, self.const * k)
        if self.is_const():
            return o * self.const
        raise AffineError(f"product of two non-constant expressions: ({self}) * ({o})")

    __rmul__ = __mul__

    def __floordiv__(self, den: int) -> AffExpr:
        den = _positive(den, "//")
        if den == 1:
            return self
        if all(c % den == 0 for _, c in self.terms) and self.const % den == 0:
            return AffExpr._make({a: c // den for a, c in self.terms}, self.const // den)
        if self.is_const():
            return AffExpr.lit(self.const // den)
        return AffExpr(((FloorDiv(self, den), 1),), 0)

    def __mod__(self, den: int) -> AffExpr:
        den = _positive(den, "%")
        if self.is_const():
            return AffExpr.lit(self.const % den)
        if den == 1:
            return AffExpr.lit(0)
        return AffExpr(((Mod(self, den), 1),), 0)

    # ---- queries --------------------------------------------------------------------------
    def is_const(self) -> bool:
        return not self.terms

    def is_var(self) -> bool:
        return len(self.terms) == 1 and isinstance(self.terms[0][0], str) and self.terms[0][1] == 1 \
            and self.const == 0

    def vars(self) -> frozenset[str]:
        got = self.__dict__.get("_vars")
        if got is None:
            got = frozenset(a if isinstance(a, str) else v for a, _ in self.terms
                            for v in ((a,) if isinstance(a, str) else a.num.vars()))
            self.__dict__["_vars"] = got
        return got

    def coeff(self, name: str) -> int:
        """Coefficient of a plain variable (0 if absent or only under // or %)."""
        return dict(self.terms).get(name, 0)

    def is_quasi(self) -> bool:
        """True when the expression uses // or % (quasi-affine)."""
        return any(not isinstance(a, str) for a, _ in self.terms)

    # ---- transformation -------------------------------------------------------------------
    def substitute(self, env: Mapping[str, AffExpr | int]) -> AffExpr:
        acc: dict[Atom, int] = {}
        const = self.const
        for a, c in self.terms:
            if isinstance(a, str):
                r = env[a] if a in env else a
                if isinstance(r, str):
                    acc[r] = acc.get(r, 0) + c
                    continue
                r = AffExpr.of(r)
            elif isinstance(a, FloorDiv):
                r = a.num.substitute(env) // a.den
            else:
                r = a.num.substitute(env) % a.den
            for ra, rc in r.terms:
                acc[ra] = acc.get(ra, 0) + rc * c
            const += r.const * c
        return AffExpr._make(acc, const)

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """Value under `env` (ints or broadcastable numpy arrays); floor semantics as in Python."""
        total: Any = self.const
        for a, c in self.terms:
            if isinstance(a, str):
                v = env[a]
            elif isinstance(a, FloorDiv):
                v = a.num.evaluate(env) // a.den
            else:
                v = a.num.evaluate(env) % a.den
            total = total + (v if c == 1 else c * v)
        return total

    def bounds(self, ranges: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
        """Interval [lo, hi] of the expression given inclusive variable ranges."""
        lo = hi = self.const
        for a, c in self.terms:
            if isinstance(a, str):
                alo, ahi = ranges[a]
            elif isinstance(a, FloorDiv):
                nlo, nhi = a.num.bounds(ranges)
                alo, ahi = nlo // a.den, nhi // a.den
            else:
                alo, ahi = 0, a.den - 1
            lo += min(c * alo, c * ahi)
            hi += max(c * alo, c * ahi)
        return lo, hi

    def to_isl(self) -> str:
        out = []
        for a, c in self.terms:
            if isinstance(a, str):
                s = a
            elif isinstance(a, FloorDiv):
                s = f"floor(({a.num.to_isl()})/{a.den})"
            else:
                s = f"(({a.num.to_isl()}) mod {a.den})"
            sign = "+" if c > 0 else "-"
            out.append(f"{sign} {abs(c)}*{s}" if abs(c) != 1 else f"{sign} {s}")
        out.append(f"{'+' if self.const >= 0 else '-'} {abs(self.const)}")
        text = " ".join(out)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]

    def __str__(self) -> str:
        out = ""
        for a, c in self.terms:
            s = str(a)
            if not isinstance(a, str) and c != 1 and c != -1:
                s = f"({s})"
            mag = abs(c)
            term = s if mag == 1 else f"{mag}*{s}"
            if not out and c < 0 and mag == 1 and not isinstance(a, str):
                out = f"-({term})"  # `-(i // 3)`: a bare `-i // 3` would read back as `(-i) // 3`
            elif not out:
                out = term if c > 0 else f"-{term}"
            else:
                out += f" + {term}" if c > 0 else f" - {term}"
        if not out:
            return str(self.const)
        if self.const > 0:
            out += f" + {self.const}"
        elif self.const < 0:
            out += f" - {-self.const}"
        return out

    def __repr__(self) -> str:
        return f"AffExpr({self})"


def solo_vars(indices: Iterable[object]) -> frozenset[str]:
    """The variables that are an index on their own (`v`, `-v`, `2*v + 1`: one variable, no // or %).
    An access whose every loop variable is one is injective, each variable read back from its index,
    whatever the other indices are: no need to count its image."""
    return frozenset(next(iter(e.vars())) for e in indices
                     if isinstance(e, AffExpr) and not e.is_quasi() and len(e.vars()) == 1)


def _positive(den: object, op: str) -> int:
    if isinstance(den, AffExpr):
        if not den.is_const():
            raise AffineError(f"'{op}' by a non-constant expression ({den})")
        den = den.const
    if not isinstance(den, int) or den <= 0:
        raise AffineError(f"'{op}' needs a positive constant divisor, got {den}")
    return den


CMP_OPS = (">=", "==")


@dataclass(frozen=True)
class AffCond:
    """`expr >= 0` or `expr == 0`: the two canonical affine constraint kinds."""

    expr: AffExpr
    op: str = ">="

    __hash__ = _kept_hash
    __getstate__ = _fields_only

    @staticmethod
    def compare(lhs: AffExpr, op: str, rhs: AffExpr) -> AffCond:
        if op == ">=":
            return AffCond(lhs - rhs, ">=")
        if op == ">":
            return AffCond(lhs - rhs - 1, ">=")
        if op == "<=":
            return AffCond(rhs - lhs, ">=")
        if op == "<":
            return AffCond(rhs - lhs - 1, ">=")
        if op == "==":
            return AffCond(lhs - rhs, "==")
        raise AffineError(f"'{op}' is not an affine constraint (use >=, >, <=, <, ==)")

    def __str__(self) -> str:
        # Move negative terms to the right so that `i - j >= 0` reads `i >= j`.
        pos = AffExpr._make({a: c for a, c in self.expr.terms if c > 0}, max(self.expr.const, 0))
        neg = AffExpr._make({a: -c for a, c in self.expr.terms if c < 0}, max(-self.expr.const, 0))
        return f"{pos} {self.op} {neg}"

    def to_isl(self) -> str:
        return f"{self.expr.to_isl()} {'>=' if self.op == '>=' else '='} 0"

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        v = self.expr.evaluate(env)
        return v >= 0 if self.op == ">=" else v == 0

    def vars(self) -> frozenset[str]:
        return self.expr.vars()

    def substitute(self, env: Mapping[str, AffExpr | int]) -> AffCond:
        return AffCond(self.expr.substitute(env), self.op)
