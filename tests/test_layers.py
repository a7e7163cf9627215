"""The layer contract (docs/architecture.md): ir -> executor -> analysis -> transforms -> frontends -> passes
-> driver/report -> bench.

A module may import its own layer and the layers below it, never one above; no pass imports another
pass. (import-linter would check this, but its import graph is built from the package directory on
disk, and `solar_compiler.dialects` / `solar_compiler.passes` live in top-level folders mapped by
setuptools `package-dir`; so the graph is built here from the sources with `ast`.) Imports inside
functions and under TYPE_CHECKING count: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"solar_compiler": ROOT / "solar_compiler", "solar_compiler.dialects": ROOT / "dialects",
                "solar_compiler.passes": ROOT / "passes"}
LAYERS = [  # lowest first; a module belongs to the first layer with a prefix of its name
    ["solar_compiler.errors", "solar_compiler.lifetime", "solar_compiler.progress",
     "solar_compiler.gc_policy", "solar_compiler.options"],
    ["solar_compiler.dialects", "solar_compiler.loopir", "solar_compiler.text", "solar_compiler.records"],
    ["solar_compiler.executor"],  # runs loop IR; the analyses use it (narrowing's constants)
    ["solar_compiler.analysis", "solar_compiler.hw", "solar_compiler.mutate"],
    ["solar_compiler.transforms"],  # the rewrite patterns: they apply what an analysis decided
    ["solar_compiler.frontends"],
    ["solar_compiler.passes"],
    ["solar_compiler.driver", "solar_compiler.report", "solar_compiler.render", "solar_compiler.plot",
     "solar_compiler.universe"],
    ["solar_compiler.bench"],  # solar-bench runs the driver's pipeline; nothing imports it
]


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg, base in PACKAGE_DIRS.items():
        for f in base.rglob("*.py"):
            rel = f.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([pkg, *parts])
            if pkg == "solar_compiler" and parts and parts[0] in ("dialects", "passes"):
                continue
            out[name] = f
    return out


def layer_of(module: str) -> int | None:
    for i, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    return None


def imports(name: str, path: Path) -> set[str]:
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base[:len(base) - node.level + 1]
                mod = ".".join(parent + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return {m for m in out if m.startswith("solar_compiler")}


def test_every_module_has_a_layer():
    assert not [m for m in modules() if m != "solar_compiler" and layer_of(m) is None]


def test_no_module_imports_a_higher_layer():
    bad = []
    mods = modules()
    for name, path in mods.items():
        mine = layer_of(name)
        if mine is None:
            continue
        for target in imports(name, path):
            theirs = layer_of(target)
            if theirs is not None and theirs > mine:
                bad.append(f"{name} (layer {mine}) imports {target} (layer {theirs})")
    assert bad == []


def test_no_pass_imports_another_pass():
    mods = modules()
    passes = {m for m in mods if m.startswith("solar_compiler.passes.")}
    bad = [(p, t) for p in passes for t in imports(p, mods[p])
           if any(t == q or t.startswith(q + ".") for q in passes - {p})]
    assert bad == []


def test_the_checker_sees_a_violation(tmp_path):
    """The check is not vacuous: an analysis importing a pass is reported."""
    f = tmp_path / "x.py"
    f.write_text("from solar_compiler.passes.lift_einsum import LiftEinsumPass\n")
    assert imports("solar_compiler.analysis.x", f) >= {"solar_compiler.passes.lift_einsum"}
    assert layer_of("solar_compiler.passes.lift_einsum") > layer_of("solar_compiler.analysis.x")


#: The analysis modules that still import the loop AST (issue 20: every analysis reads `einsum.node`
#: ops through `analysis/structured.py`). The list only shrinks: remove a module when its port lands.
#: The graph -> loop-AST conversion is the same dependency by another door.
LOOP_AST = "solar_compiler.loopir.ast"
TO_LOOP_AST = "solar_compiler.dialects.graph_convert.graph_to_kernel"
READS_THE_LOOP_AST: set[str] = set()  # empty: narrowing's analysis moved to transforms/needed_points.py


def loop_ast_importers(mods: dict[str, Path]) -> set[str]:
    """The modules under solar_compiler/analysis/ that import the loop AST or the conversion to it
    (lazily or not)."""
    def reads(t: str) -> bool:
        return t in (LOOP_AST, TO_LOOP_AST) or t.startswith(LOOP_AST + ".")

    return {name for name, path in mods.items()
            if name.startswith("solar_compiler.analysis.") and any(map(reads, imports(name, path)))}


def test_no_analysis_imports_the_loop_ast():
    """No module under solar_compiler/analysis/ imports `solar_compiler.loopir.ast`, apart from the
    ones still being ported (`READS_THE_LOOP_AST`); one that no longer does leaves the list."""
    found = loop_ast_importers(modules())
    new = sorted(found - READS_THE_LOOP_AST)
    assert not new, "analyses must read einsum ops, not the loop AST: " + ", ".join(
        f"{m} imports {LOOP_AST}" for m in new)
    ported = sorted(READS_THE_LOOP_AST - found)
    assert not ported, "no longer import the loop AST, remove from READS_THE_LOOP_AST: " + ", ".join(ported)


def test_the_loop_ast_check_names_the_module(tmp_path):
    """The check is not vacuous: a lazy import of the AST in an analysis module is found and named."""
    f = tmp_path / "x.py"
    f.write_text("def f():\n    from solar_compiler.loopir.ast import Kernel\n    return Kernel\n")
    g = tmp_path / "y.py"
    g.write_text("from solar_compiler.loopir import ast\n")
    h = tmp_path / "z.py"
    h.write_text("from solar_compiler.dialects.graph_convert import graph_to_kernel, lift_kernel\n")
    ok = tmp_path / "w.py"
    ok.write_text("from solar_compiler.dialects.graph_convert import lift_kernel\n")
    found = loop_ast_importers({"solar_compiler.analysis.x": f, "solar_compiler.analysis.y": g,
                                "solar_compiler.analysis.z": h, "solar_compiler.analysis.w": ok,
                                "solar_compiler.transforms.x": f})
    assert found == {"solar_compiler.analysis.x", "solar_compiler.analysis.y", "solar_compiler.analysis.z"}


def imported_modules(name: str, path: Path) -> set[str]:
    """The modules an import statement names (`from m import x`: m, or m.x when x is a module)."""
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                out.add(".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else [])))
            else:
                out.add(node.module or "")
    return {m for m in out if m.startswith("solar_compiler")}


def test_every_import_of_the_package_resolves():
    """A lazy import of a module that moved fails only when its function runs: find them all here."""
    mods = modules()
    bad = [f"{name} imports {t}" for name, path in mods.items() for t in imported_modules(name, path)
           if t not in mods]
    assert bad == []


def package_of(module: str) -> str:
    """The package a module belongs to for the cycle check: `solar_compiler.X` (a subpackage, with
    everything under it, or a top-level module), `solar_compiler.dialects`, `solar_compiler.passes`."""
    return ".".join(module.split(".")[:2])


def package_graph(mods: dict[str, Path]) -> dict[str, dict[str, tuple[str, str]]]:
    """package -> imported package -> one (importer, imported) module pair that makes the edge."""
    graph: dict[str, dict[str, tuple[str, str]]] = {}
    for name, path in sorted(mods.items()):
        for target in sorted(imported_modules(name, path)):
            a, b = package_of(name), package_of(target)
            if a != b and b != "solar_compiler":
                graph.setdefault(a, {}).setdefault(b, (name, target))
    return graph


def find_cycle(graph: dict[str, dict[str, tuple[str, str]]]) -> list[str] | None:
    """One cycle of the graph as its packages in order (first == last), or None for a DAG."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in graph.get(v, {}):
            if state.get(w) == 1:
                return [*path[path.index(w):], w]
            if w not in state and (found := visit(w)):
                return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def describe_cycle(cycle: list[str], graph: dict[str, dict[str, tuple[str, str]]]) -> str:
    steps = [f"{a} -> {b} ({graph[a][b][0]} imports {graph[a][b][1]})"
             for a, b in zip(cycle, cycle[1:], strict=False)]
    return "import cycle between packages: " + "; ".join(steps)


def test_the_package_import_graph_is_a_dag():
    """No two packages import each other, directly or around a loop: a cycle means neither can be
    understood, tested or moved without the other (issue 20 broke analysis <-> executor and
    loopir <-> dialects <-> text)."""
    graph = package_graph(modules())
    cycle = find_cycle(graph)
    assert cycle is None, describe_cycle(cycle, graph)


def test_the_cycle_check_names_the_cycle():
    """The check is not vacuous: a back edge from the executor into analysis/ is reported by name."""
    graph = package_graph(modules())
    graph.setdefault("solar_compiler.executor", {})["solar_compiler.analysis"] = (
        "solar_compiler.executor.legality", "solar_compiler.analysis.polyhedral")
    cycle = find_cycle(graph)
    assert cycle is not None and "solar_compiler.executor" in cycle and "solar_compiler.analysis" in cycle
    assert "solar_compiler.executor.legality imports solar_compiler.analysis.polyhedral" in \
        describe_cycle(cycle, graph)
