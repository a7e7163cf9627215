"""Text form -> kernel AST (Lark LALR grammar in `loop.lark`), with `file:line:col` diagnostics."""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import cache
from importlib import resources

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.indenter import DedentError, Indenter

from solar_compiler.loopir.affine import AffCond, AffExpr, AffineError
from solar_compiler.loopir.ast import (
    BINARY_FNS,
    DTYPES,
    UNARY_FNS,
    Assign,
    Binary,
    Bitcast,
    Cast,
    Cmp,
    Const,
    For,
    If,
    IndexValue,
    Kernel,
    LoopIRError,
    Node,
    Read,
    Select,
    SExpr,
    TensorDecl,
    Unary,
    typecheck_assign,
)

CMP_PRED = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
ARITH_FN = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod"}
BITCAST = "bitcast"  # bitcast(x, i32): x's bits read as i32 (a dtype of x's width)
CALL_BINARY = {"max": "max", "min": "min", "pow": "pow", "xor": "xor", "atan2": "atan2"}


class _LoopIndenter(Indenter):
    NL_type = "_NL"
    OPEN_PAREN_types = ["LPAR", "LSQB"]
    CLOSE_PAREN_types = ["RPAR", "RSQB"]
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8

    def handle_NL(self, token: Token) -> Iterator[Token]:
        """Lark's DedentError carries no position: re-raise it with the line and column."""
        try:
            yield from super().handle_NL(token)
        except DedentError:
            indent = token.rsplit("\n", 1)[1]
            raise _IndentError(token.end_line or 1, len(indent) + 1, self.indent_level[-1]) from None


class _IndentError(Exception):
    def __init__(self, line: int, col: int, expected: int):
        super().__init__(f"unindent to column {col} does not match any enclosing block "
                         f"(expected column {expected + 1})")
        self.line, self.col = line, col


@cache
def _lark() -> Lark:
    """The LALR tables take ~0.2 s to build, a third of a `solar-opt` run; `cache=True` keeps them
    in a per-user temp file keyed by a hash of grammar, options and Lark version (~0.02 s to load)."""
    grammar = resources.files("solar_compiler.text").joinpath("loop.lark").read_text()
    return Lark(grammar, parser="lalr", postlex=_LoopIndenter(), propagate_positions=True,
                maybe_placeholders=True, start=["start", "expr"], cache=True)


_TOKEN_NAMES = {"_NL": "end of line", "_INDENT": "indented block", "_DEDENT": "end of block",
                "$END": "end of file", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'",
                "COMMA": "','", "COLON": "':'", "NAME": "a name", "INT": "an integer",
                "NUMBER": "a number", "AUGOP": "'=' / '+=' / '*=' / 'max=' / 'min='",
                "MINUS": "'-'", "AT": "'@'", "ADD_OP": "'+' / '-'", "MUL_OP": "'*' / '/' / '//' / '%'",
                "COMP_OP": "a comparison", "POW": "'**'", "STRING": "a string", "DTYPE": "a dtype",
                "ROLE": "input / weight / output", "LOOPKIND": "range / scan", "TRUE": "True",
                "FALSE": "False", "INF": "inf", "NAN": "nan", "AND": "and", "OR": "or", "NOT": "not",
                "IF": "if", "ELSE": "else", "FOR": "for", "IN": "in", "KERNEL": "kernel", "LOCAL": "local"}


def _describe_expected(expected: set[str]) -> str:
    names = sorted({_TOKEN_NAMES.get(e, e.lower() if e.isupper() else e) for e in expected})
    return ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")


def parse_kernels(text: str, filename: str = "<input>") -> list[Kernel]:
    """Parse every kernel in `text`. Raises LoopIRError with `file:line:col` on bad input."""
    try:
        tree = _lark().parse(text if text.endswith("\n") else text + "\n", start="start")
    except UnexpectedInput as e:
        raise _syntax_error(e, text, filename) from None
    except _IndentError as e:
        raise LoopIRError(str(e), f"{filename}:{e.line}:{e.col}") from None
    kernels = [_KernelBuilder(filename).kernel(k) for k in tree.children if isinstance(k, Tree)]
    if not kernels:
        raise LoopIRError("no kernel found", f"{filename}:1:1")
    return kernels


def parse_kernel(text: str, filename: str = "<input>") -> Kernel:
    ks = parse_kernels(text, filename)
    if len(ks) != 1:
        raise LoopIRError(f"expected one kernel, found {len(ks)}", f"{filename}:1:1")
    return ks[0]


def _parse_expr_tree(text: str) -> Tree:
    try:
        return _lark().parse(text, start="expr")
    except UnexpectedInput as e:
        raise _syntax_error(e, text, "<affine>") from None
    except _IndentError as e:
        raise LoopIRError(str(e), f"<affine>:{e.line}:{e.col}") from None


def parse_affine(text: str) -> AffExpr:
    """An affine expression over free variable names, e.g. `2*p + r - 1` (tests, tools)."""
    b = _KernelBuilder("<affine>")
    b.free_vars = True
    return b.affine(_parse_expr_tree(text), "expression")


def parse_conds(text: str) -> list[AffCond]:
    """A conjunction of affine constraints, e.g. `i >= j and p + r >= 1` (tests, tools)."""
    b = _KernelBuilder("<affine>")
    b.free_vars = True
    return b.guard(_parse_expr_tree(text))


def _syntax_error(e: UnexpectedInput, text: str, filename: str) -> LoopIRError:
    line, col = getattr(e, "line", 0) or 0, getattr(e, "column", 0) or 0
    if isinstance(e, UnexpectedToken):
        tok = e.token
        what = "end of file" if tok.type == "$END" else (
            "unexpected indentation" if tok.type == "_INDENT" else
            "unexpected end of block" if tok.type == "_DEDENT" else
            "unexpected end of line" if tok.type == "_NL" else f"unexpected '{tok}'")
        if tok.type in ("_INDENT", "_DEDENT"):  # they borrow the position of the preceding newline
            line, col = tok.end_line or line, len(str(tok)) + 1
        elif tok.type == "$END" or not line:
            line, col = tok.line or line, tok.column or col
        msg = f"{what}, expected {_describe_expected(set(e.expected))}"
    elif isinstance(e, UnexpectedCharacters):
        msg = f"unexpected character {text[e.pos_in_stream]!r}" if e.pos_in_stream < len(text) \
            else "unexpected character"
        if e.allowed:
            msg += f", expected {_describe_expected(set(e.allowed))}"
    elif isinstance(e, UnexpectedEOF):
        msg = f"unexpected end of file, expected {_describe_expected(set(e.expected))}"
        line = text.count("\n") + 1
    else:
        msg = "syntax error"
    return LoopIRError(msg, f"{filename}:{max(line, 1)}:{max(col, 1)}")


class _KernelBuilder:
    """Turns one parse tree into a Kernel, resolving names against declared tensors and loop scope."""

    def __init__(self, filename: str):
        self.filename = filename
        self.tensors: dict[str, TensorDecl] = {}
        self._typing: Kernel | None = None
        self.scope: list[str] = []
        self.free_vars = False

    def loc(self, t: Tree | Token) -> str:
        if isinstance(t, Token):
            return f"{self.filename}:{t.line}:{t.column}"
        meta = t.meta
        return f"{self.filename}:{getattr(meta, 'line', 1)}:{getattr(meta, 'column', 1)}"

    def err(self, msg: str, t: Tree | Token) -> LoopIRError:
        return LoopIRError(msg, self.loc(t))

    # ---- declarations -------------------------------------------------------------------
    def kernel(self, t: Tree) -> Kernel:
        name, *rest = t.children
        params = [c for c in rest if isinstance(c, Tree) and c.data == "param"]
        locals_ = [c for c in rest if isinstance(c, Tree) and c.data == "local"]
        nodes = [c for c in rest if isinstance(c, Tree) and c.data not in ("param", "local")]
        for p in params:
            pname, dtype, dims, role = p.children
            self.declare(TensorDecl(str(pname), self.dims(dims), str(dtype), str(role or "input")), pname)
        for lt in locals_:
            lname, dtype, dims = lt.children
            self.declare(TensorDecl(str(lname), self.dims(dims), str(dtype), "local"), lname)
        body = [self.node(n) for n in nodes]
        return Kernel(str(name), list(self.tensors.values()), body)

    def dims(self, t: Tree | None) -> tuple[int, ...]:
        if t is None:
            return ()
        for x in t.children:
            self.check_i64(x, "dimension")
        return tuple(int(x) for x in t.children)

    def check_i64(self, tok: Token, what: str) -> None:
        """Shapes and steps are stored as i64 in the dialect: a larger number is an input error."""
        if int(tok) >= 2**63:
            raise self.err(f"{what} {tok} does not fit in i64", tok)

    def declare(self, decl: TensorDecl, tok: Token) -> None:
        if decl.name in self.tensors:
            raise self.err(f"tensor '{decl.name}' declared twice", tok)
        self.tensors[decl.name] = decl
        self._typing = None

    def typing_kernel(self) -> Kernel:
        """The declarations so far as a kernel to type statements against: one per declaration
        list, not one per statement (each indexes its tensors, so that was quadratic in a long
        program)."""
        if self._typing is None:
            self._typing = Kernel("", list(self.tensors.values()))
        return self._typing

    # ---- statements ---------------------------------------------------------------------
    def node(self, t: Tree) -> Node:
        if t.data == "for_node":
            iv, kind, a, b, step, *body = t.children
            if str(iv) in self.scope or str(iv) in self.tensors:
                raise self.err(f"loop variable '{iv}' shadows an enclosing name", iv)
            lb, ub = (AffExpr.lit(0), self.affine(a, "loop bound")) if b is None else \
                (self.affine(a, "loop bound"), self.affine(b, "loop bound"))
            if step is not None:
                self.check_i64(step, "loop step")
            stp = 1 if step is None else int(step)
            if stp <= 0:
                raise self.err("loop step must be positive", step)
            self.scope.append(str(iv))
            try:
                nodes = [self.node(n) for n in body]
            finally:
                self.scope.pop()
            return For(str(iv), lb, ub, stp, str(kind) == "scan", nodes)
        if t.data == "if_node":
            cond, *body = t.children
            return If(tuple(self.guard(cond)), [self.node(n) for n in body])
        if t.data == "assign":
            access, op, value, loc = t.children
            target, idx = self.target(access)
            decl = self.tensors[target]
            if decl.role in ("input", "weight"):
                raise self.err(f"cannot write to {decl.role} tensor '{target}'", access)
            a = Assign(target, idx, str(op), self.expr(value), None if loc is None else str(loc)[1:-1],
                       self.loc(t))
            try:
                return typecheck_assign(self.typing_kernel(), a)
            except LoopIRError as e:
                raise self.err(e.message, t) from None
        raise self.err(f"unexpected statement '{t.data}'", t)

    def target(self, access: Tree) -> tuple[str, tuple[AffExpr | SExpr, ...]]:
        """The written tensor and its indices: affine, or (an indirect write, a scatter) any
        integer expression, exactly as a read's indices are parsed."""
        read = self.read(access)
        return read.tensor, read.indices

    def guard(self, t: Tree) -> list[AffCond]:
        if t.data == "and_expr":
            return [c for ch in t.children for c in self.guard(ch)]
        if t.data == "comparison" and not any(n.data in ("access", "call") for n in t.iter_subtrees()):
            lhs, op, rhs = t.children
            if str(op) == "!=":
                raise self.err("'!=' is not an affine guard (write two guards or a select)", op)
            return [AffCond.compare(self.affine(lhs, "guard"), str(op), self.affine(rhs, "guard"))]
        raise self.err("a guard must be a conjunction of affine comparisons ('and' of >=, <=, <, >, ==);"
                       " value-dependent conditions are written with 'x if c else y'", t)

    def lookup(self, name: Token) -> TensorDecl:
        if str(name) not in self.tensors:
            raise self.err(f"unknown tensor '{name}'", name)
        return self.tensors[str(name)]

    # ---- affine expressions -------------------------------------------------------------
    def affine(self, t: Tree | Token, what: str) -> AffExpr:
        try:
            a = self.try_affine(t)
        except AffineError as e:
            raise self.err(f"non-affine {what}: {e}", t) from None
        if a is None:
            raise self.err(f"non-affine {what}: only loop variables, integers, +, -, "
                           "* by a constant, // and % by a positive constant are allowed", t)
        return a

    def try_affine(self, t: Tree | Token) -> AffExpr | None:
        if isinstance(t, Token):
            return None
        d = t.data
        if d == "integer":
            return AffExpr.lit(int(t.children[0]))
        if d == "name":
            n = str(t.children[0])
            if n in self.scope or self.free_vars:
                return AffExpr.var(n)
            if n in self.tensors:
                raise AffineError(f"tensor '{n}' used without indices")
            raise self.err(f"unknown name '{n}'", t)
        if d == "neg":
            a = self.try_affine(t.children[0])
            return None if a is None else -a
        if d in ("sum", "product"):
            acc = self.try_affine(t.children[0])
            for op, rhs in zip(t.children[1::2], t.children[2::2], strict=True):
                r = self.try_affine(rhs)
                if acc is None or r is None:
                    return None
                o = str(op)
                if o == "+":
                    acc = acc + r
                elif o == "-":
                    acc = acc - r
                elif o == "*":
                    acc = acc * r
                elif o in ("//", "%"):
                    if not r.is_const():
                        raise AffineError(f"'{o}' by a non-constant")
                    acc = acc // r.const if o == "//" else acc % r.const
                else:
                    return None
            return acc
        return None

    # ---- scalar expressions ---------------------------------------------------------------
    def expr(self, t: Tree | Token) -> SExpr:
        try:
            aff = self.try_affine(t)
        except AffineError:  # e.g. i * j as a value: built below from scalar ops
            aff = None
        if aff is not None and aff.vars():
            return IndexValue(aff)
        d = t.data if isinstance(t, Tree) else None
        ch = t.children if isinstance(t, Tree) else []
        if d == "integer":
            return Const(int(ch[0]))
        if d == "number":
            return Const(float(ch[0]))
        if d == "inf":
            return Const(math.inf)
        if d == "nan":
            return Const(math.nan)
        if d in ("true", "false"):
            return Const(d == "true")
        if d == "neg":
            inner = ch[0]
            if isinstance(inner, Tree) and inner.data in ("integer", "number", "inf"):
                c = self.expr(inner)
                assert isinstance(c, Const)
                return Const(-c.value)
            return Unary("neg", self.expr(inner))
        if d == "name":
            raise self.err(f"'{ch[0]}' is a tensor: read it with indices", t)
        if d == "access":
            return self.read(t)
        if d == "call":
            return self.call(t)
        if d == "not_op":
            return Unary("not", self.expr(ch[0]))
        if d in ("and_expr", "or_expr"):
            fn = "and" if d == "and_expr" else "or"
            acc = self.expr(ch[0])
            for c in ch[1:]:
                acc = Binary(fn, acc, self.expr(c))
            return acc
        if d == "comparison":
            a, op, b = ch
            return Cmp(CMP_PRED[str(op)], self.expr(a), self.expr(b))
        if d in ("sum", "product"):
            acc = self.expr(ch[0])
            for op, rhs in zip(ch[1::2], ch[2::2], strict=True):
                acc = Binary(ARITH_FN[str(op)], acc, self.expr(rhs))
            return acc
        if d == "power":
            a, _, b = ch
            return Binary("pow", self.expr(a), self.expr(b))
        if d == "ifexp":
            a, c, b = ch
            return Select(self.expr(c), self.expr(a), self.expr(b))
        raise self.err("unsupported expression", t)

    def read(self, t: Tree) -> Read:
        name, *idx = t.children
        decl = self.lookup(name)
        idx = [i for i in idx if i is not None]
        if len(idx) != len(decl.shape):
            raise self.err(f"'{name}' has rank {len(decl.shape)} but is indexed with {len(idx)} indices", t)
        out: list[AffExpr | SExpr] = []
        for i in idx:
            try:
                a = self.try_affine(i)
            except AffineError:  # e.g. i * j: a data-independent but non-affine (indirect) index
                a = None
            out.append(a if a is not None else self.expr(i))
        return Read(str(name), tuple(out))

    def call(self, t: Tree) -> SExpr:
        fn, *args = t.children
        args = [a for a in args if a is not None]
        f = str(fn)
        if f in DTYPES:
            self.arity(t, f, args, 1)
            x = self.expr(args[0])
            if isinstance(x, Const) and x.dtype is None:
                from solar_compiler.loopir.ast import coerce_literal

                try:
                    return Const(coerce_literal(x.value, f), f)
                except LoopIRError as e:
                    raise self.err(e.message, t) from None
            return Cast(x, f)
        if f == BITCAST:
            self.arity(t, f, args, 2)
            to = args[1]
            if not (isinstance(to, Tree) and to.data == "name" and str(to.children[0]) in DTYPES):
                raise self.err(f"'{BITCAST}' takes a value and a dtype: bitcast(x, i32)", to)
            return Bitcast(self.expr(args[0]), str(to.children[0]))
        if f in CALL_BINARY:
            self.arity(t, f, args, 2)
            return Binary(CALL_BINARY[f], self.expr(args[0]), self.expr(args[1]))
        if f in UNARY_FNS:
            self.arity(t, f, args, 1)
            return Unary(f, self.expr(args[0]))
        if f == "select":
            self.arity(t, f, args, 3)
            return Select(*(self.expr(a) for a in args))
        if f in self.tensors:
            raise self.err(f"'{f}' is a tensor: index it with [...], not (...)", t)
        known = sorted(set(UNARY_FNS) | set(CALL_BINARY) | set(DTYPES) | {"select", BITCAST})
        raise self.err(f"unknown scalar operation '{f}' (known: {', '.join(known)})", fn)

    def arity(self, t: Tree, f: str, args: list, n: int) -> None:
        if len(args) != n:
            raise self.err(f"'{f}' takes {n} argument{'s' if n > 1 else ''}, got {len(args)}", t)


__all__ = ["parse_kernel", "parse_kernels", "BINARY_FNS"]
