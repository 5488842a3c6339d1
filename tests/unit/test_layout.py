"""The package's layout: imports go one way (core <- runs <- callbacks, comparison <- cli), no import cycle even
through imports inside functions, and no native code (no C sources, no compiler calls, no ctypes)."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "attnexp"
# Each layer may import the ones before it, never one after it, nor another package of its own layer: the foundation
# (the package itself, which names its configs, errors, rules, tokens), the research core from the mixers up to the
# tasks, what a run is and writes (runs), training and comparison, the command line.
LAYERS = [
    {"", "errors"},
    {"rules", "tokens"},
    {"mixers", "data", "figures"},
    {"networks"},
    {"tasks"},
    {"runs"},
    {"training", "comparison"},
    {"cli"},
]
TOP_LEVEL_MODULES = {"errors", "rules", "tokens"}  # the foundation: every other name at the top is a package
# The package hands out the commands' Python calls (attnexp.run, check, compare, predict) from attnexp.cli.api,
# imported by its __getattr__ when one is first asked for: the one import of a later layer, never made at import.
LAZY_CALLS = {("attnexp", "attnexp.cli"), ("attnexp", "attnexp.cli.api")}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(path: Path, known: set[str]) -> set[str]:
    """The project modules ``path`` imports, at module level or inside functions, with the packages whose
    ``__init__`` each import runs (all but those ``path`` is itself in)."""
    own = module_name(path)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            while name.startswith("attnexp") and not (own == name or own.startswith(name + ".")):
                found.add(name)
                name = name.rpartition(".")[0]
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(path, set(found)) for name, path in found.items()}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def layer(name: str) -> int:
    top = name.split(".")[1] if "." in name else ""
    return next((i for i, names in enumerate(LAYERS) if top in names), 0)


def test_no_import_cycle_even_through_imports_inside_functions():
    assert cycle(graph()) is None, f"import cycle: {' -> '.join(cycle(graph()) or [])}"


def test_imports_go_from_the_command_line_to_the_core_never_back():
    def top(name: str) -> str:
        return name.split(".")[1] if "." in name else ""

    wrong = [
        f"{a} imports {b}"
        for a, targets in graph().items()
        for b in targets
        if (layer(b) > layer(a) or (layer(a) == layer(b) and top(a) != top(b) and top(b))) and (a, b) not in LAZY_CALLS
    ]
    assert not wrong, "\n".join(wrong)


def test_the_top_level_holds_role_packages_and_three_foundation_modules():
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert modules == TOP_LEVEL_MODULES, modules
    assert packages == {n for layer in LAYERS for n in layer} - TOP_LEVEL_MODULES - {""}, packages


def test_no_native_code_in_the_package():
    """Nothing is compiled on the user's machine: no C sources, no subprocess (a compiler call) and no ctypes."""
    sources = [p for p in PACKAGE.rglob("*") if p.suffix in (".c", ".cc", ".cpp", ".h", ".so")]
    assert not sources, sources
    for path in PACKAGE.rglob("*.py"):
        names = {
            a.name.split(".")[0]
            for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Import)
            for a in n.names
        }
        names |= {
            n.module.split(".")[0]
            for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.ImportFrom) and n.module
        }
        assert not names & {"ctypes", "subprocess", "cffi"}, (
            f"{path} imports {names & {'ctypes', 'subprocess', 'cffi'}}"
        )


def test_no_module_over_300_lines():
    """Small files with names that explain them: a module that grows past 300 lines holds two concerns."""
    long = {str(p.relative_to(REPO)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 300}
    assert not long, long
