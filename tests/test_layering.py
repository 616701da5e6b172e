"""The architecture, enforced: layers point one way, no circles, no private names across packages.

Layers of ``dpmix_core`` (a package may import only from its own layer or below):

    privacy, resources < mechanisms < data < synthesis < training < audit < runtime < experiments < teaching, views < cli

Streamlit only in ``app.py`` and the page scripts; argparse only in ``dpmix_core/cli``; pages hold no maths
(no numpy/scipy/torch/dp_accounting imports).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "dpmix_core"
PAGES = (
    sorted((ROOT / "app_pages").rglob("*.py"))  # the page scripts and their shared widgets
    if (ROOT / "app_pages").is_dir()
    else sorted((ROOT / "pages").glob("*.py"))
)

LAYERS = {
    "resources": 0,  # cost model and safe file writes: no dpmix_core imports, usable by every layer
    "privacy": 0,
    "mechanisms": 1,
    "data": 2,
    "synthesis": 3,
    "training": 4,
    "audit": 5,
    "runtime": 6,
    "experiments": 7,
    "teaching": 8,
    "views": 8,
    "cli": 9,
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in CORE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path) -> list[tuple[str, tuple[str, ...], int, bool]]:
    """(module, imported names, line, at module level) for each import statement of a file."""
    tree = ast.parse(path.read_text())
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, (), node.lineno, id(node) in top_level))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, tuple(a.name for a in node.names), node.lineno, id(node) in top_level))
    return found


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "dpmix_core" and parts[1] in LAYERS else None


def test_every_module_belongs_to_a_package():
    """The tree shows the architecture: no loose modules at the top of dpmix_core."""
    loose = sorted(p.name for p in CORE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert not loose
    assert {p.name for p in CORE.iterdir() if p.is_dir() and (p / "__init__.py").exists()} == set(LAYERS)


def test_package_docstrings_say_what_they_own():
    for pkg in LAYERS:
        doc = ast.get_docstring(ast.parse((CORE / pkg / "__init__.py").read_text()))
        assert doc and len(doc) > 40, pkg


def test_no_arrow_points_up():
    offenders = []
    for name, path in _modules().items():
        src = _package(name)
        if src is None:
            continue
        for module, _, line, _ in _imports(path):
            dst = _package(module)
            if dst is not None and dst != src and LAYERS[dst] > LAYERS[src]:
                offenders.append(f"{path.relative_to(ROOT)}:{line} ({src}) imports {module} ({dst})")
    assert not offenders, "\n".join(offenders)


def test_no_import_circles():
    """Module-level imports between dpmix_core modules form no cycle (lazy imports inside functions excepted)."""
    modules = _modules()
    graph = defaultdict(set)
    for name, path in modules.items():
        for module, names, _, top in _imports(path):
            if not top or not module.startswith("dpmix_core"):
                continue
            targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in modules] or [module]
            for target in targets:
                if target in modules and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    visiting, done, cycles = set(), set(), []

    def visit(node: str, stack: list[str]) -> None:
        visiting.add(node)
        for nxt in graph[node]:
            if nxt in visiting:
                cycles.append(" -> ".join(stack[stack.index(nxt) :] + [nxt]) if nxt in stack else nxt)
            elif nxt not in done:
                visit(nxt, stack + [nxt])
        visiting.discard(node)
        done.add(node)

    for node in list(graph):
        if node not in done:
            visit(node, [node])
    assert not cycles, cycles


def test_no_private_names_across_packages():
    offenders = []
    for name, path in _modules().items():
        src = _package(name)
        for module, names, line, _ in _imports(path):
            dst = _package(module)
            if dst is None or dst == src:
                continue
            private = [n for n in names if n.startswith("_")] + [p for p in module.split(".") if p.startswith("_")]
            if private:
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {private} from {module}")
    assert not offenders, "\n".join(offenders)


def _all_imported_roots(path: Path) -> set[str]:
    return {module.split(".")[0] for module, _, _, _ in _imports(path)}


def test_argparse_only_in_cli():
    offenders = [
        str(p.relative_to(ROOT))
        for p in CORE.rglob("*.py")
        if "argparse" in _all_imported_roots(p) and p.parent.name != "cli"
    ]
    assert not offenders


def test_core_never_imports_streamlit():
    offenders = [str(p.relative_to(ROOT)) for p in CORE.rglob("*.py") if "streamlit" in _all_imported_roots(p)]
    assert not offenders


@pytest.mark.parametrize("path", [ROOT / "app.py", *PAGES], ids=lambda p: p.name)
def test_pages_do_no_numerics_themselves(path):
    assert not _all_imported_roots(path) & {"numpy", "scipy", "torch", "dp_accounting"}


def test_job_kinds_of_stored_runs_still_resolve():
    """Job kinds are part of stored runs' identity: a moved function is reached through MOVED_KINDS."""
    from dpmix_core.experiments.runner import run_job
    from dpmix_core.experiments.trade_offs import JOB_KIND
    from dpmix_core.runtime.worker import MOVED_KINDS, resolve_callable

    assert resolve_callable(JOB_KIND) is run_job
    for new in MOVED_KINDS.values():
        resolve_callable(new)
