"""The dependency lock (constraints.txt) in CI.

    python .ci/lock.py check   # the installed set equals the lock: exit 1 naming each difference
    python .ci/lock.py drift   # what a fresh unconstrained install would get instead: reported, exit 0
    python .ci/lock.py write   # rewrite the lock from this environment (after the suite passes on it)

Why a drift report that never fails: a new release of a dependency (transformers 5.25.0 changed BERT's
attention given position ids without a mask) must not block a landing whose own code is unchanged, but
it must be seen; upgrading the lock is a change of its own, with the suite run on it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchbench.store.lock import LOCK_FILE, canonical, drift, read_pins  # noqa: E402

HEADER = """# The dependency versions benchbench is tested with (CI installs them: pip install -e ".[test]" -c constraints.txt).
# torch is installed first and pinned on its own (torch==2.13.0, a CPU wheel): it is not listed here.
# Regenerate after an upgrade that passes the suite: python .ci/lock.py write (records store this file's sha256).
"""


def check() -> int:
    diff = drift(read_pins(ROOT / LOCK_FILE))
    for name, (want, have) in diff.items():
        print(f"lock: {name} is {have or 'not installed'}, {LOCK_FILE} pins {want}")
    print(f"lock: {'installed set equals ' + LOCK_FILE if not diff else str(len(diff)) + ' differences'}")
    return 1 if diff else 0


def newest() -> dict[str, str]:
    """The versions an eager upgrade of ``.[test]`` would install now (torch held at its installed pin:
    an unpinned torch would resolve to a CUDA build of several GB)."""
    with tempfile.TemporaryDirectory() as tmp:
        pin, report = Path(tmp) / "torch.txt", Path(tmp) / "report.json"
        pin.write_text(f"torch=={metadata.version('torch')}\n")
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--quiet",
            "--report",
            str(report),
            "--upgrade",
            "--upgrade-strategy",
            "eager",
            "-c",
            str(pin),
            "-e",
            f"{ROOT}[test]",
        ]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        items = json.loads(report.read_text())["install"]
    return {canonical(i["metadata"]["name"]): i["metadata"]["version"] for i in items}


def report_drift() -> int:
    pins = read_pins(ROOT / LOCK_FILE)
    try:
        new = newest()
    except (subprocess.CalledProcessError, OSError, ValueError, KeyError) as e:
        print(f"drift: the resolver could not say what is newest ({e}); nothing compared")
        return 0
    moved = {n: (pins[n], v) for n, v in sorted(new.items()) if n in pins and pins[n] != v}
    added = sorted(n for n in new if n not in pins and n != "benchbench")
    for n, (old, v) in moved.items():
        print(f"drift: {n} {old} -> {v} (newest release; not tested: upgrade the lock and run the suite)")
    for n in added:
        print(f"drift: {n} {new[n]} is a new dependency the lock does not pin")
    if not moved and not added:
        print(f"drift: none ({len(pins)} pins are the newest releases the index offers)")
    return 0


def write() -> int:
    lines = sorted(
        f"{d.metadata['Name']}=={d.version}"
        for d in metadata.distributions()
        if canonical(d.metadata["Name"]) not in {"torch", "benchbench", "pip", "setuptools", "wheel"}
    )
    (ROOT / LOCK_FILE).write_text(HEADER + "\n".join(sorted(set(lines), key=str.lower)) + "\n")
    print(f"wrote {LOCK_FILE}: {len(lines)} pins")
    return 0


if __name__ == "__main__":
    cmds = {"check": check, "drift": report_drift, "write": write}
    if len(sys.argv) != 2 or sys.argv[1] not in cmds:
        sys.exit(f"usage: python .ci/lock.py {{{'|'.join(cmds)}}}")
    sys.exit(cmds[sys.argv[1]]())
