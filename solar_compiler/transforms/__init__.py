"""Transforms: the code that changes IR, as xDSL `RewritePattern`s applied by `PatternRewriteWalker`.

An analysis (`solar_compiler/analysis/`) decides and returns plain records (which points of a
statement are needed, which association order of a contraction tree is cheapest); a pattern here
applies such a record to the IR. The layer sits between analysis and the passes (tests/test_layers.py):
a transform may import analysis, never the reverse, so the analyses stay read-only on the IR.
"""
