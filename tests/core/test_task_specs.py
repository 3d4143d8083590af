"""Task specs without repetition: [defaults], include, [[variant]], derived remote, {param} descriptions."""

from __future__ import annotations

import textwrap
import types
from pathlib import Path

import pytest
from conftest import REPO

from benchbench.core.errors import ConfigError
from benchbench.core.tasks import load_spec_file


def _write(p: Path, text: str) -> Path:
    p.write_text(textwrap.dedent(text))
    return p


def test_defaults_include_and_task_override(tmp_path):
    _write(
        tmp_path / "_base.toml",
        """
        [defaults]
        kind = "sts"
        main_metric = "spearman"
        params = { format = "sts17", x = 1 }
    """,
    )
    spec = _write(
        tmp_path / "a.toml",
        """
        include = "_base.toml"
        [defaults]
        splits = ["test", "dev"]
        params = { x = 2 }
        [[task]]
        name = "t1"
        [[task]]
        name = "t2"
        main_metric = "pearson"
        [task.params]
        x = 3
    """,
    )
    (t1, t2), _ = load_spec_file(spec)
    assert (t1.kind, t1.main_metric, t1.splits, t1.params) == (
        "sts",
        "spearman",
        ["test", "dev"],
        {"format": "sts17", "x": 2},
    )
    assert (t2.main_metric, t2.params) == ("pearson", {"format": "sts17", "x": 3})


def test_variant_copies_tasks_with_overrides_and_described_params(tmp_path):
    spec = _write(
        tmp_path / "v.toml",
        """
        [[task]]
        name = "mr"
        kind = "senteval"
        description = "MR ({setting} setting), {missing} stays"
        params = { setting = "default", task = "MR" }
        [[variant]]
        of = ["mr"]
        name = "{name}-proto"
        params = { setting = "prototyping" }
    """,
    )
    (mr, proto), _ = load_spec_file(spec)
    assert proto.name == "mr-proto" and proto.params == {"setting": "prototyping", "task": "MR"}
    assert mr.description == "MR (default setting), {missing} stays"
    assert proto.description == "MR (prototyping setting), {missing} stays"


def test_remote_is_the_file_name_unless_turned_off(tmp_path):
    spec = _write(
        tmp_path / "r.toml",
        """
        [[task]]
        name = "t"
        kind = "sts"
        url_base = "https://example.org/base/"
        [task.files]
        "sts/dir/a.txt" = { sha256 = "00" }
        "sts/dir/b.txt" = { sha256 = "00", remote = "other/b.txt" }
        "sts/dir/c.txt" = { sha256 = "00", remote = "" }
    """,
    )
    (t,), _ = load_spec_file(spec)
    assert t.files["sts/dir/a.txt"].url == "https://example.org/base/a.txt"
    assert t.files["sts/dir/b.txt"].url == "https://example.org/base/other/b.txt"
    assert t.files["sts/dir/c.txt"].url is None


@pytest.mark.parametrize(
    "body, message",
    [
        ('[[task]]\nname = "t"\nkind = "sts"\nhigher_is_better = true\n', "unknown keys ['higher_is_better']"),
        ('[[task]]\nname = "t"\nkind = "sts"\naliases = ["u"]\n', "unknown keys ['aliases']"),
        ('include = "loop.toml"\n', "include cycle"),
        ('include = "nowhere.toml"\n', "not found"),
        ('[defaults]\nname = "x"\n', "unknown keys in [defaults]"),
        ('[[variant]]\nof = ["nope"]\nname = "{name}-x"\n', "not defined in this file"),
    ],
)
def test_spec_errors_name_the_file(tmp_path, body, message):
    if "loop" in body:
        _write(tmp_path / "loop.toml", 'include = "bad.toml"\n')
    spec = _write(tmp_path / "bad.toml", body)
    with pytest.raises(ConfigError) as e:
        load_spec_file(spec)
    assert message in str(e.value) and "bad.toml" in str(e.value)


def test_builtin_specs_use_the_shortcuts_and_keep_their_meaning():
    """The built-in specs were rewritten with [defaults]/[[variant]]/derived remotes; what they mean is
    pinned here by a few facts that would change if the rewrite had lost anything."""
    tasks = {}
    for f in sorted((REPO / "tasks").glob("*.toml")):
        for t in load_spec_file(f)[0]:
            tasks[t.name] = t
    assert len(tasks) >= 42
    mr, proto = tasks["mr"], tasks["mr-proto"]
    assert (mr.params["setting"], proto.params["setting"]) == ("default", "prototyping")
    assert (
        mr.files.keys() == proto.files.keys()
        and proto.kind == "senteval"
        and "(prototyping setting)" in proto.description
    )
    assert tasks["sts12"].files["sts/STS12/STS.gs.MSRpar.txt"].url.endswith("/STS12-en-test/STS.gs.MSRpar.txt")
    assert tasks["sts17-ar-ar"].kind == "sts" and tasks["sts17-ar-ar"].main_metric == "spearman"
    assert tasks["stsb"].files["sts/STSBenchmark/sts-test.csv"].url is None  # no public URL: never guessed
    text = (REPO / "tasks" / "senteval.toml").read_text()
    assert text.count("[[task]]") < len([n for n in tasks if tasks[n].kind == "senteval"])  # variants, not copies


def test_plugin_spec_path_resolves_relative_to_the_plugin(tmp_path, monkeypatch):
    from benchbench import hookimpl
    from benchbench.core.registry import load_registry

    pkg = tmp_path / "plug"
    pkg.mkdir()
    _write(pkg / "mytask.toml", '[[task]]\nname = "my-rel-task"\nkind = "sts"\n')
    src = (
        "from pathlib import Path\nfrom benchbench import hookimpl\n"
        "@hookimpl\ndef benchbench_register_tasks(register):\n    register('my-rel-task', Path('mytask.toml'))\n"
    )
    (pkg / "myplug.py").write_text(src)
    mod = types.ModuleType("myplug")
    mod.__file__ = str(pkg / "myplug.py")
    exec(compile(src, str(pkg / "myplug.py"), "exec"), mod.__dict__)
    monkeypatch.chdir(tmp_path)  # the working dir has no mytask.toml
    reg = load_registry(extra_plugins=[("myplug", mod)])
    assert reg.task("my-rel-task").kind == "sts"
    assert hookimpl is not None
