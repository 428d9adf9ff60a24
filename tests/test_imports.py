"""No import cycle anywhere in skyhub: the graph of every module's imports, those inside
functions included, and modules named by strings (``__import__("x")``,
``importlib.import_module("x")``, and the ``"module:attribute"`` strings of product
declarations), has no cycle. A cycle hidden inside a function still means that two modules
cannot be understood, tested or changed one without the other."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ledger", "platforms", "vault", "bot", "publishers", "hub")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[module_name(path)] = path
    return found


def _resolve(current: str, is_package: bool, level: int, name: str | None) -> str:
    base = current.split(".") if is_package else current.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The skyhub modules ``name`` imports, anywhere in its text."""
    tree = ast.parse(path.read_text())
    is_package = path.name == "__init__.py"
    targets: set[str] = set()

    def add(target: str) -> None:
        while target and target not in known:  # "ledger.errors.Conflict" -> "ledger.errors"
            target = target.rpartition(".")[0]
        if target and target != name:
            targets.add(target)

    listed = {id(e) for n in ast.walk(tree) if isinstance(n, (ast.Tuple, ast.List)) for e in n.elts}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                continue
            base = _resolve(name, is_package, node.level, node.module) if node.level else (node.module or "")
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in known else base)
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in ("__import__", "import_module") and node.args and isinstance(node.args[0], ast.Constant):
                add(str(node.args[0].value))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if ":" in text and " " not in text and text.split(":", 1)[0].split(".")[0] in PACKAGES:
                add(text.split(":", 1)[0])  # a lazy "module:attribute" (a product's settings, CLI group, ...)
            elif text in known and "." in text and id(node) in listed:
                add(text)  # a module in a list of modules to import later (hub.products' declarations)
    return targets


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_imports_inside_functions_and_strings():
    g = graph()
    assert "hub.app" in g["hub.cli"] or any("hub.app" in g[m] for m in g if m.startswith("hub.cli"))
    assert "vault.product" in g["hub.products"]  # a declaration named by string


def test_no_module_cycle_anywhere():
    found = cycles(graph())
    assert found == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_hub_imports_none_of_its_own_modules_by_a_string():
    """A module named in ``__import__``/``import_module`` hides an edge from import-linter: in the hub only the two
    places that load products by their declared names do it (hub/products.py, the CLI's lazy product groups)."""
    allowed = {"hub.products", "hub.cliutil"}
    found = []
    for name, path in modules().items():
        if not name.startswith("hub"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if called in ("__import__", "import_module") and name not in allowed:
                    found.append(f"{name} line {node.lineno}")
    assert found == [], "modules loaded by a string: " + ", ".join(found)
