"""Task specs and the files they name never lie; each failure below was reproduced before its fix:

4. a task spec could write outside the data folder (``..`` or absolute data paths, ``file://`` URLs);
9. readers split rows at U+0085/U+2028, accepted out-of-range STS gold scores and extra columns, and
   ``--set temperature=nan`` passed option validation;
10. a TOML syntax error in one task spec stopped every command, ``table`` included.

Where it matters the check goes through the path a run takes (``benchbench.cli.main.main``), and the
real data (``BENCHBENCH_DATA``) pins that no existing task reads one row or one score differently."""

from __future__ import annotations

import dataclasses
import http.server
import logging
import textwrap
import threading
import types
from functools import partial
from pathlib import Path

import pytest
from conftest import REPO
from helpers import FIXTURES, fixture_adapter, local_plugin_workdir

from benchbench.cli.main import main
from benchbench.core import registry as plugins
from benchbench.core.errors import ConfigError, DataError, PluginError
from benchbench.core.methods import build_config
from benchbench.core.tasks import SpecParseError, load_spec_file
from benchbench.store.data import DataStore, FileEntry, read_lines

PLUGIN = f"""
import sys
from dataclasses import dataclass
sys.path.insert(0, {str(FIXTURES.parent)!r})
from helpers import CosineFixtureEncoder
from benchbench import Method, hookimpl

@dataclass
class Cfg:
    temperature: float = 0.05
    weights: list[float] | None = None

class Fixed(Method):
    name = "fixed"
    Config = Cfg
    trains = False
    default_model = None
    def train(self, corpus, ctx):
        return CosineFixtureEncoder()

@hookimpl
def benchbench_register_methods(register):
    register("fixed", Fixed)
"""


@pytest.fixture
def workdir(tmp_path, monkeypatch, tmp_cache):
    """A working dir with a training-free ``fixed`` method (the fixture cosine encoder), fresh registry."""
    monkeypatch.delenv(plugins.TASK_PATH_ENV, raising=False)
    yield from local_plugin_workdir(tmp_path, monkeypatch, PLUGIN)


@pytest.fixture
def http_server(tmp_path):
    """Serves ``tmp_path/www`` on 127.0.0.1 (what a user online downloads from)."""
    www = tmp_path / "www"
    www.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # a request would otherwise print to the captured stderr
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(www)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield www, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _write(p: Path, text: str | bytes) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


def _run(task: str, data: Path, out: Path, *extra: str) -> int:
    return main(
        ["run", "--method", "fixed", "--tasks", task, "--data-dir", str(data), "--output", str(out), "--json", *extra]
    )


def _sts_spec(path: Path, name: str, extra: str = "") -> Path:
    """A SentEval-format STS task over ``<data>/mine/STS.{input,gs}.X.txt``."""
    return _write(
        path,
        f"""
        [[task]]
        name = "{name}"
        kind = "sts"
        main_metric = "spearman"
        {extra}
        [task.params]
        format = "senteval-sts"
        dir = "mine"
        subsets = ["X"]
        """,
    )


# ---- 4. a spec cannot make a download write, or a reader read, outside the data folder ---------------
@pytest.mark.parametrize(
    "files_line, url_base, key",
    [
        ('"../../escaped.txt" = { sha256 = "00" }', "https://example.org/x", "files.'../../escaped.txt'"),
        ('"sts/../../escaped.txt" = { sha256 = "00" }', "https://example.org/x", "files.'sts/../../escaped.txt'"),
        ('"/tmp/escaped.txt" = { sha256 = "00" }', "https://example.org/x", "files.'/tmp/escaped.txt'"),
        ('"C:/escaped.txt" = { sha256 = "00" }', "https://example.org/x", "files.'C:/escaped.txt'"),
        ('"sts\\\\..\\\\escaped.txt" = { sha256 = "00" }', "https://example.org/x", "files."),
        ('"sts/a.txt" = { sha256 = "00" }', "file:///etc", "url_base = 'file:///etc'"),
        ('"sts/a.txt" = { sha256 = "00" }', "ftp://example.org/x", "url_base = 'ftp://example.org/x'"),
        ('"sts/a.txt" = { url = "file:///etc/hostname" }', "", "files.'sts/a.txt'.url = 'file:///etc/hostname'"),
        ('"sts/a.txt" = { url = "data:text/plain,x" }', "", "files.'sts/a.txt'.url"),
    ],
)
def test_unsafe_data_paths_and_urls_are_refused_at_spec_load(tmp_path, files_line, url_base, key):
    base = f'url_base = "{url_base}"' if url_base else ""
    spec = _write(
        tmp_path / "evil.toml",
        f'[[task]]\nname = "evil"\nkind = "sts"\n{base}\n[task.files]\n{files_line}\n',
    )
    with pytest.raises(ConfigError) as e:
        load_spec_file(spec)
    msg = str(e.value)
    assert "evil.toml" in msg and key in msg and "refused" in msg, msg


def test_unsafe_train_path_and_defaults_are_refused(tmp_path):
    spec = _write(
        tmp_path / "t.toml", '[[task]]\nname = "t"\nkind = "sts"\ntrain = { source = "file", path = "../x" }\n'
    )
    with pytest.raises(ConfigError, match=r"t\.toml.*train\.path = '\.\./x' is refused"):
        load_spec_file(spec)
    spec = _write(tmp_path / "d.toml", '[defaults]\nurl_base = "file:///tmp"\n[[task]]\nname = "t"\nkind = "sts"\n')
    with pytest.raises(ConfigError, match=r"d\.toml.*url_base = 'file:///tmp' is refused"):
        load_spec_file(spec)


def test_builtin_specs_pass_the_path_checks():
    """Every shipped spec keeps loading: its paths are relative and its URLs https."""
    for f in sorted((REPO / "tasks").glob("*.toml")):
        for t in load_spec_file(f)[0]:
            assert all(e.url is None or e.url.startswith("https://") for e in t.files.values()), t.name


def test_run_with_an_escaping_spec_writes_nothing_outside(workdir, http_server, monkeypatch, capsys):
    """The bug: the run downloaded the file to ``<cache>/../../sts-test.csv``, outside the cache."""
    www, url = http_server
    (www / "a.txt").write_text("g\tf\ty\t1\t4.0\ta0\tb0\ng\tf\ty\t2\t1.0\ta1\tb1\n")
    spec = _write(
        workdir / "specs" / "evil.toml",
        f"""
        [[task]]
        name = "evil"
        kind = "sts"
        url_base = "{url}"
        params = {{ format = "stsb", dir = "../.." }}
        [task.files]
        "../../sts-test.csv" = {{ remote = "a.txt" }}
        """,
    )
    monkeypatch.setenv(plugins.TASK_PATH_ENV, str(spec))
    (workdir / "data").mkdir()
    assert _run("evil", workdir / "data", workdir / "out") == 2
    err = capsys.readouterr().err
    assert "evil.toml" in err and "files.'../../sts-test.csv'" in err and "refused" in err, err
    assert not [p for p in workdir.rglob("sts-test.csv")] and not (workdir.parent / "sts-test.csv").exists()


def test_datastore_confines_paths_and_downloads(http_server, tmp_path):
    """The last guard, for paths a plugin or a spec's params build: never outside the roots, never file://."""
    www, url = http_server
    (www / "a.txt").write_text("x\n")
    (tmp_path / "data").mkdir()
    store = DataStore(tmp_path / "data", cache_dir=tmp_path / "cache")
    for rel in ("../escaped.txt", "/tmp/escaped.txt", "a/../../escaped.txt"):
        with pytest.raises(DataError, match=r"refused"):
            store.fetch(FileEntry(rel, None, f"{url}/a.txt"))
        with pytest.raises(DataError, match=r"refused"):
            store.exists(rel)
    src = _write(tmp_path / "src.txt", "local secret\n")
    with pytest.raises(DataError, match=r"file://.*refused.*http"):
        store.fetch(FileEntry("sts/a.txt", None, src.as_uri()))
    assert not list(tmp_path.rglob("escaped.txt")) and not (tmp_path / "cache" / "sts" / "a.txt").exists()
    assert store.fetch(FileEntry("sts/a.txt", None, f"{url}/a.txt")) == tmp_path / "cache" / "sts" / "a.txt"


def test_adapter_params_cannot_leave_the_data_dir(registry, tmp_path):
    adapter = fixture_adapter(registry, "stsb", tmp_path, dir="../..")
    with pytest.raises(ConfigError, match=r"'stsb'.*sts\.toml.*'\.\./\.\./sts-test\.csv'.*refused"):
        adapter.load("test")
    with pytest.raises(ConfigError, match=r"refused"):
        adapter.missing_files("test")


# ---- 9a. rows split at \n only ---------------------------------------------------------------------
@pytest.mark.parametrize("sep", ["\u2028", "\u0085", "\u2029", "\x0c", "\x0b", "\x1c", "\r"])
def test_read_lines_splits_at_newline_only(tmp_path, sep):
    p = _write(tmp_path / "f.txt", f"a{sep}b\tc\r\nd\n".encode())
    assert read_lines(p) == [f"a{sep}b\tc", "d"]


def test_read_lines_keeps_crlf_files_and_empty_lines(tmp_path):
    assert read_lines(_write(tmp_path / "a.txt", b"x\r\n\r\ny")) == ["x", "", "y"]
    assert read_lines(_write(tmp_path / "b.txt", b"")) == []
    assert read_lines(_write(tmp_path / "c.txt", b"\n")) == [""]


@pytest.mark.parametrize("sep", ["\u2028", "\u0085"])
def test_sts_sentence_with_a_line_separator_is_one_row(workdir, monkeypatch, sep):
    """The bug: the pair was split in two and reported as a short row (``too few columns``)."""
    monkeypatch.setenv(plugins.TASK_PATH_ENV, str(_sts_spec(workdir / "specs" / "sep.toml", "sts-sep")))
    data = workdir / "data"
    _write(data / "mine" / "STS.input.X.txt", f"a0 one{sep}two\tb0\na1\tb1\na2\tb2\na3\tb3\na4\tb4\n".encode())
    _write(data / "mine" / "STS.gs.X.txt", b"1\n2\n3\n4\n5\n")
    adapter = fixture_adapter(plugins.get_registry(), "sts-sep", data)
    a, b, y = adapter.load("test")["X"]
    assert len(a) == 5 and a[0] == "a0 one two" and list(y) == [1, 2, 3, 4, 5]
    assert _run("sts-sep", data, workdir / "out") == 0


def test_senteval_and_analogy_rows_are_not_split(tmp_path):
    from benchbench.evaluate.adapters import analogy, senteval

    sst = _write(tmp_path / "sst", "one\u2028sentence\t1\nanother\t0\n".encode())
    x, y = senteval.load_sst(sst, 2)
    assert sorted(x) == ["another", "one sentence"]
    tup = _write(tmp_path / "tuples.tsv", "a\u2028b\tc\td\te\n".encode())
    assert analogy.read_tuples(tup) == [("a b", "c", "d", "e", "all")]


# ---- 9b. STS gold scores inside the task's range, no extra columns ---------------------------------
def test_sts_gold_score_outside_the_range_is_named(workdir, monkeypatch, capsys):
    """The bug: a 50 on a 0..5 scale was ranked with the rest and a record was written."""
    monkeypatch.setenv(plugins.TASK_PATH_ENV, str(_sts_spec(workdir / "specs" / "r.toml", "sts-range")))
    data = workdir / "data"
    _write(data / "mine" / "STS.input.X.txt", "a0\tb0\na1\tb1\na2\tb2\na3\tb3\na4\tb4\n")
    _write(data / "mine" / "STS.gs.X.txt", "1\n2\n50\n4\n5\n")
    assert _run("sts-range", data, workdir / "out") == 2
    err = capsys.readouterr().err
    assert "STS.gs.X.txt:3" in err and "50" in err and "[0, 5]" in err and "score_range" in err, err
    assert not [p for p in (workdir / "out").rglob("*.json") if "runs" not in p.parts]  # no record written


def test_score_range_from_the_spec(workdir, monkeypatch):
    spec = _sts_spec(workdir / "specs" / "r.toml", "sts-wide", "score_range = [0, 100]")
    monkeypatch.setenv(plugins.TASK_PATH_ENV, str(spec))
    data = workdir / "data"
    _write(data / "mine" / "STS.input.X.txt", "a0\tb0\na1\tb1\na2\tb2\na3\tb3\na4\tb4\n")
    _write(data / "mine" / "STS.gs.X.txt", "10\n20\n50\n40\n-1\n")
    adapter = fixture_adapter(plugins.get_registry(), "sts-wide", data)
    assert adapter.spec.score_range == (0.0, 100.0)
    with pytest.raises(DataError, match=r"STS\.gs\.X\.txt:5: gold score -1 is outside the task's range \[0, 100\]"):
        adapter.load("test")


@pytest.mark.parametrize("value", ["[5, 0]", "[0]", '["0", 5]', "[0, nan]", "[0, inf]", "5", "[true, 5]"])
def test_bad_score_range_is_refused_at_load(tmp_path, value):
    spec = _write(tmp_path / "s.toml", f'[[task]]\nname = "t"\nkind = "sts"\nscore_range = {value}\n')
    with pytest.raises(ConfigError, match=r"s\.toml.*score_range must be \[lowest, highest\]"):
        load_spec_file(spec)


@pytest.mark.parametrize(
    "task, rel, content, line, expected",
    [
        ("sts12", "sts/STS12/STS.input.X.txt", "a\tb\nc\td\textra\n", 2, "expected 2"),
        ("stsb", "sts/STSBenchmark/sts-test.csv", "g\tf\ty\t1\t4.0\tA.\tB.\tsrc\n", 1, "expected 7"),
        ("sickr", "sts/SICK/SICK_test_annotated.txt", "h\n1\ta\tb\t4.0\tNEUTRAL\tx\n", 2, "expected 5"),
        ("sts17-ar-ar", "sts17/STS.input.track1.ar-ar.txt", "a\tb\t4\t\n", 1, "expected 3"),
    ],
)
def test_sts_extra_columns_are_named(registry, tmp_path, task, rel, content, line, expected):
    """The bug: the extra field was dropped silently (STSb, SICK and STS17 extended) or the row read."""
    p = _write(tmp_path / rel, content)
    params = {"subsets": ["X"]} if task == "sts12" else {"gold": ""} if task.startswith("sts17") else {}
    if task == "sts12":
        _write(tmp_path / "sts/STS12/STS.gs.X.txt", "1\n2\n")
    with pytest.raises(DataError) as e:
        fixture_adapter(registry, task, tmp_path, **params).load("test")
    assert f"{p.name}:{line}:" in str(e.value) and expected in str(e.value), str(e.value)


def test_stsb_rows_with_the_two_source_columns_still_read(registry, tmp_path):
    row = "g\tf\ty\t1\t4.0\tA.\tB.\n"
    _write(tmp_path / "sts/STSBenchmark/sts-test.csv", row + row.rstrip("\n") + "\tsrc1\tsrc2\n")
    a, b, y = fixture_adapter(registry, "stsb", tmp_path).load("test")["stsb"]
    assert a == ["A.", "A."] and list(y) == [4.0, 4.0]


def test_other_readers_report_extra_columns(tmp_path):
    from benchbench.evaluate.adapters import pairs, senteval, twitterpara

    cases = [
        (senteval.load_mrpc, "h\n1\t1\t2\ta\tb\n1\t1\t2\ta\tb\tc\n", 3),
        (lambda p: senteval.load_sick(p, 3), "h\n1\ta\tb\t4\tNEUTRAL\textra\n", 2),
        (twitterpara.read_pit, "1\tt\ta\tb\t3\tx\ty\tz\n", 1),
        (twitterpara.read_turl, "a\tb\t(3,6)\t\turl\textra\n", 1),
        (lambda p: pairs.read_pairs(p, "glue-qnli"), "index\tquestion\tsentence\tlabel\n0\tq\ts\tentailment\tx\n", 2),
    ]
    for fn, content, line in cases:
        p = _write(tmp_path / "f.txt", content)
        with pytest.raises(DataError, match=rf"f\.txt:{line}:"):
            fn(p)


def test_sick_relatedness_score_outside_1_to_5_is_named(registry, tmp_path):
    good = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n1\ta\tb\t4.5\tNEUTRAL\n"
    for f in ("SICK_train.txt", "SICK_trial.txt"):
        _write(tmp_path / "senteval/SICK" / f, good)
    _write(tmp_path / "senteval/SICK/SICK_test_annotated.txt", good + "2\ta\tb\t7.5\tNEUTRAL\n")
    with pytest.raises(DataError, match=r"SICK_test_annotated\.txt:3: relatedness_score 7\.5 is outside"):
        fixture_adapter(registry, "sick-r", tmp_path).load()


# ---- 9c. non-finite option values ------------------------------------------------------------------
@dataclasses.dataclass
class _FloatCfg:
    temperature: float = 0.05
    margin: float | None = None
    weights: list[float] | None = None


class _M:
    name = "m"
    Config = _FloatCfg


@pytest.mark.parametrize(
    "overrides, option",
    [
        ({"temperature": "nan"}, "temperature"),
        ({"temperature": "inf"}, "temperature"),
        ({"temperature": "-Infinity"}, "temperature"),
        ({"margin": "NaN"}, "margin"),
        ({"weights": "1,nan"}, "weights"),
        ({"temperature": float("nan")}, "temperature"),  # a sweep grid or TOML value, not a string
    ],
)
def test_non_finite_options_are_refused(overrides, option):
    with pytest.raises(ConfigError, match=rf"option '{option}' of method 'm'.*not a finite number"):
        build_config(_M, overrides)
    assert build_config(_M, {"temperature": "0.1", "weights": "1,2"}).temperature == 0.1


def test_set_temperature_nan_is_refused_by_run(workdir, monkeypatch, capsys):
    """The bug: the run went ahead with temperature=nan (and every ``<= 0`` check passed)."""
    monkeypatch.setenv(plugins.TASK_PATH_ENV, str(FIXTURES / "sts_mini.toml"))
    assert _run("sts-mini", FIXTURES, workdir / "out", "--set", "temperature=nan") == 2
    err = capsys.readouterr().err
    assert "option 'temperature' of method 'fixed'" in err and "not a finite number" in err, err


# ---- 10. one broken spec disables its own tasks, not every command ----------------------------------
BROKEN = '[[task]]\nname = "broken-x"\nkind = "sts"\nsplits = ["test"\n\n[[suite]]\nname = "broken-suite"\ntasks = []\n'


def test_broken_spec_disables_only_its_tasks(monkeypatch, tmp_path, caplog):
    broken = _write(tmp_path / "broken.toml", BROKEN)
    monkeypatch.setenv(plugins.TASK_PATH_ENV, f"{broken}:{FIXTURES / 'sts_mini.toml'}")
    with caplog.at_level(logging.WARNING):
        reg = plugins.load_registry()
    assert "sts-mini" in reg.tasks and "stsb" in reg.tasks and "broken-x" not in reg.tasks
    (warning,) = [r.getMessage() for r in caplog.records if "broken.toml" in r.getMessage()]
    assert f"{broken}:6: TOML syntax error: Unclosed array" in warning, warning
    assert "TOML syntax error" in warning and "broken-x" in warning and plugins.TASK_PATH_ENV in warning
    for ask in (lambda: reg.task("broken-x"), lambda: reg.expand("sts-mini,broken-suite")):
        with pytest.raises(ConfigError, match=r"is defined in task spec .*broken\.toml.*does not parse"):
            ask()
    with pytest.raises(ConfigError, match=r"Unknown task 'nope'.*broken\.toml"):
        reg.task("nope")
    with pytest.raises(PluginError, match=r"broken\.toml"):
        plugins.load_registry(strict=True)


def test_broken_spec_commands_still_work(monkeypatch, tmp_path, tmp_cache, capsys):
    """The bug: ``list``, ``table`` and ``run`` all stopped at ``Task spec ...: Unclosed array``."""
    broken = _write(tmp_path / "broken.toml", BROKEN)
    monkeypatch.setenv(plugins.TASK_PATH_ENV, f"{broken}:{FIXTURES / 'sts_mini.toml'}")
    monkeypatch.setattr(plugins, "_REGISTRY", None)
    try:
        assert main(["list", "tasks"]) == 0
        assert "stsb" in capsys.readouterr().out
        assert main(["table", "--output", str(tmp_path / "empty")]) == 0
        capsys.readouterr()
        for argv in (["table", "--tasks", "broken-x"], ["run", "--method", "sbert", "--tasks", "sts-mini,broken-x"]):
            assert main([*argv, "--output", str(tmp_path / "o")]) == 2
            err = capsys.readouterr().err
            assert "'broken-x'" in err and str(broken) in err and "does not parse" in err, err
    finally:
        plugins.reset_registry()


def test_broken_spec_of_a_plugin_and_a_broken_include(tmp_path, caplog):
    from benchbench import hookimpl

    _write(tmp_path / "_base.toml", "[defaults]\nkind = = 'sts'\n")
    inc = _write(tmp_path / "inc.toml", 'include = "_base.toml"\n[[task]]\nname = "inc-task"\n')
    bad = _write(tmp_path / "bad.toml", b'[[task]]\nname = "bin-task"\nkind = "sts"\ndescription = "\xff"\n')
    mod = types.ModuleType("bb_broken_spec_plugin")

    @hookimpl
    def benchbench_register_tasks(register):
        register("inc", inc)
        register("bad", bad)

    mod.benchbench_register_tasks = benchbench_register_tasks
    with caplog.at_level(logging.WARNING):
        reg = plugins.load_registry(extra_plugins=[("specplug", mod)])
    assert "stsb" in reg.tasks and not {"inc-task", "bin-task"} & set(reg.tasks)
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "_base.toml:2" in text and "bad.toml:4" in text and "not UTF-8" in text and "'specplug'" in text
    with pytest.raises(ConfigError, match=r"inc-task.*inc\.toml.*_base\.toml:2"):
        reg.task("inc-task")


def test_spec_parse_error_names_file_and_line(tmp_path):
    spec = _write(tmp_path / "s.toml", '[[task]]\nname = "t"\nkind = = "sts"\n')
    with pytest.raises(SpecParseError) as e:
        load_spec_file(spec)
    assert e.value.line == 3 and f"{spec}:3" in str(e.value) and "TOML syntax error" in str(e.value)


# ---- real data: no existing task reads a row or a score differently ------------------------------------
STS_PAIRS = {
    "sts12": 3108,
    "sts13": 1500,
    "sts14": 3750,
    "sts15": 3000,
    "sts16": 1186,
    "stsb": 1379,
    "sickr": 4927,
    **{f"sts17-{x}": 250 for x in ("ar-ar", "ar-en", "es-es", "es-en", "es-en-wmt", "en-en", "tr-en")},
    "sts17-de-en": 250,
    "sts17-fr-en": 250,
}


def test_real_sts_tasks_read_every_pair_inside_their_range(real_data, registry):
    data = DataStore(real_data, allow_download=False)
    for task, n in STS_PAIRS.items():
        adapter = registry.adapter("sts")(registry.task(task), data)
        loaded = adapter.load("test")
        lo, hi = adapter.score_range()
        assert sum(len(y) for _, _, y in loaded.values()) == n, task
        assert all(lo <= v <= hi for _, _, y in loaded.values() for v in y), task
        assert all(s and "\t" not in s for a, b, _ in loaded.values() for s in a + b), task
    a, b, y = registry.adapter("sts")(registry.task("stsb"), data).load("dev")["stsb"]
    assert len(a) == 1500
    # the pinned files are the published ones: what was read is what the manifest says
    assert data.used and all(len(v) == 64 for v in data.used.values())


def test_real_readers_keep_their_row_counts(real_data):
    """Counts of the data README: the \\n-only reader and the column checks read every published file
    exactly as before (the CRLF SICK test file included)."""
    from benchbench.evaluate.adapters import askubuntu, senteval, twitterpara

    counts = {"MR": 10662, "CR": 3775, "SUBJ": 10000, "MPQA": 10606, "SST2": 70042, "TREC": 5952, "MRPC": 5801}
    for task, n in counts.items():
        d = senteval.load_task(task, real_data / "senteval" / ("SST/binary" if task == "SST2" else task))
        assert sum(len(v) for v in d.labels.values()) == n, task
    sick = senteval.load_task("SICKEntailment", real_data / "senteval" / "SICK")
    assert [len(sick.labels[p]) for p in ("train", "dev", "test")] == [4500, 500, 4927]
    assert len(twitterpara.read_turl(real_data / "useb/twitterpara/Twitter_URL_Corpus_test.txt")[2]) == 10120
    assert len(twitterpara.read_pit(real_data / "useb/twitterpara/test.data")[2]) == 972
    assert [len(askubuntu.read_eval(real_data / f"useb/askubuntu/{s}.txt")) for s in ("dev", "test")] == [200, 200]
    qrels = read_lines(real_data / "beir/cqadupstack/android/qrels/test.tsv")
    assert len(qrels) == 1697 and all(len(q.split("\t")) == 3 for q in qrels)
