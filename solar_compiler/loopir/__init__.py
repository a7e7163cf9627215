"""The Affine Loop IR in plain Python: affine expressions, the kernel AST, type inference.

The xDSL dialect (`solar_compiler.dialects.loop`) is the IR that passes exchange; this package is
the convenient in-memory view of it that frontends build and analyses read (see `convert.py`).
"""
