"""bench/release_scale.py (REPRODUCTION §3b): the norms it reports are the released points' and the test images'."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(bench_script):
    return bench_script("release_scale")


def test_a_released_point_is_as_large_as_its_noise_and_the_test_images_are_measured(bench, tmp_path, capsys):
    from fake_datasets import tiny_arrays, write_idx_folder

    from dpmix_core.synthesis.public_constants import ZScoreConstants, write_zscore_constants

    write_idx_folder(tmp_path / "fashion-mnist", tiny_arrays(5, n_train=200, n_test=40))
    constants = write_zscore_constants(
        tmp_path / "c.npz", ZScoreConstants(np.full(784, 127.5), np.full(784, 73.9), "test")
    )
    argv = ["--data-dir", str(tmp_path), "--constants", str(constants), "--l", "1", "4", "--sigma", "1.0", "0.0"]
    bench.main([*argv, "--draws", "50"])
    out = capsys.readouterr().out
    rows = {
        line.split("|")[1].strip(): line.split("|")[2:6]
        for line in out.splitlines()
        if line.startswith("| 1 ") or line.startswith("| 4 ")
    }
    mixture, noise, released = (float(rows["1"][i]) for i in (1, 2, 3))
    assert mixture == pytest.approx(1.0, abs=0.01) and noise == pytest.approx(28.0) and 26 < released < 30
    assert float(rows["4"][1]) < 1.0 and float(rows["4"][3]) == float(rows["4"][1])  # sigma 0: the mixture itself
    assert "odd test images, median norm: not clipped" in out and "clipped 1.00" in out
