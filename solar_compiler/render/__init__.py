"""Text rendering of `solar-report/1` data for people: the header that says what was used, the module
tree, the kernels sorted by bound, measured times, the glossary (`--explain`). Only rendering: every
figure comes from the report dict (`analysis/summary.py`); `solar_compiler/report.py` assembles the
pieces into the `report` output target."""
