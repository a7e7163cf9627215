"""Reading a SOL-ExecBench problem folder and writing the model file of one of its workloads.

The folder holds `definition.json` (axes, inputs, outputs, the reference source, an optional
custom-input entry point), `workload.jsonl` (one workload a line) and usually `reference.py` (the
same source; it wins when present, so tracebacks point at a real file). Everything is checked here,
before any code runs, and every problem is a one-line `SolarError` naming the file (and the line of a
workload). Axis expressions are parsed, never evaluated as Python (`eval_axis_expr`).

The generated model file embeds the definition, the workload and the reference source, so the
translation cache (keyed on the file's bytes) sees every change to the problem. This module imports
no framework.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solar_compiler.errors import SolarError

__all__ = ["DTYPES", "Problem", "eval_axis_expr", "is_problem_dir", "load_problem", "model_source",
           "precision_policy", "write_model_files"]

# definition dtype -> bytes of one *value* (packed fp4 holds two values in a byte)
DTYPES: dict[str, float] = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "float4_e2m1fn_x2": 0.5, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "bool": 1,
}
INPUT_KINDS = ("random", "scalar", "custom", "safetensors")
# bumped when the generated file or the runtime changes what a problem translates to
GENERATOR_VERSION = "solexec-4"


# the harness's correctness contract (`ToleranceSpec`): these unless a workload carries its own
DEFAULT_TOLERANCE = {"max_atol": 1e-2, "max_rtol": 1e-2, "required_matched_ratio": 0.99}
# precision policy -> unit roundoff u = 2^-p of the format an f32 contraction may run in (p significand
# bits: bf16 8, TF32 11); a policy is admitted when max_rtol >= 2 u (docs/sol-execbench.md, "Precision")
POLICY_ROUNDOFF = (("bf16", 2.0 ** -8), ("tf32", 2.0 ** -11))


def is_problem_dir(path: str | Path) -> bool:
    """A folder with a `definition.json`: a SOL-ExecBench problem."""
    p = Path(path)
    return p.is_dir() and (p / "definition.json").is_file()


# ---- axis expressions -----------------------------------------------------------------------------
def eval_axis_expr(expr: str, values: dict[str, int], where: str) -> int:
    """The integer value of an axis expression over `values`: integer literals, axis names, + - * /
    // % ** and unary +/-, parentheses; `/` must divide exactly. Anything else (calls, attributes,
    floats) is an error naming `where`: the expression is parsed, never executed."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise SolarError(f"{where}: cannot parse the expression '{expr}'") from None

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise SolarError(f"{where}: '{expr}' uses '{node.id}', which is no axis defined before it")
            return values[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            op = type(node.op)
            if op in (ast.Div, ast.FloorDiv, ast.Mod) and b == 0:
                raise SolarError(f"{where}: '{expr}' divides by zero")
            if op is ast.Add:
                return a + b
            if op is ast.Sub:
                return a - b
            if op is ast.Mult:
                return a * b
            if op is ast.FloorDiv:
                return a // b
            if op is ast.Mod:
                return a % b
            if op is ast.Div:
                if a % b:
                    raise SolarError(f"{where}: '{expr}' is {a}/{b}, not an integer")
                return a // b
            if op is ast.Pow and 0 <= b < 64:
                return a ** b
        raise SolarError(f"{where}: '{expr}' is not integer arithmetic over axis names "
                         f"(allowed: + - * / // % ** and parentheses)")

    return ev(tree.body)


def precision_policy(workload: dict[str, Any]) -> tuple[str, str]:
    """(policy, why) for the f32 contractions of a workload, from its correctness contract: a kernel
    passes when its outputs are within the tolerance, so one that runs an f32 contraction in a narrower
    format passes while the tolerance covers that format's rounding, and a lower bound must admit it.
    Rounding both operands of a product to a format of unit roundoff u changes it by at most
    (1 + u)^2 - 1 ~ 2u relative, and a sum of such products by at most 2u of its terms' magnitudes
    (accumulated in f32): the first format (bf16, then TF32) with 2u <= max_rtol is the policy, else
    fp32."""
    tol = {**DEFAULT_TOLERANCE, **(workload.get("tolerance") or {})}
    rtol = float(tol["max_rtol"])
    where = "the workload's" if "max_rtol" in (workload.get("tolerance") or {}) else "the default"
    for policy, u in POLICY_ROUNDOFF:
        if rtol >= 2 * u:
            return policy, (f"{where} tolerance max_rtol {rtol:g} >= 2 x {policy} unit roundoff "
                            f"2^{round(math.log2(u))}: f32 contractions may run in {policy}")
    u = POLICY_ROUNDOFF[-1][1]
    return "fp32", (f"{where} tolerance max_rtol {rtol:g} < 2 x tf32 unit roundoff 2^{round(math.log2(u))}: "
                    "f32 contractions keep fp32")


# ---- the problem ----------------------------------------------------------------------------------
@dataclass
class Problem:
    """A checked problem folder."""

    dir: Path
    name: str
    definition: dict[str, Any]
    reference: str
    reference_path: Path  # reference.py, or definition.json when the source is only there
    workloads: list[dict[str, Any]]

    def axes_of(self, index: int) -> dict[str, int]:
        """Every axis of workload `index` (const, var, expr), in definition order."""
        return resolve_axes(self.definition["axes"], self.workloads[index]["axes"],
                            f"{self.dir / 'workload.jsonl'}:{index + 1}")

    def label(self, index: int) -> str:
        return str(self.workloads[index].get("uuid", index))


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SolarError(f"{path}:1: cannot read file: {getattr(e, 'strerror', None) or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SolarError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None


def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise SolarError(f"{where}: {what}")


def _check_definition(d: Any, where: str) -> None:
    _need(isinstance(d, dict), where, "must be a JSON object")
    for key in ("axes", "inputs", "outputs"):
        _need(isinstance(d.get(key), dict), where, f"'{key}' is missing or not an object")
    for name, ax in d["axes"].items():
        _need(isinstance(ax, dict), where, f"axis '{name}' is not an object")
        kind = ax.get("type")
        _need(kind in ("const", "var", "expr"), where,
              f"axis '{name}' has type {kind!r} (expected const, var or expr)")
        if kind == "const":
            v = ax.get("value")
            _need(type(v) is int and v >= 0, where, f"const axis '{name}' needs a non-negative int 'value'")
        if kind == "expr":
            _need(isinstance(ax.get("expression"), str), where, f"expr axis '{name}' needs an 'expression'")
    for group in ("inputs", "outputs"):
        for name, t in d[group].items():
            _need(isinstance(t, dict), where, f"{group[:-1]} '{name}' is not an object")
            _need(t.get("dtype") in DTYPES, where,
                  f"{group[:-1]} '{name}' has dtype {t.get('dtype')!r} (known: {', '.join(DTYPES)})")
            shape = t.get("shape", "missing")
            _need(shape is None or isinstance(shape, list), where,
                  f"{group[:-1]} '{name}' needs a 'shape' (a list of axis names, or null for a scalar)")
            for s in shape or []:
                _need(isinstance(s, str) and (s.isdigit() or s in d["axes"]), where,
                      f"{group[:-1]} '{name}' has shape entry {s!r}, which is no axis")
    entry = d.get("custom_inputs_entrypoint")
    _need(entry is None or (isinstance(entry, str) and entry.isidentifier()), where,
          "'custom_inputs_entrypoint' must be a function name")


def resolve_axes(axes: dict[str, Any], var: dict[str, Any], where: str,
                 const: dict[str, int] | None = None) -> dict[str, int]:
    """Const values (`const` overrides them: a reduced instance for validation), the workload's var
    values, then expr axes in definition order (an expression may use any const or var axis and the
    expr axes before it)."""
    out: dict[str, int] = {}
    for name, ax in axes.items():
        if ax["type"] == "const":
            out[name] = (const or {}).get(name, ax["value"])
        elif ax["type"] == "var":
            v = var.get(name)
            _need(type(v) is int and v >= 0, where, f"var axis '{name}' needs a non-negative int value")
            out[name] = v
    unknown = sorted(set(var) - {n for n, a in axes.items() if a["type"] == "var"})
    _need(not unknown, where, f"axes {', '.join(unknown)} are no var axes of the definition")
    for name, ax in axes.items():
        if ax["type"] == "expr":
            out[name] = eval_axis_expr(ax["expression"], out, f"{where}: axis '{name}'")
            _need(out[name] >= 0, where, f"axis '{name}' = {ax['expression']} is negative ({out[name]})")
    return dict(sorted(out.items(), key=lambda kv: list(axes).index(kv[0])))


def _check_workload(w: Any, d: dict[str, Any], where: str) -> None:
    _need(isinstance(w, dict), where, "a workload must be a JSON object")
    _need(isinstance(w.get("axes", {}), dict), where, "'axes' must be an object")
    inputs = w.get("inputs", {})
    _need(isinstance(inputs, dict), where, "'inputs' must be an object")
    resolve_axes(d["axes"], w.get("axes", {}), where)
    for name, spec in inputs.items():
        _need(name in d["inputs"], where, f"input '{name}' is not an input of the definition")
        _need(isinstance(spec, dict) and spec.get("type") in INPUT_KINDS, where,
              f"input '{name}' has type {spec.get('type') if isinstance(spec, dict) else spec!r} "
              f"(expected {', '.join(INPUT_KINDS)})")
        kind = spec["type"]
        if kind == "scalar":
            _need(type(spec.get("value")) in (int, float, bool), where,
                  f"scalar input '{name}' needs a 'value'")
        if kind == "custom":
            _need(d.get("custom_inputs_entrypoint") is not None, where,
                  f"input '{name}' is custom but the definition has no custom_inputs_entrypoint")
        if kind == "safetensors":
            _need(isinstance(spec.get("path"), str) and isinstance(spec.get("tensor_key", name), str), where,
                  f"safetensors input '{name}' needs a 'path'")
    tol = w.get("tolerance", {})
    _need(isinstance(tol, dict), where, "'tolerance' must be an object")
    for key in ("max_atol", "max_rtol", "required_matched_ratio"):
        _need(type(tol.get(key, 0.0)) in (int, float) and tol.get(key, 0.0) >= 0, where,
              f"tolerance '{key}' must be a non-negative number")
    for name, t in d["inputs"].items():
        if t.get("shape") is None and name not in inputs:
            raise SolarError(f"{where}: scalar input '{name}' (shape null) has no value in the workload")


def load_problem(path: str | Path) -> Problem:
    """Read and check a problem folder (nothing of it is executed)."""
    folder = Path(path)
    def_path = folder / "definition.json"
    d = _read_json(def_path)
    _check_definition(d, f"{def_path}:1")
    ref_path = folder / "reference.py"
    if ref_path.is_file():
        try:
            reference = ref_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise SolarError(f"{ref_path}:1: cannot read file: {e}") from None
    elif isinstance(d.get("reference"), str):
        reference, ref_path = d["reference"], def_path
    else:
        raise SolarError(f"{folder}: no reference.py and no 'reference' in definition.json")
    try:
        tree = ast.parse(reference, filename=str(ref_path))
    except SyntaxError as e:
        raise SolarError(f"{ref_path}:{e.lineno or 1}: syntax error: {e.msg}") from None
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    _need("run" in defined, f"{ref_path}:1", "the reference defines no function 'run'")
    entry = d.get("custom_inputs_entrypoint")
    _need(entry is None or entry in defined, f"{ref_path}:1",
          f"the reference defines no function '{entry}' (custom_inputs_entrypoint)")
    wl_path = folder / "workload.jsonl"
    try:
        lines = wl_path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SolarError(f"{wl_path}:1: cannot read file: {getattr(e, 'strerror', None) or e}") from None
    workloads = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            w = json.loads(line)
        except json.JSONDecodeError as e:
            raise SolarError(f"{wl_path}:{i}: invalid JSON: {e.msg}") from None
        _check_workload(w, d, f"{wl_path}:{i}")
        workloads.append(w)
    _need(bool(workloads), f"{wl_path}:1", "no workload")
    return Problem(folder, str(d.get("name") or folder.name), d, reference, ref_path, workloads)


# ---- the generated model file ---------------------------------------------------------------------
def select(problem: Problem, which: str | None) -> list[int]:
    """Workload indices for `--workload`: None -> the first, `all`, an index (0-based) or a uuid."""
    if which is None:
        return [0]
    if which == "all":
        return list(range(len(problem.workloads)))
    if re.fullmatch(r"\d+", which):
        i = int(which)
        n = len(problem.workloads)
        _need(i < n, str(problem.dir / "workload.jsonl"),
              f"--workload {i}: there are {n} workloads (0..{n - 1})")
        return [i]
    found = [i for i, w in enumerate(problem.workloads) if w.get("uuid") == which]
    _need(bool(found), str(problem.dir / "workload.jsonl"), f"--workload {which}: no workload with this uuid")
    return found[:1]


def model_source(problem: Problem, index: int) -> str:
    """The KernelBench-style model file of workload `index`: `AXES` holds the var axes as literals
    and `CONST_AXES` the integer const axes (size sites, so reduced validation may scale them down:
    the var axes first, the const axes too only when no reduction of the var axes fits, since a
    reference may hard-code a const axis' value); the rest is embedded data."""
    d = problem.definition
    w = problem.workloads[index]
    var = {n: w["axes"][n] for n, a in d["axes"].items() if a["type"] == "var"}
    const = {n: a["value"] for n, a in d["axes"].items() if a["type"] == "const" and type(a["value"]) is int}
    axes_lines = "".join(f"    {n!r}: {v},\n" for n, v in var.items())
    const_lines = "".join(f"    {n!r}: {v},\n" for n, v in const.items())
    return (
        f'"""SOL-ExecBench problem {problem.name}, workload {problem.label(index)} (#{index}).\n\n'
        f"Generated by solar-opt ({GENERATOR_VERSION}) from {problem.dir.resolve()}; do not edit.\n"
        f'"""\n'
        "from solar_compiler.frontends.solexec.runtime import ProblemModel\n\n"
        "AXES = {\n" + axes_lines + "}\n"
        "CONST_AXES = {\n" + const_lines + "}\n"
        "__solar_late_sizes__ = ('CONST_AXES',)  # scaled for validation only when AXES alone is not enough\n"
        f"DEFINITION = {json.dumps(json.dumps(d))}\n"
        f"WORKLOAD = {json.dumps(json.dumps(w))}\n"
        f"REFERENCE = {json.dumps(problem.reference)}\n"
        f"REFERENCE_PATH = {json.dumps(str(problem.reference_path.resolve()))}\n"
        f"PROBLEM_DIR = {json.dumps(str(problem.dir.resolve()))}\n"
        "__solar_source__ = REFERENCE_PATH  # statements are located in the reference, not here\n\n"
        "_P = ProblemModel(DEFINITION, WORKLOAD, REFERENCE, REFERENCE_PATH, PROBLEM_DIR)\n\n\n"
        "class Model(_P.module_class()):\n"
        '    """run(...) of the reference on the workload\'s inputs (CUDA redirected to CPU)."""\n\n\n'
        "def get_inputs():\n"
        "    return _P.tensor_inputs(AXES, CONST_AXES)\n\n\n"
        "def get_fresh_inputs(seed):\n"
        '    """A fresh sample for validation: the workload\'s generator again, under `seed`."""\n'
        "    return _P.fresh_inputs(AXES, seed, CONST_AXES)\n\n\n"
        "def get_inputs_nbytes():\n"
        '    """What get_inputs() allocates (checked before it runs for real)."""\n'
        "    return _P.input_nbytes(AXES, CONST_AXES)\n\n\n"
        "def get_init_inputs():\n"
        "    return []\n"
    )


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:80] or "_"


def write_model_files(problem: Problem, indices: list[int], out_dir: Path) -> list[tuple[str, Path]]:
    """Write the model files of `indices` under `out_dir/<problem>/` (rewritten only when the text
    changes, so the translation cache keeps hitting); returns (workload label, path) pairs. The file
    is named after the problem folder: that name is what reports and results.csv show. Its folder
    also carries a hash of the problem's absolute path, since two problems may share a name (the
    harness's examples/ has `cuda_cpp/rmsnorm` and `triton/rmsnorm`)."""
    import hashlib

    where = hashlib.sha256(str(problem.dir.resolve()).encode()).hexdigest()[:8]
    folder = out_dir / f"{_safe_name(problem.dir.resolve().name)}-{where}"
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in indices:
        text = model_source(problem, i)
        path = folder / f"{_safe_name(problem.dir.resolve().name)}.w{i}.py"
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        out.append((problem.label(i), path))
    return out


def generated_dir() -> Path:
    """Where generated model files live: beside the translation cache (`$XDG_CACHE_HOME/solar-opt`)."""
    from solar_compiler.frontends.cache import cache_dir

    return cache_dir().parent / "solexec"


def expand_argv(argv: list[str]) -> list[tuple[str, list[str], str]] | None:
    """A `solar-opt` command line naming a problem folder -> one command line per selected workload
    (the folder replaced by its generated model file, `--workload` removed, the workload's precision
    policy added unless `--precision` is given: `precision_policy`), labelled by the workload's uuid,
    with that file's path; None when no argument is a problem folder. `--workload` without one is an
    error."""
    args = list(argv)
    which = None
    for i, a in enumerate(args):
        if a == "--workload" or a.startswith("--workload="):
            if a == "--workload":
                if i + 1 >= len(args):
                    raise SolarError("--workload needs a value: an index, a uuid or 'all'")
                which = args[i + 1]
                del args[i:i + 2]
            else:
                which = a.partition("=")[2]
                del args[i]
            break
    dirs = [i for i, a in enumerate(args) if not a.startswith("-") and is_problem_dir(a)]
    if not dirs:
        if which is not None:
            raise SolarError("--workload selects workloads of a SOL-ExecBench problem folder, and no "
                             "argument is one (a folder with definition.json)")
        return None
    if len(dirs) > 1:
        raise SolarError(f"one problem folder at a time (got {', '.join(args[i] for i in dirs)})")
    problem = load_problem(args[dirs[0]])
    chosen = select(problem, which)
    files = write_model_files(problem, chosen, generated_dir())
    if "--translate" not in args:  # a problem is source to translate, like a model file given --translate
        args.append("--translate")
    given = any(a == "--precision" or a.startswith("--precision=") for a in args)
    runs = []
    for i, (label, path) in zip(chosen, files, strict=True):
        run = args[:dirs[0]] + [str(path)] + args[dirs[0] + 1:]
        if not given:  # the workload's tolerance chooses the policy; a --precision given wins
            policy, why = precision_policy(problem.workloads[i])
            run += [f"--precision={policy}", f"--precision-reason={why}"]
        runs.append((label, run, str(path)))
    return runs
