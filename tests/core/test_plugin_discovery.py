"""Plugin discovery through the entry-point group, and the errors a plugin author can hit."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap

import pytest

from benchbench.core import registry as plugins
from benchbench.core.errors import PluginError, UnknownNameError

THIRD_PARTY = """
from dataclasses import dataclass
from benchbench import Method, hookimpl

@dataclass
class Cfg:
    alpha: float = 0.5

class Echo(Method):
    name = "echo-method"
    Config = Cfg
    trains = False
    def train(self, corpus, ctx):
        raise NotImplementedError

@hookimpl
def benchbench_register_methods(register):
    register("echo-method", Echo)
"""


def _install_fake_distribution(monkeypatch, tmp_path, module_name: str, source: str, ep_name: str) -> None:
    """A third-party plugin 'installed' as a module on sys.path plus an entry point in the
    ``benchbench`` group, exactly what `pip install some-plugin` would produce."""
    (tmp_path / f"{module_name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(module_name, None)
    real = importlib.metadata.entry_points

    def fake_entry_points(**kw):
        eps = list(real(**kw))
        if kw.get("group") == plugins.ENTRY_POINT_GROUP:
            eps.append(importlib.metadata.EntryPoint(name=ep_name, value=module_name, group=plugins.ENTRY_POINT_GROUP))
        return eps

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)


def test_builtins_load_through_entry_points(registry):
    # built-in methods and tasks are ordinary entry-point plugins, not special-cased imports
    eps = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="benchbench")}
    assert eps["baselines"] == "benchbench_plugins.baselines"
    assert registry.owner[("methods", "sbert")] == "baselines"
    assert registry.owner[("tasks", "stsb")] == "tasks"
    assert "sts" in registry.suites and "stsb" in registry.suites["sts"].tasks


def test_third_party_plugin_is_discovered(monkeypatch, tmp_path, capsys):
    _install_fake_distribution(monkeypatch, tmp_path, "bb_thirdparty_ok", THIRD_PARTY, "thirdparty")
    reg = plugins.load_registry()
    assert reg.method("echo-method").Config().alpha == 0.5
    assert reg.plugins["thirdparty"] == ["method echo-method"]
    monkeypatch.setattr(plugins, "_REGISTRY", reg)
    from benchbench.cli.main import main

    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "thirdparty:\n  method echo-method" in out


def test_misspelled_hook_is_rejected(monkeypatch, tmp_path):
    bad = THIRD_PARTY.replace("def benchbench_register_methods", "def benchbench_register_method")
    _install_fake_distribution(monkeypatch, tmp_path, "bb_thirdparty_typo", bad, "typo")
    with pytest.raises(
        PluginError, match=r"'typo'.*benchbench_register_method.*Did you mean 'benchbench_register_methods'"
    ):
        plugins.load_registry()


def test_plugin_that_raises_is_named(monkeypatch, tmp_path):
    bad = THIRD_PARTY.replace('    register("echo-method", Echo)', '    raise RuntimeError("boom")')
    _install_fake_distribution(monkeypatch, tmp_path, "bb_thirdparty_raises", bad, "raiser")
    with pytest.raises(PluginError, match=r"Plugin 'raiser' raised in benchbench_register_methods: RuntimeError: boom"):
        plugins.load_registry()


def test_plugin_import_error_is_named(monkeypatch, tmp_path):
    _install_fake_distribution(monkeypatch, tmp_path, "bb_thirdparty_broken", "import not_a_module_xyz\n", "broken")
    with pytest.raises(
        PluginError, match=r"Plugin 'broken'.*failed to import.*not_a_module_xyz.*BENCHBENCH_DISABLE_PLUGINS=broken"
    ):
        plugins.load_registry(strict=True)


def test_broken_plugin_leaves_the_others_working(monkeypatch, tmp_path, caplog):
    """One plugin that fails to import used to make every command fail (table and plugins included)."""
    _install_fake_distribution(
        monkeypatch, tmp_path, "bb_thirdparty_broken2", "raise RuntimeError('kaput')\n", "broken"
    )
    reg = plugins.load_registry()
    assert "sbert" in reg.methods and "stsb" in reg.tasks  # everything else registered
    assert "kaput" in reg.broken["broken"] and "BENCHBENCH_DISABLE_PLUGINS=broken" in reg.broken["broken"]
    assert any(
        "'broken'" in r.getMessage() and "BENCHBENCH_DISABLE_PLUGINS=broken" in r.getMessage() for r in caplog.records
    )
    # asking for something that only a broken plugin could provide says which plugin is broken
    with pytest.raises(PluginError, match=r"Unknown method 'echo-method'.*'broken'.*kaput"):
        reg.method("echo-method")


def test_broken_plugin_commands_still_work(monkeypatch, tmp_path, capsys):
    cli = importlib.import_module("benchbench.cli.main")  # the module: the package exports the function `main`

    _install_fake_distribution(monkeypatch, tmp_path, "bb_thirdparty_broken3", "import not_a_module_xyz\n", "broken")
    monkeypatch.setattr(plugins, "_REGISTRY", None)
    assert cli.main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "broken: BROKEN" in out and "not_a_module_xyz" in out and "method sbert" in out
    assert cli.main(["list", "tasks"]) == 0
    assert "stsb" in capsys.readouterr().out
    assert cli.main(["table", "--output", str(tmp_path / "empty")]) == 0
    monkeypatch.setattr(plugins, "_REGISTRY", None)


def test_disable_plugins_env(monkeypatch, tmp_path):
    _install_fake_distribution(monkeypatch, tmp_path, "bb_thirdparty_broken4", "import not_a_module_xyz\n", "broken")
    monkeypatch.setenv(plugins.DISABLE_ENV, "broken, bm25")
    reg = plugins.load_registry(strict=True)  # not imported at all: no error even when strict
    assert not reg.broken and sorted(reg.disabled) == ["bm25", "broken"]
    assert "bm25" not in reg.methods and "sbert" in reg.methods


def test_duplicate_name_is_rejected(monkeypatch, tmp_path):
    dup = THIRD_PARTY.replace('register("echo-method", Echo)', 'register("sbert", Echo)')
    _install_fake_distribution(monkeypatch, tmp_path, "bb_thirdparty_dup", dup, "dup")
    with pytest.raises(PluginError, match=r"'dup' registers method 'sbert', already registered by 'baselines'"):
        plugins.load_registry()


def test_method_without_dataclass_config_is_rejected(monkeypatch, tmp_path):
    bad = THIRD_PARTY.replace("    Config = Cfg\n", "    Config = dict\n")
    _install_fake_distribution(monkeypatch, tmp_path, "bb_thirdparty_cfg", bad, "nocfg")
    with pytest.raises(PluginError, match=r"'nocfg'.*dataclass"):
        plugins.load_registry()


def test_unknown_names_suggest(registry):
    with pytest.raises(UnknownNameError, match=r"Unknown method 'sbret'. Did you mean 'sbert'"):
        registry.method("sbret")
    with pytest.raises(UnknownNameError, match=r"Unknown task or suite 'stbs'. Did you mean [^?]*'stsb'"):
        registry.expand("stbs")
    assert registry.expand("sts,stsb")[:2] == ["sts12", "sts13"] and registry.expand("sts,stsb").count("stsb") == 1


def test_local_plugin_file(tmp_path):
    (tmp_path / "benchbench_plugin.py").write_text(THIRD_PARTY.replace("echo-method", "local-echo"))
    reg = plugins.load_registry(local_dir=tmp_path)
    assert "local-echo" in reg.methods


def test_task_spec_with_unknown_adapter_kind(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text('[[task]]\nname = "x"\nkind = "stss"\n')
    mod = type(sys)("bb_spec_plugin")
    from benchbench import hookimpl

    @hookimpl
    def benchbench_register_tasks(register):
        register("bad", spec)

    mod.benchbench_register_tasks = benchbench_register_tasks
    with pytest.raises(PluginError, match=r"bad\.toml.*Unknown adapter kind 'stss'. Did you mean 'sts'"):
        plugins.load_registry(extra_plugins=[("specplugin", mod)])
