"""Failures a run must survive or refuse, each reproduced before its fix:
NaN/Inf and wrong-shaped encoder output, untrusted model wrappers, unescaped HTML/Markdown
tables, read-only and full disks, record permissions, a missing STSb file."""

from __future__ import annotations

import errno
import json
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers import FIXTURES, local_plugin_workdir

from benchbench.cli.main import main
from benchbench.core import registry as plugins
from benchbench.core.errors import ConfigError, DataError

PLUGIN = f"""
from pathlib import Path
from dataclasses import dataclass
import sys
import numpy as np
sys.path.insert(0, {str(FIXTURES.parent)!r})
from helpers import CosineFixtureEncoder
from benchbench import Method, hookimpl

class NaNEncoder(CosineFixtureEncoder):
    fingerprint = "nan-encoder-v1"
    def encode(self, texts):
        out = super().encode(texts)
        out[[t == "b3" for t in texts]] = np.nan
        return out

class ShapeEncoder(CosineFixtureEncoder):
    fingerprint = "shape-encoder-v1"
    def encode(self, texts):
        return super().encode(texts)[:, :1].T

@dataclass
class Cfg:
    steps: int = 10

class Fixed(Method):
    name = "fixed"
    Config = Cfg
    trains = False
    default_model = None
    def train(self, corpus, ctx):
        return CosineFixtureEncoder()

class NaN(Fixed):
    def train(self, corpus, ctx):
        return NaNEncoder()

class ConstEncoder(CosineFixtureEncoder):
    fingerprint = "const-encoder-v1"
    def encode(self, texts):
        return np.ones((len(texts), 2), dtype=np.float32)

class Const(Fixed):
    def train(self, corpus, ctx):
        return ConstEncoder()

class Shape(Fixed):
    def train(self, corpus, ctx):
        return ShapeEncoder()

class Trained(Fixed):
    trains = True
    calls = 0
    def train(self, corpus, ctx):
        Trained.calls += 1
        return CosineFixtureEncoder()

@hookimpl
def benchbench_register_methods(register):
    register("fixed", Fixed)
    register("nan", NaN)
    register("shape", Shape)
    register("const", Const)
    register("trained", Trained)
    register("evil<script>|x", Fixed)

@hookimpl
def benchbench_register_tasks(register):
    register("mini", Path({str(FIXTURES / "sts_mini.toml")!r}))
"""


@pytest.fixture
def workdir(tmp_path, monkeypatch, tmp_cache):
    yield from local_plugin_workdir(tmp_path, monkeypatch, PLUGIN)


def _records(root: Path) -> list[Path]:
    return (
        [p for p in root.rglob("*.json") if ".locks" not in p.parts and "runs" not in p.parts] if root.exists() else []
    )


# ---- encoder output ---------------------------------------------------------------------------------
def test_nan_vectors_are_refused_never_stored_or_cached(workdir, tmp_cache, capsys):
    assert main(["run", "--method", "nan", "--tasks", "mini"]) == 2
    err = capsys.readouterr().err
    assert "method 'nan' (plugin " in err and "benchbench_plugin.py" in err  # the method and its plugin
    assert "'b3'" in err and "non-finite" in err  # the first bad text
    assert "Task 'sts-mini'" not in err  # not blamed on the task
    assert not _records(workdir / "results")
    assert not list(Path(tmp_cache).rglob("*.npy"))  # nothing cached for the NaN encoder


def test_wrong_shaped_output_is_blamed_on_the_method(workdir, capsys):
    assert main(["run", "--method", "shape", "--tasks", "mini"]) == 2
    err = capsys.readouterr().err
    assert "method 'shape'" in err and "returned shape (1, 2)" in err
    assert "Task 'sts-mini'" not in err


def test_undefined_score_is_a_named_error_not_a_record(workdir, capsys):
    """Constant vectors pass the encoder check but make the correlation NaN: named, never stored."""
    assert main(["run", "--method", "const", "--tasks", "mini"]) == 2
    err = capsys.readouterr().err
    assert "Task 'sts-mini' gave non-finite scores for method 'const'" in err and "test." in err
    assert not _records(workdir / "results")


def test_record_with_nan_is_never_written(tmp_path):
    from benchbench.store.results import ResultStore

    good = {
        "schema_version": 2,
        "method": "m",
        "model": "-",
        "config_hash": "abc",
        "setup": "unsupervised",
        "seed": 1,
        "task": "t",
        "task_version": 1,
        "splits": {"test": {"main_score": 0.5}},
    }
    store = ResultStore(tmp_path)
    try:
        path = store.write(good)
    except Exception as e:
        pytest.skip(f"record layout changed: {e}")
    bad = json.loads(json.dumps(good))
    bad["splits"]["test"]["main_score"] = float("nan")
    with pytest.raises(ValueError, match="JSON compliant"):
        store.write(bad)
    assert json.loads(path.read_text())["splits"]["test"]["main_score"] == 0.5  # the old record is intact
    assert not list(path.parent.glob("*.tmp"))


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_records_follow_the_umask(workdir, umask, mode):
    old = os.umask(umask)
    try:
        assert main(["run", "--method", "fixed", "--tasks", "mini"]) == 0
    finally:
        os.umask(old)
    recs = _records(workdir / "results")
    assert recs and all((p.stat().st_mode & 0o777) == mode for p in recs)


# ---- model wrappers ---------------------------------------------------------------------------------
CANARY = """
import os
class Canary:
    @classmethod
    def load(cls, encoder, path):
        open(os.environ["CANARY_FILE"], "w").write("ran")
        return encoder
def load(encoder, path):
    open(os.environ["CANARY_FILE"], "w").write("ran")
"""


@pytest.mark.parametrize(
    "loader",
    [
        "bb_canary_mod:Canary.load",
        "bb_canary_mod:load",
        "os:system",
        "builtins:eval",
        "benchbench_plugins.bertflow:torch.load",
        "benchbench_plugins.bertflow:np.load",
        "benchbench_plugins.bertflow:FlowEncoder.__init__",
        "",
        42,
    ],
)
def test_wrapper_json_cannot_run_arbitrary_code(loader, tmp_path, monkeypatch, registry):
    """benchbench_wrapper.json used to import and call whatever it named."""
    from benchbench.encode import models

    (tmp_path / "bb_canary_mod.py").write_text(CANARY)
    monkeypatch.syspath_prepend(str(tmp_path))
    canary = tmp_path / "canary"
    monkeypatch.setenv("CANARY_FILE", str(canary))
    monkeypatch.setattr(plugins, "_REGISTRY", registry)
    model = tmp_path / "model"
    model.mkdir()
    (model / models.WRAPPER_FILE).write_text(json.dumps({"loader": loader}))
    with pytest.raises(ConfigError, match="no loaded plugin registers"):
        models._apply_wrapper("ENCODER", model)
    assert not canary.exists()
    assert "bb_canary_mod" not in sys.modules


def test_registered_loader_resolves(tmp_path, monkeypatch):
    from benchbench.encode import models

    mod = type(sys)("bb_loader_plugin")
    exec(
        textwrap.dedent("""
        from benchbench import hookimpl
        def wrap(encoder, path):
            return ("wrapped", encoder, path.name)
        @hookimpl
        def benchbench_register_loaders(register):
            register("my-head", wrap)
    """),
        mod.__dict__,
    )
    reg = plugins.load_registry(extra_plugins=[("loader-plugin", mod)])
    monkeypatch.setattr(plugins, "_REGISTRY", reg)
    model = tmp_path / "model"
    model.mkdir()
    (model / models.WRAPPER_FILE).write_text(json.dumps({"loader": "my-head"}))
    assert models._apply_wrapper("ENC", model) == ("wrapped", "ENC", "model")
    assert reg.owner[("loaders", "my-head")] == "loader-plugin"


def test_builtin_legacy_wrapper_names_still_load(registry):
    """Folders saved by 0.1's bertflow/trans-encoder name a plugin classmethod: a fixed alias of the
    name the plugin registers now; any other "module:Class.method" is refused, never imported."""
    fn = registry.wrapper_loader("benchbench_plugins.bertflow:FlowEncoder.load_flow", "m")
    assert fn.__func__.__qualname__ == "FlowEncoder.load_flow"
    fn = registry.wrapper_loader("benchbench_plugins.trans_encoder:TransEncoderResult.reload", "m")
    assert fn.__func__.__qualname__ == "TransEncoderResult.reload"
    with pytest.raises(ConfigError, match="no loaded plugin"):
        registry.wrapper_loader("benchbench_plugins.bertflow:BertFlow.train", "m")


# ---- escaping ---------------------------------------------------------------------------------------
def test_table_html_escapes_everything_and_markdown_pipes(workdir, capsys):
    assert main(["run", "--method", "evil<script>|x", "--tasks", "mini"]) == 0
    capsys.readouterr()
    assert main(["table", "--format", "html"]) == 0
    html = capsys.readouterr().out
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert main(["table", "--format", "github"]) == 0
    md = capsys.readouterr().out
    rows = [ln for ln in md.splitlines() if ln.startswith("|")]
    header_cells = rows[0].count("|") - rows[0].count("\\|")
    assert rows and all(r.count("|") - r.count("\\|") == header_cells for r in rows), md
    assert "evil&lt;script&gt;\\|x" in md


def test_escape_functions():
    from benchbench.report.escaping import escape_html, escape_md

    assert escape_html('<a href="x">&\'') == "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"
    assert escape_md("a|b\nc\\") == "a\\|b c\\\\"
    from benchbench.report.leaderboard import render

    out = render(["m", "t"], [["<b>", "1"]], ["note <i>"], fmt="html", title="T<&>")
    assert "<b>" not in out and "<i>" not in out and "T&lt;&amp;&gt;" in out


# ---- disks ------------------------------------------------------------------------------------------
def _deny_writes_under(monkeypatch, root: Path, err: int):
    """Writes under ``root`` fail with ``err`` (a read-only or full disk; chmod does not stop root)."""
    import tempfile

    real = tempfile.mkstemp

    def mkstemp(*a, dir=None, **kw):
        if dir is not None and Path(dir).resolve().is_relative_to(root.resolve()):
            raise OSError(err, os.strerror(err), str(dir))
        return real(*a, dir=dir, **kw)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)


@pytest.mark.parametrize("err, words", [(errno.EROFS, "not a writable folder"), (errno.ENOSPC, "no space left")])
def test_unwritable_output_fails_before_any_training(err, words, workdir, monkeypatch, capsys):
    out = workdir / "results"
    out.mkdir()
    _deny_writes_under(monkeypatch, out, err)
    if os.geteuid() != 0 and err == errno.EROFS:
        monkeypatch.undo()
        out.chmod(0o555)
    assert main(["run", "--method", "trained", "--tasks", "mini"]) == 2
    msg = capsys.readouterr().err
    assert words in msg and str(out) in msg and "--output" in msg
    assert sys.modules["benchbench_local_plugin"].Trained.calls == 0  # nothing trained or evaluated
    out.chmod(0o755)


def test_full_cache_disk_warns_and_runs_uncached(workdir, tmp_cache, monkeypatch, capsys, caplog):
    """A failed cache write used to abort the run and leave its partial .tmp shard behind."""

    real_save = np.save

    def save(f, arr, *a, **kw):  # half a shard written, then the disk is full
        f.write(b"\x93NUMPY partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", save)
    assert main(["run", "--method", "fixed", "--tasks", "mini"]) == 0
    monkeypatch.setattr(np, "save", real_save)
    assert _records(workdir / "results")
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "no space left" in warned and str(tmp_cache) in warned and "Free space" in warned
    # no partial shard left behind (the plugin-name manifest, written before the run, is not a shard)
    left = [p for p in Path(tmp_cache).rglob("*") if p.is_file() and not p.name.startswith("registry-")]
    assert not left, left


def test_unwritable_cache_dir_is_a_warning(workdir, tmp_cache, monkeypatch, caplog):
    Path(tmp_cache).mkdir(parents=True, exist_ok=True)
    _deny_writes_under(monkeypatch, Path(tmp_cache), errno.EROFS)
    assert main(["run", "--method", "fixed", "--tasks", "mini"]) == 0
    assert _records(workdir / "results")
    assert any("running without the embedding cache" in r.getMessage() for r in caplog.records)


def test_cache_put_failure_removes_temp_files(tmp_path, monkeypatch):
    from benchbench.encode.cache import EmbeddingCache

    cache = EmbeddingCache(tmp_path)
    calls = []

    def save(f, arr, *a, **kw):
        calls.append(1)
        if len(calls) == 2:  # the vectors file landed, the keys file fails
            raise OSError(errno.ENOSPC, "No space left on device")
        np.lib.format.write_array(f, np.asanyarray(arr))

    monkeypatch.setattr(np, "save", save)
    with pytest.raises(OSError):
        cache.put("fp", [b"k" * 16], np.ones((1, 2), dtype=np.float32))
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_writable_check_names_enospc(tmp_path, monkeypatch):
    from benchbench.store import data

    def write(fd, b):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(data.os, "write", write)
    with pytest.raises(DataError, match=r"--output: no space left on the device holding .*Free space"):
        data.ensure_writable_dir(tmp_path / "out", "--output")
    monkeypatch.undo()
    assert not [p for p in (tmp_path / "out").iterdir()]  # the probe file is gone


# ---- missing data -------------------------------------------------------------------------------------
def test_missing_stsb_says_sha256_and_where(tmp_path, monkeypatch, tmp_cache, capsys):
    monkeypatch.setattr(plugins, "_REGISTRY", None)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    assert main(["run", "--method", "sbert", "--model", "tiny-bert", "--tasks", "stsb", "--data-dir", "d"]) == 2
    err = capsys.readouterr().err
    reg = plugins.get_registry()
    entry = reg.task("stsb").files["sts/STSBenchmark/sts-test.csv"]
    assert entry.sha256 and entry.sha256 in err
    assert "put it at d/sts/STSBenchmark/sts-test.csv" in err and "no public download" in err
    plugins.reset_registry()


# ---- drills (issue 50): ENOSPC anywhere is one line naming the path and the space needed ----------------
SAVER_PLUGIN = f"""
import sys
from dataclasses import dataclass
import torch
sys.path.insert(0, {str(FIXTURES.parent)!r})
from helpers import CosineFixtureEncoder
from benchbench import Method, hookimpl

class Saved(CosineFixtureEncoder):
    def __init__(self):
        super().__init__()
        self.weights = torch.zeros(2_500_000)  # 10 MB of float32
    def save(self, path):
        from safetensors.torch import save_file
        save_file({{"w": self.weights}}, str(path / "model.safetensors"))

@dataclass
class Cfg:
    steps: int = 1

class Saver(Method):
    name = "saver"
    Config = Cfg
    trains = True
    default_model = None
    def train(self, corpus, ctx):
        return Saved()

@hookimpl
def benchbench_register_methods(register):
    register("saver", Saver)

@hookimpl
def benchbench_register_tasks(register):
    from pathlib import Path
    register("mini", Path({str(FIXTURES / "sts_mini.toml")!r}))
"""


@pytest.fixture
def saver_workdir(tmp_path, monkeypatch, tmp_cache):
    yield from local_plugin_workdir(tmp_path, monkeypatch, SAVER_PLUGIN)


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err, err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("benchbench: error:")]
    return line


def test_a_full_disk_while_saving_an_encoder_names_the_folder_and_the_space(saver_workdir, monkeypatch, capsys):
    """Before: a raw ``SafetensorError: Error while serializing: I/O error: No space left on device (os error
    28)`` traceback, no path. Now one line: the encoder folder, about the bytes its tensors need, the bytes
    free there, and what to do; no record is stored."""
    import safetensors.torch
    from safetensors import SafetensorError

    def full(tensors, filename, *a, **kw):
        Path(filename).write_bytes(b"partial")
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    assert main(["run", "--method", "saver", "--tasks", "mini"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    (folder,) = (saver_workdir / "results").rglob("encoder")
    assert f"{folder.absolute()}: no space left on the device while saving the saver encoder" in line, line
    assert "needs about 10.0 MB" in line and " MB free there" in line and "Free space there" in line, line
    assert "SafetensorError" not in line
    assert not _records(saver_workdir / "results")


def test_a_full_disk_while_writing_a_record_names_the_record_and_the_space(workdir, monkeypatch, capsys):
    """Before: the OSError of the record write surfaced without the record's path or the space needed."""
    from contextlib import contextmanager

    from benchbench.store import results

    @contextmanager
    def full(path, mode="wb", *, root=None):
        raise OSError(errno.ENOSPC, "No space left on device")
        yield

    monkeypatch.setattr(results, "atomic_writer", full)
    assert main(["run", "--method", "fixed", "--tasks", "mini"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "no space left on the device while writing this result record" in line and ".json:" in line, line
    assert "needs about" in line and "free there" in line and "run the same command" in line, line
