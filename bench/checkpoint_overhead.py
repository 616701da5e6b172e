"""What resumable training costs per run: the data fingerprint (once) and one checkpoint save (at most once a minute).

    .venv/bin/python bench/checkpoint_overhead.py                 # DPFMix Table 1's run: dpfmix-cnn, 54,000 rows
    .venv/bin/python bench/checkpoint_overhead.py --model dpcda-cnn --rows 9000 --repeats 7

Prints the medians over ``--repeats`` of: SHA-256 of the training tensors (rows x 784 features + 10 label
columns, float32), one ``Checkpointer.save`` of the model and Adam state (after one step, so the moments
exist), and its file size. See docs/PERFORMANCE.md ("Resumable training").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from dpmix_core.training.checkpoint import Checkpointer, data_fingerprint  # noqa: E402
from dpmix_core.training.models import build_model  # noqa: E402
from dpmix_core.training.names import IMAGE_MODELS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=IMAGE_MODELS, default="dpfmix-cnn")
    parser.add_argument("--rows", type=int, default=54000, help="training rows (a 60,000-point release less 10 %%)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    x, y = torch.rand(args.rows, 784), torch.rand(args.rows, 10)
    fingerprint = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        data_fingerprint(x, y)
        fingerprint.append(time.perf_counter() - t0)
    model = build_model(args.model, input_shape=(28, 28), num_outputs=10)
    optimizer = torch.optim.Adam(model.parameters())
    model(x[:2]).sum().backward()
    optimizer.step()
    saves = []
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = Checkpointer(Path(folder) / "run.ckpt", "bench", every_s=0)
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            checkpoint.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
            saves.append(time.perf_counter() - t0)
        size = checkpoint.path.stat().st_size
    print(f"model {args.model}, {args.rows} rows, {args.threads} thread(s), median of {args.repeats}:")
    print(f"  data fingerprint (once per run): {statistics.median(fingerprint):.3f} s")
    print(f"  one checkpoint save: {1000 * statistics.median(saves):.1f} ms, {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
