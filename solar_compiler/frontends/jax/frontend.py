"""The JAX / Flax NNX frontend: capture (`jax.make_jaxpr` on abstract values), translate, validate, in
a sandboxed child process (`job.py`, which is the only module here that imports jax), cached. The
sandbox, the model-file loader, the validation rules and the cache are the ones every frontend shares
(`frontends/job.py`, `sandbox.py`, `model_file.py`, `validation.py`, `cache.py`); see
docs/jax-frontend.md."""

from __future__ import annotations

from pathlib import Path

from solar_compiler.frontends import FrontendOptions, Translation, cache
from solar_compiler.frontends.job import ByName, translate_cached

FRONTEND_VERSION = "1"


class JaxFrontend:
    name = "jax"
    extensions = (".py",)

    def translate(self, path: str, options: FrontendOptions) -> Translation:
        # the job is imported in the sandboxed child only (with jax): the parent never imports jax
        return translate_cached(ByName(f"{__package__}.job", "translate_job"), path, options,
                                cache_key(path, options), label="jax")


def cache_key(path: str, options: FrontendOptions) -> str:
    from importlib.metadata import PackageNotFoundError, version

    versions = []
    for pkg in ("jax", "jaxlib", "flax", "optax"):  # optax: the update of a --step train step
        try:
            versions.append(f"{pkg} {version(pkg)}")
        except PackageNotFoundError:
            versions.append(f"{pkg} absent")
    return cache.cache_key(path, options, ", ".join(versions),
                           cache.fingerprint(FRONTEND_VERSION, Path(__file__).parent))
