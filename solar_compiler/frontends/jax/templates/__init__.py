"""jaxpr-primitive templates, one module per primitive family; each registers its templates with
`@template("jax.<primitive>")` (see `registry.py`, which finds every module of this package). A
template module imports the shared builder (`solar_compiler.frontends.builder`), the captured
program types, the registry and the translator, never another template module."""
