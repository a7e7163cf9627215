"""SOL-ExecBench problem folders as input (`definition.json`, `reference.py`, `workload.jsonl`).

A problem folder and one of its workloads become a KernelBench-style model file (`problem.py`
writes it, `runtime.py` is what that file calls in the sandboxed child), so the torch frontend's
translation, validation, cache and reports apply unchanged. See docs/sol-execbench.md.
"""
