"""The dependency lock: its pins are read exactly, a record names the lock and every package installed
at another version, and the committed lock is what this environment runs."""

from __future__ import annotations

import hashlib
from importlib import metadata

import pytest
from conftest import REPO

from benchbench.store import lock


def test_pins_are_read_by_canonical_name_and_a_non_pin_is_refused(tmp_path):
    f = tmp_path / "constraints.txt"
    f.write_text("# a comment\n\nSentence_Transformers==6.3.0  # trailing\nnumpy==2.4.6\n")
    assert lock.read_pins(f) == {"sentence-transformers": "6.3.0", "numpy": "2.4.6"}
    f.write_text("numpy>=2\n")
    with pytest.raises(ValueError, match=r"constraints.txt:1: 'numpy>=2' is not a 'name==version' pin"):
        lock.read_pins(f)


def test_drift_names_each_package_at_another_version_or_missing():
    have = metadata.version("numpy")
    pins = {"numpy": have, "scipy": "0.0.1", "no-such-package-xyz": "1.0"}
    assert lock.drift(pins) == {"scipy": ["0.0.1", metadata.version("scipy")], "no-such-package-xyz": ["1.0", None]}


def test_lock_state_names_the_file_its_sha256_and_the_drift(tmp_path):
    (tmp_path / "constraints.txt").write_text(f"numpy=={metadata.version('numpy')}\nscipy==0.0.1\n")
    got = lock.lock_state(tmp_path)["lock"]
    assert got["sha256"] == hashlib.sha256((tmp_path / "constraints.txt").read_bytes()).hexdigest()
    assert got["drift"] == {"scipy": ["0.0.1", metadata.version("scipy")]}
    assert lock.lock_state(tmp_path / "elsewhere") == {"lock": None}


def test_a_new_record_carries_the_lock():
    from benchbench.store.records import new_record

    rec = new_record({"method": "m", "task": "t"}, {"test": {"main": 1.0}}, 0.0, "cpu")
    assert rec["lock"] == lock.lock_state()["lock"]
    assert rec["lock"]["sha256"] == hashlib.sha256((REPO / "constraints.txt").read_bytes()).hexdigest()


def test_the_committed_lock_pins_transformers_and_not_torch():
    pins = lock.read_pins(REPO / "constraints.txt")
    assert "transformers" in pins and "sentence-transformers" in pins
    assert "torch" not in pins  # torch is pinned on its own, first (a CPU wheel)
