"""The ATen op-template registry: ATen op name -> template, filled by the `@template` decorator of
the modules in `templates/` (the mechanism is the shared `builder/registry.py`).

`@template("aten.amax.default", kind="max=")` registers a function with `kind` bound, so one
function serves a family of ops. `lookup` is the one place a missing template is found.
"""

from __future__ import annotations

from solar_compiler.frontends.builder.registry import Template, TemplateRegistry

TEMPLATES_PACKAGE = f"{__package__}.templates"
REGISTRY = TemplateRegistry(TEMPLATES_PACKAGE)

template = REGISTRY.template
template_modules = REGISTRY.modules
templates = REGISTRY.table
lookup = REGISTRY.lookup

__all__ = ["REGISTRY", "TEMPLATES_PACKAGE", "Template", "lookup", "template", "template_modules", "templates"]
