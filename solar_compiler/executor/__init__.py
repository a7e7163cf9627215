"""Fast loop-IR executor: runs a kernel on real data, statement by statement, vectorised with NumPy.

It validates frontends: a translated kernel must reproduce the framework's own outputs.
"""

from solar_compiler.executor.compare import Comparison, compare
from solar_compiler.executor.run import execute

__all__ = ["execute", "compare", "Comparison"]
