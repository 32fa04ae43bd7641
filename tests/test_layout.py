"""The package's layers (docs/architecture.md): a module imports only from its own layer
or the ones below, the physics and the renderer do not import each other, and there are
no import cycles (lazy imports inside functions count too)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"gradsim_taichi": ROOT / "gradsim_taichi",
            "gradsim_taichi.solvers": ROOT / "solvers",
            "gradsim_taichi.render": ROOT / "render"}

# top to bottom; a module's layer is that of its longest matching prefix
LAYERS = [
    ["gradsim_taichi.cli", "gradsim_taichi.__main__"],
    ["gradsim_taichi.estimation", "gradsim_taichi.estimation_outputs", "gradsim_taichi.batch",
     "gradsim_taichi.control",
     "gradsim_taichi.fit", "gradsim_taichi.nuisance", "gradsim_taichi.ground_shading",
     "gradsim_taichi.optimisers",
     "gradsim_taichi.landscape",
     "gradsim_taichi.uncertainty"],
    ["gradsim_taichi.scenes"],
    ["gradsim_taichi.run_loop", "gradsim_taichi.reports", "gradsim_taichi.objectives",
     "gradsim_taichi.policies", "gradsim_taichi.reuse"],
    ["gradsim_taichi.builder", "gradsim_taichi.build_", "gradsim_taichi.checks",
     "gradsim_taichi.model", "gradsim_taichi.particle_system", "gradsim_taichi.simulation",
     "gradsim_taichi.torch_bridge", "gradsim_taichi.frame_stepper"],
    ["gradsim_taichi.solvers", "gradsim_taichi.render", "gradsim_taichi.meshes",
     "gradsim_taichi.mass_properties", "gradsim_taichi.params"],
    ["gradsim_taichi.runtime", "gradsim_taichi.kernels", "gradsim_taichi.field_pool",
     "gradsim_taichi.taichi_frontend", "gradsim_taichi.errors",
     "gradsim_taichi.version"],
]


def modules() -> dict:
    out = {}
    for pkg, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            if pkg == "gradsim_taichi" and path.is_relative_to(ROOT / "gradsim_taichi" / "solvers"):
                continue
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([pkg, *parts])] = path
    return out


def imports(path: Path, names: set) -> set:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in names else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {n for n in found if n in names}


def layer(name: str) -> int | None:
    best, where = -1, None
    for k, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".") or name.startswith(p)) and len(p) > best:
                best, where = len(p), k
    return where


GRAPH = {}
_MODS = modules()
for _name, _path in _MODS.items():
    GRAPH[_name] = imports(_path, set(_MODS)) - {_name}


def test_every_module_has_a_layer():
    missing = [n for n in GRAPH if n != "gradsim_taichi" and layer(n) is None]
    assert not missing, f"add these modules to a layer in LAYERS: {missing}"


def test_no_module_imports_a_layer_above_its_own():
    bad = [(a, b) for a, deps in GRAPH.items() for b in deps
           if a != "gradsim_taichi" and b != "gradsim_taichi" and layer(b) < layer(a)]
    assert not bad, bad


def test_physics_and_renderer_do_not_import_each_other():
    def part(name):
        return name.split(".")[1] if "." in name else ""

    bad = [(a, b) for a, deps in GRAPH.items() for b in deps
           if {part(a), part(b)} == {"solvers", "render"}]
    assert not bad, bad


def test_no_import_cycles():
    # the package's __init__ re-exports its submodules lazily; leave it out of the graph
    graph = {a: {b for b in deps if b != "gradsim_taichi"} for a, deps in GRAPH.items()
             if a != "gradsim_taichi"}
    cycles, index, low, stack, on, counter = [], {}, {}, [], set(), [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                cycles.append(sorted(scc))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, cycles
