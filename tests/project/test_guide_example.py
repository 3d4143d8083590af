"""The method written from docs/writing-a-method.md alone (examples/benchbench-example-dropout) works
the way a user gets it: built and installed by pip as a package, found through its entry point by
benchbench's registry (nothing imported by path), then its own tests, the conformance kit among them,
run against the installed copy."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

EXAMPLE = REPO / "examples" / "benchbench-example-dropout"


@pytest.mark.slow
def test_installed_example_is_discovered_and_passes_the_conformance_kit(tmp_path):
    # build from a copy: pip writes build/ and *.egg-info beside the sources, never into the repo
    src = tmp_path / "src"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
    site = tmp_path / "site"
    # --no-build-isolation: the environment's setuptools, no index needed
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(site)]
    subprocess.run([*pip, str(src)], check=True, timeout=300)
    assert not (site / "benchbench_dropalign.py").is_symlink() and (site / "benchbench_dropalign.py").is_file()

    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = (
        "import benchbench_dropalign as m, json; from benchbench import get_registry;"
        "from benchbench.testing import check_method;"
        "reg = get_registry(); cls = reg.method('dropout-align'); assert cls is m.DropoutAlign, cls;"
        "print(json.dumps({'file': m.__file__, 'owner': reg.owner[('methods', 'dropout-align')],"
        " 'report': check_method(cls, overrides={'steps': '4', 'batch_size': '4', 'checkpoint_every': '2'})}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["file"].startswith(str(site)), got["file"]  # the installed copy, not the repo's
    assert got["owner"] == "dropout-align"  # registered by its entry point's name
    expected = {"Config dataclass", "encoder contract", "finiteness", "determinism"}
    assert expected | {"save/load round trip", "resume equality"} <= set(got["report"]["passed"]), got
    assert got["report"]["skipped"] == {}

    # the package's own tests against the installed copy (its entry-point test runs instead of skipping)
    tests = tmp_path / "tests"
    shutil.copytree(EXAMPLE / "tests", tests)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(tests)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert "skipped" not in run.stdout.splitlines()[-1], run.stdout[-2000:]
