"""The public API: everything a plugin needs comes from ``benchbench`` itself."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import REPO

import benchbench


def _private_imports(path: Path) -> list[str]:
    """Imports of a benchbench submodule (``from benchbench.x import``, ``import benchbench.x``)."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("benchbench."):
            bad.append(f"{path.name}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Import):
            bad.extend(
                f"{path.name}:{node.lineno}: import {a.name}" for a in node.names if a.name.startswith("benchbench.")
            )
    return bad


def test_builtin_plugins_import_only_the_public_api():
    plugin_files = sorted((REPO / "plugins").glob("*.py"))
    assert len(plugin_files) >= 7
    bad = [b for p in plugin_files for b in _private_imports(p)]
    assert not bad, "built-in plugins must import from `benchbench` only:\n" + "\n".join(bad)


def test_private_import_detector_catches_both_forms(tmp_path):
    f = tmp_path / "p.py"
    f.write_text(
        "from benchbench.train.loop import train_loop\nimport benchbench.encode.models\nfrom benchbench import Method\n"
    )
    assert len(_private_imports(f)) == 2


def test_every_exported_name_resolves():
    for name in benchbench.__all__:
        assert getattr(benchbench, name) is not None, name
    assert callable(benchbench.train_loop) and isinstance(benchbench.Method, type)
    assert issubclass(benchbench.ConfigError, benchbench.BenchbenchError)


def test_import_is_lazy():
    """`import benchbench` must not import torch (the CLI's --help and list stay fast)."""
    code = "import sys, benchbench; assert 'torch' not in sys.modules, 'torch imported eagerly'; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_py_typed_marker_ships():
    assert (REPO / "benchbench" / "py.typed").is_file()
