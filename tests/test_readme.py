"""The README's library example runs as written, so the documentation cannot rot."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README lost its python example"
    outputs = []
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})
        outputs.append(capsys.readouterr().out.split())
    first, mixing, dpsgd = outputs
    assert abs(float(first[0]) - 15.0) < 0.01 and abs(float(first[-2]) - 0.0711) < 2e-4
    assert 9900 <= int(first[-1]) <= 10000  # the most T at the rounded sigma: about the T it was calibrated for
    # the release a mechanism ran, read by every accountant that covers it: name, then a finite epsilon
    names, values = mixing[0::2], [float(v) for v in mixing[1::2]]
    assert names == ["lee2019", "dpcda", "rdp-wor"] and all(0 < v < 100 for v in values)
    assert values[2] <= values[0]  # the tight RDP bound is never above lee2019's
    # DP-SGD (q = 256/60000, z = 1.1, 60 epochs): an upper bound within 1 % of a fine dp_accounting PLD (2.3796)
    assert 2.3796 <= float(dpsgd[0]) <= 2.3796 * 1.01


def test_readme_names_the_test_command_ci_runs():
    ci = (README.parent / ".ci" / "run").read_text()
    assert "make test" in README.read_text() and "make test" in ci
