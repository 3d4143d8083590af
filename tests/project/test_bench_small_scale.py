"""The from-scratch learning bench runs end to end on the real STSb/TwitterPara/wiki data (a few
steps of a very small BERT): learning curve, STSb-dev selection and the length diagnostic."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO


@pytest.mark.slow
def test_small_scale_bench_curve_selection_and_length_diagnostic(real_data, tmp_path):
    out = tmp_path / "repro.json"
    cmd = [
        sys.executable,
        str(REPO / "bench" / "small_scale_repro.py"),
        "--model",
        "tiny-bert:16:1:2:32",
        "--methods",
        "ct",
        "--steps",
        "2",
        "--batch-size",
        "8",
        "--eval-every",
        "1",
        "--max-seq-length",
        "16",
        "--corpus-size",
        "200",
        "--data-dir",
        str(real_data),
        "--position-init",
        "zero",
        "--json",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "selected on STSb dev" in proc.stdout and "zero position init" in proc.stdout
    rec = json.loads(out.read_text())
    assert rec["args"]["position_init"] == "zero" and -100 <= rec["gold_length_rho"] <= 100
    for p in ("cls", "mean"):
        assert {"stsb", "twitterpara", "stsb_dev", "length_rho"} <= set(rec["untrained"][p])
    assert [m["method"] for m in rec["methods"]] == ["ct"]  # CT: the curve follows its second encoder, the result
    for m in rec["methods"]:
        curve = m["accounting"]["monitor"]
        assert [s for s, _ in curve] == [1, 2]
        # the last curve point is the returned encoder, evaluated again at the end: the same scores
        assert curve[-1][1]["stsb"] == m["trained"]["stsb"] and curve[-1][1]["length_rho"] == m["trained"]["length_rho"]
        best = max(curve, key=lambda p: p[1]["stsb_dev"])
        assert m["dev_selected"]["step"] == best[0] and m["dev_selected"]["stsb"] == best[1]["stsb"]
