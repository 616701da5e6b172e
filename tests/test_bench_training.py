"""bench/bench_training.py: which quick presets it times (docs/PERFORMANCE.md's per-preset tables)."""

import pytest

from dpmix_core.experiments.presets import PRESETS


@pytest.fixture(scope="module")
def bench(bench_script):
    return bench_script("bench_training")


def test_every_quick_preset_by_default_and_only_those_named_otherwise(bench):
    assert set(bench.quick_presets(None)) == {name for name, spec in PRESETS.items() if spec.quick}
    assert list(bench.quick_presets(["dpcda-table2-quick", "thesis-4.2-l-quick"])) == [
        "dpcda-table2-quick",
        "thesis-4.2-l-quick",
    ]


@pytest.mark.parametrize("name", ["dpcda-table2", "no-such-preset"])
def test_a_name_that_is_no_quick_preset_is_refused_with_the_list(bench, name):
    with pytest.raises(SystemExit, match=f"not a quick preset: {name} .*dpcda-table2-quick"):
        bench.quick_presets([name])
