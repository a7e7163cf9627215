"""The jaxpr-primitive template registry: `jax.<primitive>` -> template, filled by the `@template`
decorator of the modules in `templates/` (the shared mechanism of `builder/registry.py`)."""

from __future__ import annotations

from solar_compiler.frontends.builder.registry import Template, TemplateRegistry

TEMPLATES_PACKAGE = f"{__package__}.templates"
REGISTRY = TemplateRegistry(TEMPLATES_PACKAGE)

template = REGISTRY.template
lookup = REGISTRY.lookup

__all__ = ["REGISTRY", "TEMPLATES_PACKAGE", "Template", "lookup", "template"]
