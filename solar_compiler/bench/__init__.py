"""`solar-bench`: the whole pipeline over whole suites (KernelBench levels, model zoos) in one run.

Top layer, beside the driver: it may import the driver, frontends and reports; nothing imports it.
Per model it runs the `solar-opt` pipeline (`driver.run_pipeline`) in a process forked from a warm
worker (torch imported once), with time and memory limits, and reads only the JSON report
(`solar-report/1`) and the CLI flags. Modules:

- `suite`: model files and groups; `errors`: error classes; `store`: per-model records (resume);
- `forked`: one job in a forked sandbox; `jobs`: the bounds and timing jobs that run there;
- `timing`: KernelBench-style timing (CPU and CUDA) and timing files;
- `worker`: the warm worker process and its client; `pool`: local process pool; `ray_backend`: Ray;
- `results`: rows, headroom, violations, group statistics; `summary`: stdout tables;
  `html`: report.html and per-model pages; `cli`: the `solar-bench` command.
"""
