"""A gzip bomb named with its sha256 in a task spec was decompressed whole (a
9.4 MB .gz inflating to 2 GiB ran 47 s and peaked at 4.75 GB before a parse error), and NUL bytes in a
data file were accepted and changed the score. Reading now stops at a limit derived from the spec (a
declared ``size``, else 20x the compressed size within a floor and a cap, else the environment's
``BENCHBENCH_MAX_READ_BYTES``) with an error naming the file and the limit; a NUL is a located error."""

from __future__ import annotations

import gzip
import hashlib
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest
from helpers import FIXED_METHOD_PLUGIN, local_plugin_workdir

from benchbench.cli.main import main
from benchbench.core import registry as plugins
from benchbench.core.errors import ConfigError, DataError
from benchbench.core.tasks import load_spec_file
from benchbench.store import data

PLUGIN = FIXED_METHOD_PLUGIN

ENV = "BENCHBENCH_MAX_READ_BYTES"  # spelt out: the documented name, not whatever data.py holds
BOMB_BYTES = 24 << 20  # 24 MiB of zeros: about 24 KB compressed


@pytest.fixture
def workdir(tmp_path, monkeypatch, tmp_cache):
    monkeypatch.delenv(plugins.TASK_PATH_ENV, raising=False)
    monkeypatch.delenv(ENV, raising=False)
    yield from local_plugin_workdir(tmp_path, monkeypatch, PLUGIN)
    getattr(data, "_DECLARED_SIZES", {}).clear()


def _spec(workdir: Path, rel: str, payload: bytes, extra: str = "") -> Path:
    """An STS17-format task over one data file ``rel`` (score inline), pinned by its sha256."""
    f = workdir / "data" / rel
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(payload)
    sha = hashlib.sha256(payload).hexdigest()
    spec = workdir / "specs" / "t.toml"
    spec.parent.mkdir(exist_ok=True)
    spec.write_text(
        textwrap.dedent(
            f"""
            [[task]]
            name = "t"
            kind = "sts"
            main_metric = "spearman"
            [task.params]
            format = "sts17"
            input = "{rel}"
            gold = ""
            [task.files]
            "{rel}" = {{ sha256 = "{sha}"{extra} }}
            """
        )
    )
    return spec


def _run(workdir: Path, monkeypatch) -> int:
    monkeypatch.setenv(plugins.TASK_PATH_ENV, str(workdir / "specs" / "t.toml"))
    out = ["--data-dir", str(workdir / "data"), "--output", str(workdir / "out")]
    return main(["run", "--method", "fixed", "--tasks", "t", *out])


def _no_record(workdir: Path) -> bool:
    out = workdir / "out"
    return not out.exists() or not [p for p in out.rglob("*.json") if "runs" not in p.parts]


def test_gzip_bomb_stops_at_the_limit_with_bounded_memory(workdir, monkeypatch, capsys):
    """The whole file used to be inflated (here 24 MiB; a reported one 2 GiB) before any check. Now the
    read stops past the lowered limit (1 MiB): the error names the file, the limit and its source,
    and Python's peak allocation stays a few MiB, far under the bomb's size."""
    _spec(workdir, "bomb/bomb.tsv.gz", gzip.compress(b"\0" * BOMB_BYTES, 9))
    assert (workdir / "data/bomb/bomb.tsv.gz").stat().st_size < 100_000
    monkeypatch.setenv(ENV, "1M")
    assert _run(workdir, monkeypatch) == 2  # once to import what a run imports: the peak below is the read's
    capsys.readouterr()
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        rc = _run(workdir, monkeypatch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    err = capsys.readouterr().err
    assert rc == 2
    assert "bomb.tsv.gz" in err and "read limit of 1,048,576 bytes" in err and ENV in err, err
    assert peak < 12 << 20, f"peak {peak / 2**20:.1f} MiB while reading a 24 MiB bomb under a 1 MiB limit"
    assert time.perf_counter() - t0 < 60
    assert _no_record(workdir)


def test_the_declared_size_in_the_spec_is_the_limit(workdir, monkeypatch, capsys):
    payload = gzip.compress(b"a\tb\t1\n" * 50_000)  # 300,000 bytes inflated
    _spec(workdir, "d/pairs.tsv.gz", payload, extra=", size = 1000")
    assert _run(workdir, monkeypatch) == 2
    err = capsys.readouterr().err
    assert "pairs.tsv.gz" in err and "read limit of 1,000 bytes" in err and "task spec declares" in err, err


def test_a_declared_size_that_fits_reads_as_before(workdir, monkeypatch):
    rows = "".join(f"a{i}\tb{i}\t{i}\n" for i in range(5)).encode()
    _spec(workdir, "d/pairs.tsv.gz", gzip.compress(rows), extra=f", size = {len(rows)}")
    assert _run(workdir, monkeypatch) == 0


def test_a_plain_file_over_the_limit_is_refused_before_reading(tmp_path, monkeypatch):
    f = tmp_path / "big.tsv"
    f.write_bytes(b"x" * 5000)
    monkeypatch.setenv(ENV, "4K")
    with pytest.raises(DataError, match=r"big\.tsv: holds 5,000 bytes, over the read limit of 4,096 bytes"):
        data.read_lines(f)


def test_default_limit_follows_the_compressed_size(tmp_path, monkeypatch):
    """20x the compressed size, at least 64 MiB, at most 4 GiB: real task data inflates 3-4x."""
    monkeypatch.delenv(ENV, raising=False)
    small, mid, huge = tmp_path / "s.gz", tmp_path / "m.gz", tmp_path / "h.gz"
    small.write_bytes(b"0" * 1000)
    with open(mid, "wb") as f:
        f.truncate(10_000_000)
    with open(huge, "wb") as f:
        f.truncate(1 << 30)
    assert data.read_limit(small)[0] == 64 << 20
    assert data.read_limit(mid)[0] == 200_000_000
    assert data.read_limit(huge)[0] == 4 << 30
    assert data.read_limit(tmp_path / "plain.txt")[0] == 4 << 30


@pytest.mark.parametrize("value", ["-5", "0", "lots"])
def test_a_bad_limit_variable_is_named(value, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, value)
    with pytest.raises(DataError, match=ENV):
        data.read_limit(tmp_path / "x.gz")


@pytest.mark.parametrize("size", ["0", "-1", '"10"', "true", "1.5"])
def test_a_bad_declared_size_is_refused_at_spec_load(size, tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(f'[[task]]\nname = "t"\nkind = "sts"\n[task.files]\n"a/b.txt" = {{ size = {size} }}\n')
    with pytest.raises(ConfigError, match=r"s\.toml.*files\.'a/b\.txt'\.size must be a positive number"):
        load_spec_file(spec)


@pytest.mark.parametrize("gz", [False, True])
def test_a_nul_byte_in_a_task_file_is_a_located_error(gz, workdir, monkeypatch, capsys):
    """A NUL used to be read into a sentence and scored (a score moved from 50.08 to 50.73)."""
    rows = b"a0\tb0\t1\na1\tb1\t2\na2\x00\tb2\t3\na3\tb3\t4\n"
    rel = "d/pairs.tsv.gz" if gz else "d/pairs.tsv"
    _spec(workdir, rel, gzip.compress(rows) if gz else rows)
    assert _run(workdir, monkeypatch) == 2
    err = capsys.readouterr().err
    assert f"{Path(rel).name}:3: a NUL byte" in err, err
    assert _no_record(workdir)
