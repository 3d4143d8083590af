"""The house: layers enforced by import-linter, no import cycle, every module documented, the old
module paths aliased, commands from plugins, and the command list of docs/cli.md matching the parser."""

from __future__ import annotations

import ast
import importlib
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from conftest import REPO

LAYERS = ["cli", "report", "run", "train", "evaluate", "encode", "store", "core"]


def _lint_imports(cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    return subprocess.run(
        [str(exe), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300, env=env or os.environ.copy()
    )


def test_layer_contracts_hold():
    out = _lint_imports(REPO)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "BROKEN" not in out.stdout and out.stdout.count("KEPT") >= 5, out.stdout


def test_a_planted_upward_import_breaks_the_layers_contract(tmp_path):
    """A copy of the package with core importing cli: the linter must fail and name that import."""
    shutil.copytree(REPO / "benchbench", tmp_path / "benchbench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "plugins", tmp_path / "benchbench_plugins", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    errors = tmp_path / "benchbench" / "core" / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _planted():\n    from benchbench.cli import main  # noqa\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = _lint_imports(tmp_path, env)
    assert out.returncode != 0, out.stdout
    assert "benchbench.core.errors -> benchbench.cli" in out.stdout, out.stdout
    assert "only cli imports cli BROKEN" in out.stdout, out.stdout


def test_no_import_cycle_between_modules():
    """Strongly connected components of the module import graph (type-only imports excluded)."""
    grimp = pytest.importorskip("grimp")
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    graph = grimp.build_graph("benchbench", exclude_type_checking_imports=True)
    mods = sorted(graph.modules)
    idx = {m: i for i, m in enumerate(mods)}
    edges = [(idx[m], idx[d]) for m in mods for d in graph.find_modules_directly_imported_by(m) if d in idx]
    adj = csr_matrix(([1] * len(edges), ([a for a, _ in edges], [b for _, b in edges])), shape=(len(mods),) * 2)
    _, labels = connected_components(adj, directed=True, connection="strong")
    groups: dict[int, list[str]] = {}
    for m, lab in zip(mods, labels):
        groups.setdefault(int(lab), []).append(m)
    cycles = [g for g in groups.values() if len(g) > 1]
    assert not cycles, f"import cycles: {cycles}"
    assert len(mods) > 60  # the graph really is the package's


def test_the_layers_show_in_ls():
    present = {p.name for p in (REPO / "benchbench").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert set(LAYERS) <= present
    flat = sorted(p.name for p in (REPO / "benchbench").glob("*.py"))
    assert flat == ["__init__.py", "testing.py"], flat  # nothing else at the top: every module has a layer


def test_every_module_is_in_the_architecture_doc():
    doc = (REPO / "docs" / "architecture.md").read_text()
    missing = []
    for p in sorted((REPO / "benchbench").rglob("*.py")):
        rel = p.relative_to(REPO).as_posix()
        if p.name == "__init__.py" and p.parent.name != "benchbench":
            continue  # a layer's package marker: the layer table covers it
        if p.parent.name == "adapters" and "benchbench/evaluate/adapters/" in doc:
            continue  # one row for the adapters folder, each adapter named in it
        if f"`{rel}`" not in doc:
            missing.append(rel)
    assert not missing, f"docs/architecture.md does not list: {missing}"


def test_old_flat_module_paths_still_import_with_a_warning():
    for mod in [m for m in list(sys.modules) if m == "benchbench.registry" or m.startswith("benchbench.adapters")]:
        del sys.modules[mod]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from benchbench.adapters.sts import STSAdapter as old_sts
        from benchbench.registry import load_registry as old
    from benchbench.core.registry import load_registry
    from benchbench.evaluate.adapters.sts import STSAdapter

    assert old is load_registry and old_sts is STSAdapter
    msgs = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any("benchbench.registry moved to benchbench.core.registry" in m for m in msgs), msgs
    with pytest.raises(ModuleNotFoundError):
        __import__("benchbench.no_such_module")


def test_no_function_over_80_lines_without_a_reason():
    """A long function says why in its docstring ("Long because ...")."""
    long = []
    for p in sorted((REPO / "benchbench").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > 80 and "Long because" not in (ast.get_docstring(node) or ""):
                    long.append(f"{p.relative_to(REPO)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, "functions over 80 lines without a reason:\n" + "\n".join(long)


# ---- commands ---------------------------------------------------------------------------------------
def _commands() -> list[str]:
    from benchbench.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "cmd")
    return sorted(sub.choices)


def test_cli_docs_commands_section_covers_every_command():
    page = (REPO / "docs" / "cli.md").read_text()
    section = page.split("## Commands", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\s+benchbench ([a-z][a-z-]+)", section, re.M))  # the usage lines
    cmds = _commands()
    assert len(cmds) >= 13
    missing = [c for c in cmds if c not in documented]
    assert not missing, f"docs/cli.md's Commands section does not cover: {missing}"
    unknown = sorted(documented - set(cmds))
    assert not unknown, f"docs/cli.md's Commands section names commands the parser lacks: {unknown}"


PLUGIN_COMMAND = """
from benchbench import hookimpl


@hookimpl
def benchbench_register_commands(register):
    p = register("hello", help="say hello")
    p.add_argument("--name", default="world")
    p.set_defaults(func=lambda args: print(f"hello {args.name}") or 0)
"""


def test_a_plugin_adds_a_command_through_the_hook(tmp_path, monkeypatch, capsys):
    cli = importlib.import_module("benchbench.cli.main")  # the module (the package exports the function `main`)

    (tmp_path / "hello_cmd.py").write_text(PLUGIN_COMMAND)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cli, "BUILTIN_COMMANDS", (*cli.BUILTIN_COMMANDS, "hello_cmd"))
    assert cli.main(["hello", "--name", "bench"]) == 0
    assert capsys.readouterr().out.strip() == "hello bench"
    assert "leaderboard" in _commands()  # the built-in command modules come through the same hook


def test_a_plugin_command_cannot_shadow_a_builtin(tmp_path, monkeypatch):
    cli = importlib.import_module("benchbench.cli.main")  # the module (the package exports the function `main`)
    from benchbench.core.errors import PluginError

    (tmp_path / "shadow_cmd.py").write_text(PLUGIN_COMMAND.replace('"hello"', '"table"'))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cli, "BUILTIN_COMMANDS", (*cli.BUILTIN_COMMANDS, "shadow_cmd"))
    with pytest.raises(PluginError, match="registers command 'table'"):
        cli.build_parser()
