"""The build's structure: modules that do not import each other in a circle, one swap of a
built folder into place, and the build pipeline."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from corpus import TORCH_213

PACKAGE = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package (tests and benchmarks aside): dotted name → (file, is a
    package's ``__init__``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in ("tests", "bench"):
            continue
        parts = ["tlsite", *relative.with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imported(name: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement runs: ``from pkg import mod`` runs ``pkg.mod``, and
    ``pkg`` itself unless ``pkg`` is a package the importer belongs to (already running)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    modules = [f"{target}.{alias.name}" for alias in node.names]
    if not name.startswith(f"{target}."):
        modules.append(target)
    return modules


def import_graph() -> dict[str, set[str]]:
    """Module → the package's modules it imports when it runs, at module level or inside a
    function (an import moved into a function to dodge a cycle still closes it at run time);
    imports under ``if TYPE_CHECKING:`` never run and are left out."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        edges: set[str] = set()
        stack: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
        while stack:
            for child in ast.iter_child_nodes(stack.pop()):
                if _is_type_checking(child):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    edges.update(
                        m for m in _imported(name, is_package, child) if m in modules and m != name
                    )
                stack.append(child)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_module_imports_itself_through_others() -> None:
    graph = import_graph()
    assert len(graph) > 50, "the package's modules were not found"
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle_hidden_in_a_function() -> None:
    """The check itself: a cycle closed by an import inside a function is found."""
    graph = import_graph()
    graph["tlsite.core.store"] = graph["tlsite.core.store"] | {"tlsite.core.model"}
    assert ["tlsite.core.model", "tlsite.core.store"] in cycles(graph)


def test_handlers_use_only_the_record_context() -> None:
    """``RecordContext`` is the whole handler API: no handler reaches into the builder."""
    tree = ast.parse((PACKAGE / "core" / "handlers.py").read_text(encoding="utf-8"))
    reaches = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in ("builder", "_builder")
    ]
    imports = [
        f"line {node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("builder")
    ]
    assert reaches == [] and imports == []


#: A user's script without an ``if __name__ == "__main__"`` guard, under a start method that
#: re-imports ``__main__`` in every child (``forkserver`` is Python 3.14's default on Linux),
#: reading a job's ranks two at a time while a thread runs (as the progress bar does).
_UNGUARDED_SCRIPT = """
import multiprocessing, sys, threading, time
multiprocessing.set_start_method("forkserver")
from tlsite.core import resolve_input
from tlsite.core.multirank import load_ranks
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
with resolve_input(sys.argv[1]) as resolved, load_ranks(resolved, jobs=2) as ranks:
    print(sorted(r.rank for r in ranks.ranks if not r.error), flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="forkserver: POSIX only")
def test_ranks_are_read_in_helpers_from_a_script_without_a_main_guard(tmp_path: Path) -> None:
    job = TORCH_213 / "multi_rank"
    if not job.is_dir():
        pytest.skip("shared trace corpus not available")
    script = tmp_path / "report.py"
    script.write_text(textwrap.dedent(_UNGUARDED_SCRIPT), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(PACKAGE.parent))
    done = subprocess.run(
        [sys.executable, str(script), str(job)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[0, 1]"
