"""A table of op templates, filled by the `@template` decorator of the modules of one templates
package, which are found by listing that package (no hand-written list). Each framework frontend
has one (`frontends/torch/registry.py`, `frontends/jax/registry.py`).

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

from .values import Val

Template = Callable[..., Val | tuple[Val | None, ...]]


class TemplateRegistry:
    """The templates of the modules of package `package` (imported on first use)."""

    def __init__(self, package: str) -> None:
        self.package = package
        self._table: dict[str, Template] = {}
        self._loaded = False

    def template(self, *ops: str, **params: object) -> Callable[[Template], Template]:
        """Register the decorated function as the template of each op in `ops`, with `params` bound
        as keyword arguments; returns it unchanged, so decorators stack. Two templates for one op
        are an error."""
        if not ops:
            raise ValueError("@template needs at least one op name")

        def register(fn: Template) -> Template:
            bound = functools.partial(fn, **params) if params else fn
            for op in ops:
                if op in self._table:
                    raise RuntimeError(f"template for {op} defined twice ({fn.__module__}.{fn.__qualname__})")
                self._table[op] = bound
            return fn

        return register

    def modules(self) -> list[str]:
        """The full names of the modules of the templates package, sorted."""
        spec = importlib.util.find_spec(self.package)
        assert spec is not None and spec.submodule_search_locations is not None
        found = pkgutil.iter_modules(spec.submodule_search_locations)
        return sorted(f"{self.package}.{m.name}" for m in found)

    def table(self) -> dict[str, Template]:
        """Every template (each template module imported on first use)."""
        if not self._loaded:
            for name in self.modules():
                importlib.import_module(name)
            self._loaded = True
        return self._table

    def registered(self) -> list[str]:
        """The ops registered so far, without importing any template module."""
        return sorted(self._table)

    def lookup(self, op: str) -> Template | None:
        """The template of op `op`, or None when there is none."""
        return self.table().get(op)
