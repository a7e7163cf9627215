"""The op-template registry: ATen op name -> template, filled by the `@template` decorator of the
modules in `templates/`, which are found by listing that package (no hand-written list).

A template is `fn(tr: Translator, node: AtenNode, **params) -> Val | tuple[Val | None, ...]`: it
emits the statements of the op (or none, for a view) and returns one value per node output.
`@template("aten.amax.default", kind="max=")` registers `fn` with `kind` bound, so one function
serves a family of ops. `lookup` is the one place a missing template is found.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
from collections.abc import Callable

from solar_compiler.frontends.builder.values import Val

Template = Callable[..., Val | tuple[Val | None, ...]]
TEMPLATES_PACKAGE = f"{__package__}.templates"

_TABLE: dict[str, Template] = {}
_loaded = False


def template(*ops: str, **params: object) -> Callable[[Template], Template]:
    """Register the decorated function as the template of each ATen op in `ops` (e.g.
    ``"aten.mm.default"``), with `params` bound as keyword arguments; returns it unchanged, so
    decorators stack. Two templates for one op are an error."""
    if not ops:
        raise ValueError("@template needs at least one ATen op name")

    def register(fn: Template) -> Template:
        bound = functools.partial(fn, **params) if params else fn
        for op in ops:
            if op in _TABLE:
                raise RuntimeError(f"template for {op} defined twice ({fn.__module__}.{fn.__qualname__})")
            _TABLE[op] = bound
        return fn

    return register


def template_modules() -> list[str]:
    """The full names of the modules of the templates package, sorted."""
    spec = importlib.util.find_spec(TEMPLATES_PACKAGE)
    assert spec is not None and spec.submodule_search_locations is not None
    found = pkgutil.iter_modules(spec.submodule_search_locations)
    return sorted(f"{TEMPLATES_PACKAGE}.{m.name}" for m in found)


def templates() -> dict[str, Template]:
    """The table of every template (each template module imported on first use)."""
    global _loaded
    if not _loaded:
        for name in template_modules():
            importlib.import_module(name)
        _loaded = True
    return _TABLE


def lookup(op: str) -> Template | None:
    """The template of ATen op `op`, or None when there is none."""
    return templates().get(op)
