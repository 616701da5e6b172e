"""dpmix_core never imports Streamlit; pages hold no maths (checked loosely: no numpy/scipy/torch imports)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_core_never_imports_streamlit():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "dpmix_core").rglob("*.py") if "streamlit" in _imports(p)]
    assert not offenders


def test_pages_do_no_numerics_themselves():
    offenders = {
        str(p.relative_to(ROOT)): sorted(_imports(p) & {"numpy", "scipy", "torch", "dp_accounting"})
        for p in [ROOT / "app.py", *(ROOT / "pages").glob("*.py")]
    }
    assert not {k: v for k, v in offenders.items() if v}
