"""How long `benchbench leaderboard --check` takes on the committed leaderboards (issue 36: under 2 minutes
on the 2-core CPU machine). The studies' column statistics are read from `leaderboards/studies/.stats-cache`
(keyed by the records' checksums), so only a changed column is recomputed; run it on a quiet machine and
state `uptime` with the result.

    BENCHBENCH_DATA=../shared/data python bench/leaderboard_check_time.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT_S = 120.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    env = {**os.environ, "BENCHBENCH_DATA": os.environ.get("BENCHBENCH_DATA", str(REPO.parent / "shared" / "data"))}
    cmd = [
        sys.executable,
        "-m",
        "benchbench.cli",
        "leaderboard",
        "--check",
        "--results",
        "leaderboards",
        "--out",
        "leaderboards",
    ]
    load = os.getloadavg()
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if done.returncode != 0:
            sys.exit(f"--check failed (rc {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    best = min(times)
    print(
        f"leaderboard --check: best {best:.1f} s of {args.repeats} ({', '.join(f'{t:.1f}' for t in times)}); "
        f"limit {LIMIT_S:.0f} s; load average before {load[0]:.2f}"
    )
    sys.exit(0 if best < LIMIT_S else 1)


if __name__ == "__main__":
    main()
