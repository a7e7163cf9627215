"""How every framework frontend runs its translation job: from the cache when it holds the result,
else in a sandboxed child process (`sandbox.run_in_child`: time and memory limits) whose
diagnostics come back as one line, and then into the cache."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any

from solar_compiler.errors import SolarError
from solar_compiler.frontends import FrontendOptions, Translation

# job(path, options) -> Translation: capture, translate and validate (runs in the child; raises
# a SolarError for a diagnostic). A top-level function, so that it pickles by name.
Job = Callable[[str, FrontendOptions], Translation]
# batch_job(paths, options) -> per path a Translation or its one-line diagnostic (`diagnostic`), in
# order: a frontend's translation of one program at several shapes (`translation_batch`).
BatchJob = Callable[[list[str], FrontendOptions], list[Any]]

# Model files the caller is about to translate one after the other with the same options (the
# workloads of a SOL-ExecBench problem: the same program at other shapes). The first cache miss among
# them translates every one that misses in one sandboxed child, so the child's start-up, the
# framework's import and its capture warm-up (dynamo, torch.export: ~90% of a small workload's
# cost) are paid once; each further workload costs only its own capture at its shapes, translation
# and, when it is another workload's program at other sizes, no validation of its own. With
# `sandboxed=true` (a solar-bench fork, warm already) the batch runs in this process, under the
# caller's limits. Results wait in `_BATCH_DONE` (and the cache) for their turn.
_BATCH: list[str] = []
_BATCH_DONE: dict[str, Translation | SolarError] = {}


@contextlib.contextmanager
def translation_batch(paths: list[str]) -> Iterator[None]:
    """Within the block, `translate_cached` of one of `paths` translates all of them at once."""
    _BATCH[:] = list(paths)
    try:
        yield
    finally:
        _BATCH.clear()
        _BATCH_DONE.clear()


def translate_cached(job: Job | ByName, path: str, options: FrontendOptions, key: str,
                     extra_timeout: float = 0.0, label: str = "the framework",
                     key_of: Callable[[str], str] | None = None,
                     batch_job: BatchJob | None = None) -> Translation:
    """The cached translation under `key`, else `job(path, options)` run in a sandboxed child (with
    `extra_timeout` seconds more than `options.timeout`: time the job spends waiting on others, such
    as LLM requests), or in this process when `options.sandboxed` says the caller isolates it.
    `label` names the framework in the progress line. Inside `translation_batch`, a path of the
    batch is translated with the batch's other misses by `batch_job` (`key_of`: their cache keys),
    in one child, or in this process when sandboxed."""
    from solar_compiler import progress
    from solar_compiler.frontends.cache import cache_load, cache_store
    from solar_compiler.frontends.sandbox import SandboxError, run_in_child, run_in_process
    from solar_compiler.gc_policy import user_code_gc

    if key in _BATCH_DONE:
        done = _BATCH_DONE.pop(key)
        if isinstance(done, SolarError):
            raise done
        return done
    if not options.no_cache:
        hit = cache_load(key)
        if hit is not None:
            progress.phase("translate", f"{path}: cached translation (--no-cache translates again)")
            hit.notes.append("translation cache hit")
            return hit
    if path in _BATCH and key_of is not None and batch_job is not None:
        done = _translate_batch(batch_job, path, options, key_of, extra_timeout, label)
        if done is not None:
            return done
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


def _translate_batch(job: BatchJob, path: str, options: FrontendOptions, key_of: Callable[[str], str],
                     extra_timeout: float, label: str) -> Translation | None:
    """Translate `path` and the batch's other paths that miss the cache in one sandboxed child (in
    this process when `options.sandboxed`: the caller's fork is the sandbox, and its warm imports
    are what a fresh child would lose); returns `path`'s translation (or raises its error), the
    others wait in `_BATCH_DONE`. None when the batch itself failed (a crash, the time or memory
    limit of the whole batch, an exception that is no diagnostic): the caller then translates
    `path` alone, and so does each later path, so a failure is reported against the workload that
    caused it."""
    from solar_compiler import progress
    from solar_compiler.frontends.cache import cache_load, cache_store
    from solar_compiler.frontends.sandbox import SandboxError, run_in_child, run_in_process
    from solar_compiler.gc_policy import user_code_gc

    keys = {p: key_of(p) for p in _BATCH}
    todo = [p for p in _BATCH if p == path or options.no_cache or cache_load(keys[p]) is None]
    todo = [path] + [p for p in todo if p != path]
    where = "in this process" if options.sandboxed else "in one sandboxed child"
    progress.phase("frontend", f"{path}: {label}, {len(todo)} workloads {where}")
    try:
        if options.sandboxed:  # the caller's sandbox holds the whole batch: its limits apply
            with user_code_gc():
                results = run_in_process(job, todo, options, memory_limit_gb=options.memory_gb,
                                         user_file=path)
        else:
            results = run_in_child(job, todo, options,
                                   timeout_s=(options.timeout + extra_timeout) * len(todo),
                                   memory_limit_gb=options.memory_gb, user_file=path)
    except SandboxError:
        _BATCH[:] = []
        return None
    for p, result in zip(todo, results, strict=True):
        if isinstance(result, Translation) and not options.no_cache and _ops_verify(result):
            cache_store(keys[p], result)
        _BATCH_DONE[keys[p]] = result
    mine = _BATCH_DONE.pop(keys[path])
    if isinstance(mine, SolarError):
        raise mine
    return mine


def _ops_verify(result: Translation) -> bool:
    """Whether the kernels' `loop` ops verify; recorded on `result` (`ops_verified`), so that a
    cache hit, built by the same converter into the same dialects (both in the cache key), is not
    verified again: ~16k ops of a large network take a second to verify."""
    from xdsl.utils.exceptions import VerifyException

    from solar_compiler.dialects.convert import kernels_to_module
    from solar_compiler.loopir.ast import LoopIRError

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

    try:
        return job(path, options)
    except SolarError as e:
        return diagnostic(e, path, options)


def diagnostic(e: SolarError, path: str, options: FrontendOptions) -> SolarError:
    """`e` as one line of the same class (`child_job`), or the memory limit's message."""
    from solar_compiler.frontends.sandbox import memory_limit_message

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
