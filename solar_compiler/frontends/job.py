"""How every framework frontend runs its translation job: from the cache when it holds the result,
else in a sandboxed child process (`sandbox.run_in_child`: time and memory limits) whose
diagnostics come back as one line, and then into the cache."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from solar_compiler.errors import SolarError
from solar_compiler.frontends import FrontendOptions, Translation

# job(path, options) -> Translation: capture, translate and validate (runs in the child; raises
# a SolarError for a diagnostic). A top-level function, so that it pickles by name.
Job = Callable[[str, FrontendOptions], Translation]


def translate_cached(job: Job | ByName, path: str, options: FrontendOptions, key: str,
                     extra_timeout: float = 0.0, label: str = "the framework") -> Translation:
    """The cached translation under `key`, else `job(path, options)` run in a sandboxed child (with
    `extra_timeout` seconds more than `options.timeout`: time the job spends waiting on others, such
    as LLM requests), or in this process when `options.sandboxed` says the caller isolates it.
    `label` names the framework in the progress line."""
    from solar_compiler import progress
    from solar_compiler.frontends.cache import cache_load, cache_store
    from solar_compiler.frontends.sandbox import SandboxError, run_in_child, run_in_process
    from solar_compiler.gc_policy import user_code_gc

    if not options.no_cache:
        hit = cache_load(key)
        if hit is not None:
            progress.phase("translate", f"{path}: cached translation (--no-cache translates again)")
            hit.notes.append("translation cache hit")
            return hit
    progress.phase("frontend", f"{path}: {label}, in a sandboxed child (starting {label})")
    try:
        if options.sandboxed:  # already in a sandbox of the caller's: same job, same messages
            with user_code_gc():  # the model file runs here, under CPython's default collector
                result = run_in_process(child_job, _resolved(job), path, options,
                                        memory_limit_gb=options.memory_gb, user_file=path)
        else:
            result = run_in_child(child_job, job, path, options, timeout_s=options.timeout + extra_timeout,
                                  memory_limit_gb=options.memory_gb, user_file=path)
    except SandboxError as e:
        raise SolarError(str(e), error_class=e.error_class) from None
    if isinstance(result, SolarError):  # its class says what failed (CaptureFailed, LLM exit 3)
        raise result
    if not options.no_cache and _ops_verify(result):  # an entry that would not verify is not kept
        cache_store(key, result)
    return result


def _ops_verify(result: Translation) -> bool:
    """Whether the kernels' `loop` ops verify; recorded on `result` (`ops_verified`), so that a
    cache hit, built by the same converter into the same dialects (both in the cache key), is not
    verified again: ~16k ops of a large network take a second to verify."""
    from xdsl.utils.exceptions import VerifyException

    from solar_compiler.loopir.ast import LoopIRError
    from solar_compiler.loopir.convert import kernels_to_module

    try:
        kernels_to_module(result.kernels).verify()
    except (VerifyException, LoopIRError, SolarError):
        return False  # the translate pass verifies again and reports it
    result.ops_verified = True
    return True


def child_job(job: Job, path: str, options: FrontendOptions) -> Translation | SolarError:
    """`job`, with its diagnostics (SolarError: LoopIRError, ModelFileError, CaptureError, ...)
    returned on one line, of the same class and error class, so that the parent shows them
    unchanged. A diagnostic caused by a failed allocation (a capture reports it as "forward raised
    RuntimeError: ... can't allocate memory") is the sandbox's memory limit at work, and says so."""
    from solar_compiler.frontends.sandbox import memory_limit_message

    try:
        return job(path, options)
    except SolarError as e:
        mem = memory_limit_message(e, path, options.memory_gb)
        return e.flattened() if mem is None else SolarError(mem, error_class="memory")


class ByName:
    """A job named by module and attribute, so that the parent need not import its module: unpickled
    in the child, it is the function itself, imported while the child loads its work, before the
    memory limit is set (a framework's import and start-up are not counted, as for the job's own
    module)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return _resolve, (self.module, self.name)


def _resolve(module: str, name: str) -> Job:
    return getattr(importlib.import_module(module), name)


def _resolved(job: Job | ByName) -> Job:
    return _resolve(job.module, job.name) if isinstance(job, ByName) else job
