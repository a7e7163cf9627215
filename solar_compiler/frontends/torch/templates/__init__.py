"""Op templates, one module per op family; each registers its templates with `@template` (see
`registry.py`, which finds every module of this package). A template module imports the builder
(`solar_compiler.frontends.builder`, shared with the other frameworks) and the registry, never
another template module."""
