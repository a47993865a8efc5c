"""The prepared GPU sweep (benchmarks/bench_sweep.py) runs end to end at a small size on the CPU."""

from __future__ import annotations

import numpy as np


def test_quick_sweep_runs_and_reports_every_step():
    from benchmarks import bench_sweep

    row = bench_sweep.run(quick=True, verbose=False)["sweep_llama8b_shaped"]
    for key in ("build_s", "inputs_s", "jacobians_s", "eigvals_s", "eigvals_device_one_layer_s", "topk8_s", "time_s"):
        assert np.isfinite(row[key]) and row[key] >= 0, key
    assert row["size"] == "L=4, d=256, P=8" and row["device"] == "cpu"


def test_full_size_is_skipped_on_cpu():
    from benchmarks import bench_sweep

    row = bench_sweep.run(verbose=False)["sweep_llama8b_shaped"]
    assert row["status"] == "skipped" and "GPU" in row["error"]
