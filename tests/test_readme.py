"""The README's library example runs as written, so the documentation cannot rot."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README lost its python example"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})
    out = capsys.readouterr().out.split()
    assert abs(float(out[0]) - 15.0) < 0.01 and abs(float(out[-1]) - 0.0711) < 2e-4


def test_readme_names_the_test_command_ci_runs():
    ci = (README.parent / ".ci" / "run").read_text()
    assert "make test" in README.read_text() and "make test" in ci
