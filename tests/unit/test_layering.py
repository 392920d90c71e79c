"""The layers of lakefmt, checked: the core imports without Spark, and each layer imports only what is below it.

From the bottom: ``spec`` (the format: encodings and names, no I/O) and ``io`` (storage: knows no format) over
the neutral modules (errors, options, units, key_options, retry, binpack, progress, cache); ``meta`` (the metadata
store and the entries algebra) over both; then ``read``, ``commit`` and ``write`` side by side (commit and write
never import read); then ``rewrite`` (compaction and row-level delete, on one skeleton); then ``maintenance``;
then ``table``, the package root and the CLI. Spark (``pyspark``, ``pyspark_lakefmt``) and the benchmarks sit above
lakefmt and are never imported by it. No module reaches itself through imports (``TYPE_CHECKING`` imports count).

Inside a layer, folders group a concept (:data:`FOLDERS`): ``rewrite.keys`` (the upsert's path), ``rewrite.compact``,
``rewrite.merge``; ``spec.keys``, ``spec.evolution``, ``spec.sql``. Each says in its ``__init__`` docstring what lives
there and what it may import, and the folders of one layer import each other only in the directions listed.

``pytest -s`` prints the import table of every module by layer.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "lakefmt"
BENCHMARKS = REPO / "benchmarks"

#: top-level modules and packages that must never be imported by lakefmt
ABOVE = ("pyspark", "pyspark_lakefmt", "benchmarks")
#: modules under lakefmt/ that belong to no layer package: below everything (they import no other layer)
NEUTRAL = {"errors", "options", "units", "key_options", "retry", "binpack", "progress", "cache"}
#: modules beside ``table`` in its layer (the one-line writes; the consumers, tags and restore of ``Table``; its
#: writes and rewrites; the peers' keyword spellings)
TABLE_LEVEL = {"oneliner", "table_versions", "table_writes", "aliases"}
#: a layer -> the lakefmt layers it must not import (directly or through other lakefmt modules)
FORBIDDEN: dict[str, set[str]] = {
    "spec": {"io", "meta", "commit", "read", "write", "rewrite", "maintenance", "table", "api", "cli"},
    "io": {"spec", "meta", "commit", "read", "write", "rewrite", "maintenance", "table", "api", "cli"},
    "meta": {"commit", "read", "write", "rewrite", "maintenance", "table", "api", "cli"},
    "commit": {"read", "rewrite", "maintenance", "table", "api", "cli"},
    "read": {"commit", "write", "rewrite", "maintenance", "table", "api", "cli"},
    "write": {"read", "rewrite", "maintenance", "table", "api", "cli"},
    "rewrite": {"maintenance", "table", "api", "cli"},
    "maintenance": {"table", "api", "cli"},
    "neutral": {
        "spec", "io", "meta", "commit", "read", "write", "rewrite", "maintenance", "table", "api", "cli", "hooks"
    },
}
#: a layer -> third-party top-level packages it must not import
FORBIDDEN_EXTERNAL: dict[str, set[str]] = {"spec": {"fsspec", "s3fs"}}
#: the folders inside a layer -> the modules and folders of lakefmt they must not reach (a prefix names a folder),
#: and the modules of those that they may import all the same
FOLDERS: dict[str, tuple[set[str], set[str]]] = {
    "lakefmt.rewrite.keys": ({"lakefmt.rewrite.compact", "lakefmt.rewrite.merge"}, set()),
    "lakefmt.rewrite.compact": ({"lakefmt.rewrite.merge", "lakefmt.rewrite.keys"}, {"lakefmt.rewrite.keys.buckets"}),
    "lakefmt.rewrite.merge": ({"lakefmt.rewrite.compact"}, set()),
    "lakefmt.spec.keys": ({"lakefmt.spec.evolution", "lakefmt.spec.sql"}, set()),
    "lakefmt.spec.evolution": ({"lakefmt.spec.sql"}, set()),
    "lakefmt.spec.sql": ({"lakefmt.spec.evolution"}, set()),
}
#: modules of a layer outside its folders that no folder's module may reach: the skeleton a folder builds on never
#: imports the folders (``rewrite.base`` is below ``rewrite.keys``, ``rewrite.compact`` and ``rewrite.merge``)
BELOW_FOLDERS = {"lakefmt.rewrite.base": {"lakefmt.rewrite.keys", "lakefmt.rewrite.compact", "lakefmt.rewrite.merge"}}
LAYER_ORDER = [
    "neutral", "spec", "io", "meta", "hooks", "read", "commit", "write", "rewrite", "maintenance", "table", "api", "cli"
]


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p, PACKAGE): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> str:
    """``lakefmt.meta.store`` -> ``meta``; the package root is ``api``; errors, options, ... are ``neutral``."""
    parts = module.split(".")
    if parts == ["lakefmt"]:
        return "api"
    if parts[1] in NEUTRAL:
        return "neutral"
    if parts[1] in TABLE_LEVEL:
        return "table"
    return parts[1]


def _in_cli(module: str) -> bool:
    """``lakefmt.cli`` or one of its modules (the CLI is a package)."""
    return module == "lakefmt.cli" or module.startswith("lakefmt.cli.")


def imports_of(path: Path, module: str, modules: set[str]) -> set[str]:
    """Every module ``path`` imports, anywhere in it (also inside functions): ``from a.b import c`` counts as
    ``a.b.c`` when that is a module of lakefmt, else as ``a.b``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                prefix = package[: len(package) - node.level + 1]
                base = ".".join([*prefix, *([node.module] if node.module else [])])
            if base == "__future__":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add(full if full in modules else base)
    return out


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: imports_of(path, name, set(modules)) for name, path in modules.items()}


def _closure(graph: dict[str, set[str]], start: str) -> dict[str, list[str]]:
    """Every module ``start`` reaches through lakefmt's imports, with one import chain to it."""
    chains: dict[str, list[str]] = {start: [start]}
    todo = [start]
    while todo:
        current = todo.pop()
        for target in sorted(graph.get(current, ())):
            if target not in chains:
                chains[target] = [*chains[current], target]
                if target in graph:
                    todo.append(target)
    return chains


def test_the_core_imports_without_spark_or_the_benchmarks() -> None:
    """In a fresh interpreter where importing pyspark (or pyspark_lakefmt, or the benchmarks) fails, lakefmt and
    every one of its modules import, and none of those modules got loaded."""
    code = f"""
import importlib, json, pkgutil, sys
for name in {ABOVE!r}:
    sys.modules[name] = None  # poisoned: "import {{name}}" raises ImportError
import lakefmt
failed = []
walked = sorted(m.name for m in pkgutil.walk_packages(lakefmt.__path__, "lakefmt.", onerror=failed.append))
for name in walked:
    importlib.import_module(name)
loaded = sorted(m for m, v in sys.modules.items() if v is not None and m.split(".")[0] in {ABOVE!r})
print(json.dumps({{"file": lakefmt.__file__, "walked": walked, "failed": failed, "loaded": loaded}}))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(result["file"]).resolve() == PACKAGE / "__init__.py", "imported an installed copy, not this checkout"
    assert result["failed"] == [] and result["loaded"] == []
    assert set(result["walked"]) == set(_modules()) - {"lakefmt"}, "walk_packages missed modules"


def test_layer_rules(graph: dict[str, set[str]]) -> None:
    violations = []
    for module, imported in sorted(graph.items()):
        layer = layer_of(module)
        for target in sorted(imported):
            top = target.split(".")[0]
            if top in ABOVE:
                violations.append(f"{module} imports {target} (lakefmt never imports Spark or the benchmarks)")
            if _in_cli(target) and not _in_cli(module):
                violations.append(f"{module} imports {target} (the CLI is above the library)")
            if top in FORBIDDEN_EXTERNAL.get(layer, set()):
                violations.append(f"{module} imports {target} (the {layer} layer does no I/O)")
        if layer in FORBIDDEN:
            for target, chain in sorted(_closure(graph, module).items()):
                if target.startswith("lakefmt") and layer_of(target) in FORBIDDEN[layer]:
                    violations.append(f"{module} ({layer}) reaches {target} ({layer_of(target)}): {' -> '.join(chain)}")
    assert violations == [], "layer rules broken:\n" + "\n".join(violations)


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_folder_rules(graph: dict[str, set[str]]) -> None:
    """The folders of one layer import each other only in the allowed directions, and the module a folder builds
    on (``rewrite.base``) never imports a folder."""
    violations = []
    for module in sorted(graph):
        rules = [rule for folder, rule in FOLDERS.items() if _under(module, folder)]
        rules += [(banned, set()) for below, banned in BELOW_FOLDERS.items() if module == below]
        for banned, allowed in rules:
            for target, chain in sorted(_closure(graph, module).items()):
                if target in allowed or any(_under(c, a) for c in chain[1:-1] for a in allowed):
                    continue
                if any(_under(target, b) for b in banned):
                    violations.append(f"{module} reaches {target}: {' -> '.join(chain)}")
    assert violations == [], "folder rules broken:\n" + "\n".join(violations)


def test_every_folder_is_known_and_says_what_lives_there() -> None:
    """Each package under lakefmt/ is a layer or a known folder of one, and its ``__init__`` docstring says what
    lives there (a folder's in at most three lines, naming what it may import)."""
    problems = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        name = _module_name(init, PACKAGE)
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        if not doc:
            problems.append(f"{name} has no docstring")
        if name.count(".") < 2:
            if name != "lakefmt" and layer_of(name) not in LAYER_ORDER:
                problems.append(f"{name} is in no layer")
            continue
        if name not in FOLDERS:
            problems.append(f"{name} is not in FOLDERS (say what it may import)")
        elif doc and (len(doc.splitlines()) > 3 or "import" not in doc.lower()):
            problems.append(f"{name}'s docstring is over three lines or does not say what it may import")
    assert problems == [], "\n".join(problems)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles among lakefmt's modules (strongly connected components of more than one module, or a
    module importing itself). Imports under ``if TYPE_CHECKING:`` count: an annotation that names a higher layer's
    type is a dependency on it. A package's ``__init__`` only gathers its modules' names, so imports *of* a
    package are left out (``from lakefmt.spec import TableSchema`` inside ``lakefmt.spec.manifest``)."""
    packages = {m for m in graph if (PACKAGE / Path(*m.split(".")[1:]) / "__init__.py").exists()}
    edges = {m: {t for t in targets if t in graph and t not in packages} for m, targets in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges[v]:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles(graph: dict[str, set[str]]) -> None:
    """No module reaches itself through lakefmt's imports (a lower module that takes a ``Table`` for its
    annotations, and the table importing it, is such a circle)."""
    assert _circles(graph) == []


def test_circles_are_found() -> None:
    """The circle check itself: a two-module circle through a ``TYPE_CHECKING`` import is found."""
    graph = {"lakefmt.a": {"lakefmt.b"}, "lakefmt.b": {"lakefmt.a"}, "lakefmt.c": {"lakefmt.a"}}
    assert _circles(graph) == [["lakefmt.a", "lakefmt.b"]]


def test_print_the_import_table(graph: dict[str, set[str]]) -> None:
    """The table for the record (``pytest -s``): each module, its layer, and the lakefmt modules it imports,
    grouped by their layer; then what each layer imports from which."""
    rows = []
    by_layer: dict[str, set[str]] = defaultdict(set)
    for module in sorted(graph, key=lambda m: (LAYER_ORDER.index(layer_of(m)), m)):
        layer = layer_of(module)
        groups: dict[str, list[str]] = defaultdict(list)
        for target in sorted(graph[module]):
            if target.startswith("lakefmt") and layer_of(target) != layer:
                groups[layer_of(target)].append(target.removeprefix("lakefmt."))
                by_layer[layer].add(layer_of(target))
        cells = "; ".join(f"{g}: {', '.join(groups[g])}" for g in sorted(groups, key=LAYER_ORDER.index))
        rows.append((module, layer, cells or "-"))
    width = max(len(r[0]) for r in rows)
    lines = [f"{'module':<{width}}  {'layer':<11}  imports from other layers", "-" * (width + 40)]
    lines += [f"{m:<{width}}  {layer:<11}  {cells}" for m, layer, cells in rows]
    lines += ["", "layer        imports from"]
    lines += [
        f"{layer:<11}  {', '.join(sorted(by_layer[layer], key=LAYER_ORDER.index)) or '-'}"
        for layer in LAYER_ORDER
        if any(layer_of(m) == layer for m in graph)
    ]
    print("\n" + "\n".join(lines))
    assert rows


def test_benchmarks_use_only_the_public_api() -> None:
    """No benchmark imports a private name (``_x``) of lakefmt, reads a private attribute of something it
    imported, or monkeypatches a module (assigns to an attribute of an imported module or class)."""
    problems = []
    for path in sorted(BENCHMARKS.rglob("*.py")):
        if ".venvs" in path.relative_to(BENCHMARKS).parts:  # the peers' virtualenvs: not our code
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        imported: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update((a.asname or a.name).split(".")[0] for a in node.names)
                for a in node.names:
                    if any(part.startswith("_") for part in a.name.split(".")):
                        problems.append(f"{path.name}:{node.lineno} imports {a.name}")
            elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
                imported.update(a.asname or a.name for a in node.names)
                module = node.module or ""
                for a in node.names:
                    if a.name.startswith("_") or any(p.startswith("_") for p in module.split(".")):
                        problems.append(f"{path.name}:{node.lineno} imports {a.name} from {module}")
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id in imported
                ):
                    problems.append(f"{path.name}:{node.lineno} assigns {ast.unparse(target)}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "setattr"
                and node.args
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id in imported
            ):
                problems.append(f"{path.name}:{node.lineno} calls setattr on {node.args[0].id}")
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in imported
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.value.id != "os"  # os._exit: the documented way to end a child without cleanup
            ):
                problems.append(f"{path.name}:{node.lineno} uses {ast.unparse(node)}")
    assert problems == [], "benchmarks reach into internals:\n" + "\n".join(problems)
