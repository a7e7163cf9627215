"""Analyses of loop-IR programs and einsum graphs: grouping into nodes, polyhedral counts, exact
costs, needed-work narrowing, traffic lower bounds, tiling, unfused kernels and roofline bounds.

This layer reads the IR (`solar_compiler.dialects`, `solar_compiler.loopir`) and never imports a
pass, the driver or the report (see docs/architecture.md)."""
