"""`benchbench --help`, `list` and `plugins` import no torch/transformers/sklearn (they used to take
2-4 s importing torch): `list`/`plugins` read a registry manifest that the first full load writes,
keyed by every input that could change it, so a changed plugin is picked up at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

HEAVY = ("torch", "transformers", "sentence_transformers", "sklearn", "scipy")

PROBE = textwrap.dedent(
    """
    import json, resource, sys, io, contextlib
    from benchbench.cli.main import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(sys.argv[1:])
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"rc": rc, "heavy": sorted(m for m in %r if m in sys.modules), "out": out.getvalue(),
                      "cpu": ru.ru_utime + ru.ru_stime}))
"""
    % (HEAVY,)
)


def _cli(args: list[str], cwd, cache) -> dict:
    env = {**os.environ, "BENCHBENCH_CACHE": str(cache)}
    r = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_list_and_plugins_import_no_torch(tmp_path):
    cache = tmp_path / "cache"
    first = _cli(["list", "tasks"], tmp_path, cache)  # the first call loads everything and writes the manifest
    assert first["rc"] == 0 and "stsb" in first["out"]
    for args, expect in (
        (["list", "tasks"], "stsb"),
        (["list", "methods"], "simcse"),
        (["list", "suites"], "useb"),
        (["plugins"], "method tsdae"),
    ):
        for _ in range(3):  # a plugin edited meanwhile (a shared dev tree) rightly rebuilds the manifest: retry
            r = _cli(args, tmp_path, cache)
            if not r["heavy"]:
                break
        assert r["rc"] == 0 and expect in r["out"], r["out"]
        assert r["heavy"] == [], f"`benchbench {' '.join(args)}` imported {r['heavy']}"
        assert r["cpu"] < 1.0, f"`benchbench {' '.join(args)}` took {r['cpu']:.2f} s of CPU"
    assert first["out"] == _cli(["list", "tasks"], tmp_path, cache)["out"]  # same table as the full load


def test_help_imports_nothing_heavy(tmp_path):
    env = {**os.environ, "BENCHBENCH_CACHE": str(tmp_path)}
    code = (
        "import sys\nfrom benchbench.cli.main import main\ntry:\n main(['--help'])\nexcept SystemExit:\n pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.stdout.strip().splitlines()[-1] == "[]"


LOCAL = """
from dataclasses import dataclass
from benchbench import Method, hookimpl

@dataclass
class Cfg:
    a: int = 1

class M(Method):
    Config = Cfg
    trains = False
    description = "DESC"
    def train(self, corpus, ctx):
        raise NotImplementedError

@hookimpl
def benchbench_register_methods(register):
    register("NAME", M)
"""


def test_manifest_follows_a_changed_plugin(tmp_path):
    cache = tmp_path / "cache"
    plugin = tmp_path / "benchbench_plugin.py"
    plugin.write_text(LOCAL.replace("NAME", "speed-one").replace("DESC", "first"))
    assert "speed-one" in _cli(["list", "methods"], tmp_path, cache)["out"]
    plugin.write_text(LOCAL.replace("NAME", "speed-two").replace("DESC", "second version"))
    out = _cli(["list", "methods"], tmp_path, cache)["out"]
    assert "speed-two" in out and "speed-one" not in out
    plugin.unlink()
    assert "speed-two" not in _cli(["list", "methods"], tmp_path, cache)["out"]
