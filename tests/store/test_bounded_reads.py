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


@pytest.mark.parametrize("value", ["-5", "0", "lots", "1e400", "nan", "inf", "1e30G"])
def test_a_bad_limit_variable_is_named(value, tmp_path, monkeypatch):
    """A bad value is the knob's error (ConfigError naming the variable and its value), never an
    ``OverflowError`` (``1e400``) or a data file's fault."""
    monkeypatch.setenv(ENV, value)
    with pytest.raises(ConfigError, match=rf"{ENV}={value!r} is not allowed.*positive byte count"):
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


# --- drills (issue 50): the same limit and message for every data file, one step away from the task files --
def _hf_copy(root: Path, files: dict[str, bytes]) -> Path:
    """A local HF copy (``hf/<id>/<revision>``) of an STS dataset whose test split is ``files``."""
    folder = root / "hf" / "org" / "sts" / ("a" * 40)
    for rel, payload in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(payload)
    paths = "".join(f"    path: {rel}\n" for rel in files)
    (folder / "README.md").write_text(
        f"---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n{paths}---\n"
    )
    return folder


def _hf_split(root: Path, tmp_path: Path, monkeypatch, lazy: bool = False):
    pytest.importorskip("datasets")
    import datasets

    from benchbench.store.hf import HFData

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    store = data.DataStore(root, cache_dir=tmp_path / "cache", allow_download=False)
    hf = HFData(store, "my-sts", "org/sts", "a" * 40)
    return hf.split if lazy else hf.split(None, "test")


ROW = b'{"sentence1": "a man plays", "sentence2": "a man sings", "score": 2.5}\n'


def test_an_hf_copy_gzip_bomb_stops_at_the_limit(tmp_path, monkeypatch):
    """Before: an ``hf-*`` copy's .jsonl.gz was handed to ``datasets`` and inflated whole, ignoring the limit
    (a 400 KB file inflating to 400 MB peaked at 1.37 GB). Now each file of the copy is counted as it
    inflates before ``datasets`` sees it: refused at the limit, naming the file and the variable, with
    Python's peak a few MiB."""
    bomb = gzip.compress(ROW * (BOMB_BYTES // len(ROW)), 9)
    root = tmp_path / "data"
    folder = _hf_copy(root, {"default/test.jsonl.gz": bomb})
    assert len(bomb) < 200_000
    monkeypatch.setenv(ENV, "1M")
    split = _hf_split(root, tmp_path, monkeypatch, lazy=True)  # imports done: the peak below is the read's
    tracemalloc.start()
    try:
        with pytest.raises(DataError) as e:
            split(None, "test")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    msg = str(e.value)
    assert str(folder / "default/test.jsonl.gz") in msg and "inflates past" in msg, msg
    assert "read limit of 1,048,576 bytes" in msg and ENV in msg, msg
    assert peak < 12 << 20, f"peak {peak / 2**20:.1f} MiB"


def test_an_hf_copy_plain_file_over_the_limit_is_refused_before_reading(tmp_path, monkeypatch):
    root = tmp_path / "data"
    _hf_copy(root, {"default/test.jsonl": ROW * 20_000})  # 1.4 MB
    monkeypatch.setenv(ENV, "1M")
    with pytest.raises(DataError, match=r"test\.jsonl: holds 1,4\d\d,\d\d\d bytes, over the read limit of 1,048,576"):
        _hf_split(root, tmp_path, monkeypatch)


def test_an_hf_copy_within_the_limit_reads_as_before(tmp_path, monkeypatch):
    root = tmp_path / "data"
    _hf_copy(root, {"default/test.jsonl.gz": gzip.compress(ROW * 5)})
    monkeypatch.setenv(ENV, "1M")
    assert len(_hf_split(root, tmp_path, monkeypatch)) == 5


@pytest.mark.parametrize("kind", ["parquet", "arrow-file", "arrow-stream"])
def test_a_columnar_file_is_bounded_by_what_it_decodes_to(kind, tmp_path, monkeypatch):
    """Dictionary encoding and compression let a 10 KB parquet or Arrow file decode to 14 MB: neither its
    size nor a parquet footer bounds it, so it is counted batch by batch as it decodes."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table({"s": ["same sentence " * 50] * 20_000})
    f = tmp_path / ("t.parquet" if kind == "parquet" else "t.arrow")
    if kind == "parquet":
        pq.write_table(table, f, compression="zstd")
    else:
        opts = pa.ipc.IpcWriteOptions(compression="zstd")
        new = pa.ipc.new_file if kind == "arrow-file" else pa.ipc.new_stream
        with new(str(f), table.schema, options=opts) as w:
            w.write_table(table, max_chunksize=1000)
    assert f.stat().st_size < 100_000
    monkeypatch.setenv(ENV, "1M")
    with pytest.raises(DataError, match=rf"{f.name}: inflates past [\d,]+ bytes.*read limit of 1,048,576"):
        data.check_size(f)
    monkeypatch.setenv(ENV, "20M")
    assert data.check_size(f) > 14_000_000


def test_a_zip_bomb_stops_at_the_limit(tmp_path, monkeypatch):
    import zipfile

    f = tmp_path / "b.zip"
    with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("x.jsonl", b"\0" * BOMB_BYTES)
    monkeypatch.setenv(ENV, "1M")
    with pytest.raises(DataError, match=r"b\.zip: holds 25,165,824 bytes, over the read limit of 1,048,576"):
        data.check_size(f)
    with pytest.raises(DataError, match=r"b\.zip: .*read limit of 1,048,576.*" + ENV):
        data.read_bytes(f)


def test_import_mteb_of_a_huge_json_is_refused_before_reading(tmp_path, monkeypatch, capsys):
    """Before: ``import-mteb`` read a 400 MB .json whole (880 MB peak) and imported it. Now an MTEB result
    file goes through the same reader, under a 64 MiB default (a result file is kilobytes) or the
    variable: refused before it is read, nothing imported."""
    import json

    d = tmp_path / "results" / "org__m" / "rev"
    d.mkdir(parents=True)
    doc = {"task_name": "STSBenchmark", "scores": {"test": [{"hf_subset": "default", "main_score": 0.8}]}}
    doc["padding"] = "x" * 2_000_000
    (d / "STSBenchmark.json").write_text(json.dumps(doc))
    monkeypatch.setenv(ENV, "1M")
    out = tmp_path / "out"
    assert main(["import-mteb", str(d / "STSBenchmark.json"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "STSBenchmark.json: holds 2,0" in err and "read limit of 1,048,576 bytes" in err and ENV in err, err
    assert not out.exists()
    monkeypatch.delenv(ENV)
    assert data.read_limit(d / "STSBenchmark.json", default=(64 << 20, "x"))[0] == 64 << 20


def test_an_overflowing_limit_is_the_variables_error_not_the_tasks(workdir, monkeypatch, capsys):
    """Before: ``BENCHBENCH_MAX_READ_BYTES=1e400`` failed the run as "Task 't' ... failed on split 'test':
    OverflowError: cannot convert float infinity to integer"."""
    _spec(workdir, "d/pairs.tsv", b"a\tb\t1\nc\td\t2\n")
    monkeypatch.setenv(ENV, "1e400")
    assert _run(workdir, monkeypatch) == 2
    err = capsys.readouterr().err
    assert f"{ENV}='1e400' is not allowed" in err and "OverflowError" not in err and "failed on split" not in err, err
    assert _no_record(workdir)


# --- drills (session 22): a file with no size to bound it (a device behind a link, a FIFO), or a size that lies --
DEVICE = Path("/dev/null")  # stands in for /dev/zero: the same refusal (a character device), and a test run
# against code without it ends at once instead of reading zeros without end


@pytest.mark.skipif(not DEVICE.exists(), reason="no /dev/null")
def test_a_record_that_is_a_device_or_over_the_limit_is_left_out_and_named(workdir, monkeypatch, capsys, caplog):
    """Drill: among good records, ``x.json -> /dev/zero`` and a 3 GB (sparse) ``y.json``. The bug: the record
    reader read any ``*.json`` under the results whole, with no limit: ``benchbench table`` read /dev/zero
    until memory ran out, and 3 GB into memory. Now a record is read through the bounded reader (64 MiB, or
    the variable): both are left out with a warning naming each file and why, and the good rows stay."""
    import logging

    _spec(workdir, "d/pairs.tsv", b"a0\tb0\t1\na1\tb1\t2\na3\tb3\t3\n")  # the fixture encoder's texts
    assert _run(workdir, monkeypatch) == 0
    bad = workdir / "out" / "fixed" / "bad"
    bad.mkdir()
    (bad / "x.json").symlink_to(DEVICE)
    with open(bad / "y.json", "wb") as f:
        f.truncate(100 << 20)  # sparse: over the 64 MiB a record may hold, on no disk space
    capsys.readouterr()
    with caplog.at_level(logging.WARNING):
        assert main(["table", "--output", str(workdir / "out"), "--resamples", "0"]) == 0
    assert "| fixed " in capsys.readouterr().out  # the good record's row
    assert f"{bad / 'x.json'}: is a character device, through a link to {DEVICE}" in caplog.text, caplog.text
    assert f"{bad / 'y.json'}: holds 104,857,600 bytes, over the read limit of 67,108,864" in caplog.text


@pytest.mark.skipif(not DEVICE.exists(), reason="no /dev/null")
def test_an_hf_copy_file_that_is_a_device_is_refused_naming_it(tmp_path, monkeypatch):
    """Drill: an ``hf-*`` copy's ``default/test.jsonl -> /dev/zero``. The bug: the copy's size check and its
    fingerprint passed over anything that is not a regular file, and ``datasets`` read it without end (a
    FIFO there: blocked for ever). Now every entry of the copy but a folder must be a regular file."""
    root = tmp_path / "data"
    folder = _hf_copy(root, {"default/test.jsonl": ROW * 5})
    (folder / "default" / "test.jsonl").unlink()
    (folder / "default" / "test.jsonl").symlink_to(DEVICE)
    with pytest.raises(DataError, match=rf"test\.jsonl: is a character device, through a link to {DEVICE}"):
        _hf_split(root, tmp_path, monkeypatch)
    with pytest.raises(DataError, match="not a regular file"):
        data.read_bytes(folder / "default" / "test.jsonl")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="no procfs")
def test_a_read_never_returns_more_than_the_limit_whatever_the_size_said():
    """A file whose size says 0 yet holds bytes (procfs; a file growing as it is read) was read whole once
    its size passed the check: the read itself now stops one byte past the limit."""
    assert Path("/proc/self/status").stat().st_size == 0
    with pytest.raises(DataError, match=r"status: holds at least 101 bytes, over the read limit of 100 bytes"):
        data.read_bytes("/proc/self/status", limit=100)
    assert data.read_bytes("/proc/self/status", limit=1 << 20).startswith(b"Name:")


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_a_task_file_that_is_a_device_or_a_pipe_is_named_as_such_not_as_missing(kind, workdir, monkeypatch, capsys):
    """A declared task file replaced by a link to ``/dev/null`` or by a FIFO: the run stops at once with the
    one not-a-regular-file message naming the path (it used to say "missing data files ... put it at" the
    very path that holds it); nothing is stored."""
    import os

    _spec(workdir, "d/in.tsv", b"a\tb\t1.0\n")
    f = workdir / "data" / "d" / "in.tsv"
    f.unlink()
    if kind == "device":
        f.symlink_to("/dev/null")
    else:
        os.mkfifo(f)
    t0 = time.perf_counter()
    assert _run(workdir, monkeypatch) == 2
    err = capsys.readouterr().err
    what = "a character device, through a link to /dev/null" if kind == "device" else "a FIFO (named pipe)"
    assert f"{f}: is {what}, not a regular file" in err and "missing" not in err, err
    assert time.perf_counter() - t0 < 60 and _no_record(workdir)
