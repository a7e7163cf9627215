"""Capture a JAX model file as a flat list of jaxpr primitives (`CapturedProgram`, method "jaxpr").

The model is traced with `jax.make_jaxpr` on abstract values (`jax.ShapeDtypeStruct`): the inputs
are `jax.eval_shape(get_inputs)`, and a Flax NNX `Model` is built with `nnx.eval_shape` and split
into its graph and its state, whose leaves (parameters, batch statistics) become `weight` tensors.
No full-size array is allocated. Then:

* call-like primitives (`jit`/`pjit`, `closed_call`, `custom_jvp_call`, `custom_vjp_call`, `remat`)
  are inlined: a call is not a kernel, its body's primitives are;
* the bodies of `scan`, `while` and `cond` become `SubProgram`s of their node (kwargs["bodies"]),
  translated where the loop runs;
* closed-over constants become weights with their values (`program.constants`);
* equations whose results nothing uses are dropped (`dce_jaxpr`), and so are unused inputs;
* every node gets `loc` (the innermost frame of the traceback in the model file) and
  `module_path` (the name stack: the NNX module path, then the user's own `jax.named_scope`s) and,
  in a training step (`jax.value_and_grad` ...), its `phase` from the name stack's transforms
  (`phases.py`).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from jax._src import core as jcore
from jax._src import source_info_util as siu
from jax._src.interpreters import partial_eval as pe

from solar_compiler.frontends.captured_program import (
    AtenNode,
    CapturedProgram,
    CaptureError,
    Namer,
    TensorMeta,
    TensorRef,
)
from solar_compiler.frontends.model_file import (
    JAX_FORMAT,
    ModelFileError,
    ModelSpec,
    exception_summary,
    load_model_file,
    user_line,
)

from .phases import phase_of, tag_phases
from .program import CONTROL_FLOW, INLINED, Operand, SubProgram

MODULE_SCOPE = "nnx:"  # prefix of the name scope the capture pushes around each NNX module call

_DTYPES = {"float64": "f64", "float32": "f32", "bfloat16": "bf16", "float16": "f16",
           "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2", "int64": "i64", "int32": "i32", "int8": "i8",
           "bool": "bool"}


def loop_dtype(dtype: Any) -> str:
    """The loop-IR name of a numpy/JAX dtype (its own name when the loop IR has none: an error
    naming it when a tensor of it is declared)."""
    name = str(np.dtype(dtype)) if not str(dtype).startswith("key<") else str(dtype)
    return _DTYPES.get(name, name)


# ---- the model --------------------------------------------------------------------------------------------
@dataclass
class JaxModel:
    """A loaded JAX model file as one function of flat arrays: `fn(params, *inputs)`, where `params`
    are the leaves of an NNX model's state (empty for a `def model` file)."""

    spec: ModelSpec
    fn: Callable[..., Any]
    params: list[Any]            # abstract leaves (ShapeDtypeStruct)
    param_names: list[str]       # "layers.0.kernel"
    inputs: list[Any]            # abstract inputs
    input_names: list[str]
    mode: str = "eval"
    trainable: list[bool] = field(default_factory=list)  # per param: an nnx.Param (what a step trains)
    # the values of the params after the model's own (a training step's optimizer state), built for real
    more_params: Callable[[], list[np.ndarray]] | None = None

    @property
    def who(self) -> str:
        """How messages name the traced function."""
        return "model" if self.spec.entry == "model" else "Model.__call__"


def load_model(spec: ModelSpec | str, mode: str = "eval") -> JaxModel:
    """The model of a JAX file, abstract: nothing is allocated at full size."""
    spec = spec if isinstance(spec, ModelSpec) else load_model_file(spec, JAX_FORMAT)
    inputs = jax.eval_shape(spec.sample_inputs)
    flat_inputs, names = _flatten_inputs(spec, inputs)
    if spec.entry == "model":
        fn = spec.Model
        return JaxModel(spec, lambda params, *xs: fn(*xs), [], [], flat_inputs, names, mode)
    from flax import nnx

    abstract = nnx.eval_shape(lambda: construct(spec))
    graphdef, state = nnx.split(abstract)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(state)
    _, param_state, _ = nnx.split(abstract, nnx.Param, ...)
    param_paths = {p for p, _ in jax.tree_util.tree_flatten_with_path(param_state)[0]}

    def fn(params, *xs):
        model = nnx.merge(graphdef, jax.tree_util.tree_unflatten(treedef, params))
        model.eval() if mode == "eval" else model.train()
        with _module_scopes(model):
            return model(*xs)

    return JaxModel(spec, fn, [v for _, v in leaves], [_path_name(p) for p, _ in leaves], flat_inputs,
                    names, mode, [p in param_paths for p, _ in leaves])


def construct(spec: ModelSpec):
    """`Model(*get_init_inputs())`, with `rngs=nnx.Rngs(0)` when `__init__` takes `rngs` and the init
    inputs hold no `Rngs`; errors become one-line ModelFileErrors."""
    from flax import nnx

    init = spec.init_inputs()
    kwargs = {}
    try:
        takes_rngs = "rngs" in inspect.signature(spec.Model.__init__).parameters
    except (TypeError, ValueError):
        takes_rngs = False
    if takes_rngs and not any(isinstance(a, nnx.Rngs) for a in init):
        kwargs["rngs"] = nnx.Rngs(0)
    try:
        return spec.Model(*init, **kwargs)
    except ModelFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - reported as one line
        line = user_line(exc, spec.abspath) or spec._line_of("Model")
        raise ModelFileError(f"{spec.path}:{line}: Model.__init__ raised {exception_summary(exc)}") from exc


def real_params(model: JaxModel) -> list[np.ndarray]:
    """The parameter values of the model, built for real (validation): the same leaves as `params`."""
    if not model.params:
        return []
    from flax import nnx

    state = jax.jit(lambda: nnx.state(construct(model.spec)))()  # one compile for every initialiser
    more = model.more_params() if model.more_params is not None else []
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(state)] + more


def _flatten_inputs(spec: ModelSpec, inputs: list) -> tuple[list[Any], list[str]]:
    """The leaves of `get_inputs()` and their names (the traced function's parameter names)."""
    target = spec.Model if spec.entry == "model" else spec.Model.__call__
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        params = []
    if spec.entry != "model":
        params = params[1:]
    pos = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    namer = Namer()
    leaves, names = [], []
    for i, entry in enumerate(inputs):
        base = pos[i] if i < len(pos) else f"{var}_{i - len(pos)}" if var else f"input_{i}"
        sub = jax.tree_util.tree_leaves(entry)
        for k, leaf in enumerate(sub):
            leaves.append(leaf)
            names.append(namer.fresh(base if len(sub) == 1 else f"{base}_{k}"))
    return leaves, names


def _path_name(path: tuple) -> str:
    parts = []
    for k in path:
        key = getattr(k, "key", getattr(k, "idx", getattr(k, "name", None)))
        if key != "value" or not isinstance(k, jax.tree_util.GetAttrKey):
            parts.append(str(key))
    return ".".join(parts)


@contextlib.contextmanager
def _module_scopes(model) -> Iterator[None]:
    """While tracing, every NNX module call runs in a name scope `nnx:<its path>`, so that each
    equation's name stack says which module it belongs to (NNX pushes no scope of its own)."""
    from flax import nnx

    paths = {id(m): ".".join(str(k) for k in p) for p, m in nnx.iter_modules(model)}
    originals: dict[type, Any] = {}
    for cls in {type(m) for _, m in nnx.iter_modules(model)}:
        call = cls.__dict__.get("__call__")
        if call is None:
            continue
        originals[cls] = call

        def scoped(self, *args, __call=call, **kwargs):
            path = paths.get(id(self))
            if not path:
                return __call(self, *args, **kwargs)
            with jax.named_scope(MODULE_SCOPE + path):
                return __call(self, *args, **kwargs)

        cls.__call__ = scoped
    try:
        yield
    finally:
        for cls, call in originals.items():
            cls.__call__ = call


# ---- tracing --------------------------------------------------------------------------------------------
def capture(model: JaxModel) -> CapturedProgram:
    """The model traced on abstract values and flattened (see the module docstring)."""
    spec = model.spec
    try:
        closed = jax.make_jaxpr(model.fn)(model.params, *model.inputs)
    except (ModelFileError, CaptureError):
        raise
    except Exception as exc:  # noqa: BLE001 - reported as one line naming the user's line
        line = user_line(exc, spec.abspath)
        where = f"{spec.path}:{line}" if line else spec.path
        raise CaptureError(f"{where}: {model.who} raised {exception_summary(exc)}") from exc
    jaxpr = closed.jaxpr
    jaxpr, used = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars), instantiate=True)
    fl = _Flattener(spec)
    prog = CapturedProgram(spec.path, model.mode, "jaxpr",
                           size_constants={**spec.size_constants, **spec.repeat_counts})
    env: dict[Any, Operand] = {}
    n_params = len(model.params)
    for k, (var, is_used) in enumerate(zip(jaxpr.invars, used, strict=True)):
        if not is_used:
            continue
        if k < n_params:
            meta = fl.meta(model.param_names[k], var.aval)
            prog.weights.append(meta)
            prog.weight_sources[meta.name] = f"param:{k}"
        else:
            meta = fl.meta(model.input_names[k - n_params], var.aval)
            prog.inputs.append(meta)
            prog.weight_sources[meta.name] = f"input:{k - n_params}"
        env[var] = TensorRef(meta.name)
    for var, value in zip(jaxpr.constvars, closed.consts, strict=True):
        env[var] = fl.constant(var, value)
    prog.nodes = fl.run(jaxpr, env, siu.NameStack())
    tag_phases(prog.nodes)
    for v in jaxpr.outvars:
        out = fl.operand(v, env)
        if not isinstance(out, TensorRef):
            raise CaptureError(f"{spec.path}: {model.who} returns the constant {out!r}; "
                               "no kernel computes it")
        prog.outputs.append(out.name)
    prog.weights += fl.weights
    prog.weight_sources.update(fl.sources)
    prog.constants.update(fl.constants)
    return prog


@dataclass
class _Flattener:
    spec: ModelSpec
    namer: Namer = field(default_factory=Namer)
    weights: list[TensorMeta] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    constants: dict[str, np.ndarray] = field(default_factory=dict)

    def meta(self, hint: str, aval: Any) -> TensorMeta:
        return TensorMeta(self.namer.fresh(hint), tuple(int(s) for s in aval.shape), loop_dtype(aval.dtype))

    def constant(self, var: Any, value: Any) -> Operand:
        """A closed-over constant: a scalar as a literal, an array as a weight holding its value."""
        arr = np.asarray(value)
        if arr.ndim == 0 and arr.dtype != object:
            return arr.item()
        meta = self.meta("const", var.aval)
        self.weights.append(meta)
        self.sources[meta.name] = f"const:{meta.name}"
        self.constants[meta.name] = arr
        return TensorRef(meta.name)

    def operand(self, v: Any, env: dict[Any, Operand]) -> Operand:
        if isinstance(v, jcore.Literal):
            val = np.asarray(v.val)
            return val.item() if val.ndim == 0 else self.constant(v, val)
        return env[v]

    def loc(self, eqn: Any) -> str | None:
        """`file:line` of the innermost frame of the equation's traceback in the model file."""
        tb = eqn.source_info.traceback
        if tb is None:
            return None
        codes, lastis = tb.raw_frames()
        target = self.spec.abspath
        for code, lasti in zip(codes, lastis, strict=True):
            if code.co_filename == target:
                return f"{self.spec.path}:{siu.raw_frame_to_frame(code, lasti).start_line}"
        return None

    def run(self, jaxpr: Any, env: dict[Any, Operand], prefix: Any, outer_loc: str | None = None
            ) -> list[AtenNode]:
        """The nodes of `jaxpr` (its variables bound in `env`), call-like primitives inlined; an
        equation traced outside the user's stack (a custom_jvp rule) takes its caller's line."""
        nodes: list[AtenNode] = []
        for eqn in jaxpr.eqns:
            prim = eqn.primitive.name
            stack = prefix + eqn.source_info.name_stack
            args = [self.operand(v, env) for v in eqn.invars]
            if prim in INLINED and INLINED[prim] in eqn.params:
                body = eqn.params[INLINED[prim]]
                inner, consts = (body.jaxpr, body.consts) if hasattr(body, "consts") else (body, [])
                sub: dict[Any, Operand] = dict(zip(inner.invars, args, strict=True))
                sub.update({c: self.constant(c, v) for c, v in zip(inner.constvars, consts, strict=True)})
                nodes += self.run(inner, sub, stack, self.loc(eqn) or outer_loc)
                for ov, iv in zip(eqn.outvars, inner.outvars, strict=True):
                    env[ov] = self.operand(iv, sub)
                continue
            kwargs = dict(eqn.params)
            if prim in CONTROL_FLOW:
                kwargs["bodies"] = {p: self.body(eqn.params[p], stack, self.loc(eqn) or outer_loc)
                                    for p in CONTROL_FLOW[prim]}
            outs = tuple(None if isinstance(v, jcore.DropVar) else self.meta(prim, v.aval)
                         for v in eqn.outvars)
            for v, meta in zip(eqn.outvars, outs, strict=True):
                if meta is not None:
                    env[v] = TensorRef(meta.name)
            loc = self.loc(eqn) or outer_loc
            transforms = (s.name for s in stack.stack if isinstance(s, siu.Transform))
            nodes.append(AtenNode(f"jax.{prim}", tuple(args), kwargs, outs, loc, module_path(stack),
                                  phase=phase_of(transforms)))
        return nodes

    def body(self, closed: Any, stack: Any, loc: str | None) -> SubProgram | list[SubProgram]:
        """A control-flow body (a ClosedJaxpr, or a tuple of them for `cond`) as SubProgram(s)."""
        if isinstance(closed, tuple | list):
            return [self.body(c, stack, loc) for c in closed]  # type: ignore[misc]
        inner, consts = (closed.jaxpr, closed.consts) if hasattr(closed, "consts") else (closed, [])
        invars = [self.meta("arg", v.aval) for v in inner.invars]
        env: dict[Any, Operand] = {v: TensorRef(m.name) for v, m in zip(inner.invars, invars, strict=True)}
        env.update({c: self.constant(c, v) for c, v in zip(inner.constvars, consts, strict=True)})
        nodes = self.run(inner, env, stack, loc)
        return SubProgram(invars, nodes, [self.operand(v, env) for v in inner.outvars])


def module_path(stack: Any) -> str | None:
    """The module an equation belongs to, from its name stack: the innermost NNX module's path, then
    the user's own name scopes inside it (or all of them, outside any module), joined by '.'."""
    names = [s.name for s in stack.stack if isinstance(s, siu.Scope)]
    marks = [i for i, n in enumerate(names) if n.startswith(MODULE_SCOPE)]
    if marks:
        names = [names[marks[-1]][len(MODULE_SCOPE):], *names[marks[-1] + 1:]]
    path = ".".join(n for n in names if n)
    return path or None
