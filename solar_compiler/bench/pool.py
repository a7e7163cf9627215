"""The local backend: `--workers N` warm worker processes fed one job at a time.

`Pool.run(jobs, on_done, max_parallel)` hands each idle worker the next job and calls `on_done(job,
outcome)` in the main process as results arrive (the caller stores them at once). A worker that
dies (it should not: models run in its forks) fails its job as a crash and is replaced. On any
exception, `Cancelled` included, every fork's process group and every worker is killed before it
propagates; `close()` ends idle workers.
"""

from __future__ import annotations

import selectors
from collections import deque
from collections.abc import Callable
from typing import Any

from solar_compiler.errors import SolarError

from .forked import Outcome
from .worker import WorkerProcess

OnDone = Callable[[dict[str, Any], Outcome], None]


class Pool:
    def __init__(self, workers: int, init: dict[str, Any], log: str):
        self.n = max(1, workers)
        self.init = init
        self.log = log
        self.workers: list[WorkerProcess] = []
        self.sel = selectors.DefaultSelector()
        self.infos = []

    infos: list[dict[str, Any]]  # each worker's start-up figures (import, warm-up seconds; RSS)

    def _spawn(self) -> WorkerProcess:
        w = WorkerProcess(self.init, self.log)
        self.workers.append(w)
        self.sel.register(w.fileno(), selectors.EVENT_READ, w)
        return w

    def _drop(self, w: WorkerProcess) -> None:
        self.sel.unregister(w.fileno())
        self.workers.remove(w)
        w.kill()

    def _handle(self, w: WorkerProcess, on_done: OnDone) -> None:
        msg = w.recv()
        if msg is None:  # the worker itself died
            job = w.job
            self._drop(w)
            if not w.ready:
                raise SolarError(f"a worker died while starting (log: {self.log})")
            if job is not None:
                on_done(job, Outcome(False, error_class="crash", error="the worker process died"))
            self._spawn()
        elif msg[0] == "ready":
            w.ready, w.info = True, msg[1]
            self.infos.append(msg[1])
        elif msg[0] == "failed":
            raise SolarError(f"worker start-up failed: {msg[1]}")
        elif msg[0] == "started":
            w.fork_pid = msg[2]
        elif msg[0] == "done":
            job, w.job, w.fork_pid = w.job, None, None
            assert job is not None and job["id"] == msg[1]
            on_done(job, msg[2])

    def run(self, jobs: list[dict[str, Any]], on_done: OnDone, max_parallel: int | None = None) -> None:
        queue = deque(jobs)
        limit = min(self.n, max_parallel or self.n)
        try:
            while len(self.workers) < min(limit, len(queue)):
                self._spawn()
            while queue or any(w.job is not None for w in self.workers):
                for w in list(self.workers):
                    if queue and w.ready and w.job is None and self._busy() < limit:
                        w.job = queue.popleft()
                        w.send(w.job)
                for key, _ in self.sel.select(timeout=1.0):
                    self._handle(key.data, on_done)
        except BaseException:
            self.kill()
            raise

    def _busy(self) -> int:
        return sum(w.job is not None for w in self.workers)

    def kill(self) -> None:
        for w in list(self.workers):
            self._drop(w)

    def close(self) -> None:
        for w in list(self.workers):
            self.sel.unregister(w.fileno())
            self.workers.remove(w)
            w.close()
