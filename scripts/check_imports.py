"""Import-cycle check for a package (stdlib only; `make lint` runs it on lakelog).

Builds the package's module import graph from the source (ast, nothing is imported): an
edge for `import a.b` goes to `a.b`; for `from a.b import c` to `a.b.c` if that is a
module, else to `a.b`. Every import counts, at module level or inside a function (a lazy
import is still a cycle), except those under `if TYPE_CHECKING:`, which are typing-only.

Fails (exit 1) on
  - any cycle made of runtime imports (strongly-connected components of the runtime graph);
  - a typing-only cycle (a component of the graph with typing imports that is not a
    runtime one) that includes one of the --forbid modules (default: lakelog.server.broker,
    whose type only the code that builds the broker should need).
Other typing-only cycles are reported with their size, not failed.

    python scripts/check_imports.py [--root src] [--package lakelog] [--forbid MODULE ...]
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under root/package."""
    modules: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, typing_only: bool = False):
    """(node, typing_only) for every import statement, at any depth."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, typing_only
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), True)
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), typing_only)
        else:
            yield from _imports(node, typing_only)


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is one of our modules."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def build_graph(
    root: Path, package: str
) -> tuple[set[str], dict[str, set[str]], dict[str, set[str]]]:
    """Modules, runtime edges, typing-only edges (an edge both ways counts as runtime)."""
    modules = module_names(root, package)
    runtime: dict[str, set[str]] = {m: set() for m in modules}
    typing: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, typing_only in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in modules else base)
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved is None or resolved == name:
                    continue
                (typing if typing_only else runtime)[name].add(resolved)
    for name in modules:
        typing[name] -= runtime[name]
    return set(modules), runtime, typing


def strongly_connected(nodes: set[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Components of more than one module (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return sorted(components, key=lambda c: (-len(c), c))


def check(root: Path, package: str, forbid: list[str]) -> tuple[bool, list[str]]:
    """(passed, report lines)."""
    nodes, runtime, typing = build_graph(root, package)
    both = {m: runtime[m] | typing[m] for m in nodes}
    runtime_cycles = strongly_connected(nodes, runtime)
    runtime_sets = [set(c) for c in runtime_cycles]
    typing_cycles = [c for c in strongly_connected(nodes, both) if set(c) not in runtime_sets]
    n_edges = sum(len(e) for e in both.values())
    n_typing = sum(len(e) for e in typing.values())

    def sizes(cycles: list[list[str]]) -> str:
        if not cycles:
            return "none"
        return f"{len(cycles)} (" + ", ".join(f"{len(c)} modules" for c in cycles) + ")"

    lines = [
        f"import graph: {len(nodes):,} modules, {n_edges:,} edges ({n_typing:,} typing-only); "
        f"runtime cycles: {sizes(runtime_cycles)}; typing-only cycles: {sizes(typing_cycles)}"
    ]
    passed = True
    for cycle in runtime_cycles:
        passed = False
        lines.append(f"FAIL runtime cycle ({len(cycle)} modules): {_path(cycle, runtime)}")
        if len(cycle) > 2:
            lines.append("  members: " + " ".join(cycle))
    for cycle in typing_cycles:
        bad = [m for m in forbid if m in cycle]
        if bad:
            passed = False
            lines.append(
                f"FAIL typing-only cycle through {', '.join(bad)} ({len(cycle)} modules): "
                + _path(cycle, both, start=bad[0])
            )
            lines.append("  members: " + " ".join(cycle))
        else:
            lines.append(f"typing-only cycle ({len(cycle)} modules): " + " ".join(cycle))
    return passed, lines


def _path(component: list[str], edges: dict[str, set[str]], start: str | None = None) -> str:
    """One shortest cycle through `start` (default: the component's first module)."""
    members = set(component)
    first = start or component[0]
    parents: dict[str, str] = {}
    frontier = [first]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges.get(node, ())):
                if child not in members:
                    continue
                if child == first:
                    path = [node]
                    while path[-1] != first:
                        path.append(parents[path[-1]])
                    return " -> ".join([*reversed(path), first])
                if child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    return " ".join(component)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent / "src")
    parser.add_argument("--package", default="lakelog")
    parser.add_argument("--forbid", nargs="*", default=["lakelog.server.broker"])
    args = parser.parse_args(argv)
    passed, lines = check(args.root, args.package, args.forbid)
    print("\n".join(lines))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
