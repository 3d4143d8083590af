"""The docs site (mkdocs.yml, docs/): every public name has a docstring and a place in the API
reference, the navigation and the pages agree, a broken link fails the strict build, and the README
stays a front door whose test command is the one CI runs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

import benchbench

sys.path.insert(0, str(REPO / "bench"))
import prose_stats  # a bench script, not a package: importable once bench/ is on the path

DOCS = REPO / "docs"
API = DOCS / "api"
KIT = "benchbench.run.conformance"  # what `benchbench.testing` re-exports
HOOKSPECS = "benchbench.core.hookspecs"


def _public_paths() -> dict[str, str]:
    """public name -> the dotted path of the object that defines it."""
    paths = {name: f"benchbench{mod}.{name}" for name, mod in benchbench._EXPORTS.items()}
    paths |= {name: f"benchbench{mod}" for name, mod in benchbench._SUBMODULES.items()}
    from benchbench.run import conformance

    paths |= {f"benchbench.testing.{name}": f"{KIT}.{name}" for name in conformance.__all__}
    from benchbench.core import hookspecs

    paths |= {f"hook {name}": f"{HOOKSPECS}.{name}" for name in vars(hookspecs) if name.startswith("benchbench_")}
    return paths


@pytest.fixture(scope="module")
def package():
    griffe = pytest.importorskip("griffe")  # what mkdocstrings reads the docstrings with (the docs extra)
    return griffe.load("benchbench", search_paths=[str(REPO)], resolve_aliases=False)


def test_public_api_is_listed_in_full():
    paths = _public_paths()
    assert set(benchbench.__all__) - {"__version__"} <= set(paths)
    assert {"benchbench.testing.check_method", "benchbench.testing.check_task"} <= set(paths)
    assert sum(k.startswith("hook ") for k in paths) >= 8


def test_every_public_name_has_a_docstring(package):
    """What the API reference renders: a name without a docstring would be a heading with nothing under it."""
    missing = []
    for name, path in sorted(_public_paths().items()):
        obj = package[path.removeprefix("benchbench.")]
        if not (obj.docstring and obj.docstring.value.strip()):
            missing.append(f"{name} ({path})")
    assert not missing, "public names without a docstring (say what each guarantees):\n" + "\n".join(missing)


def test_every_public_method_of_an_exported_class_has_a_docstring(package):
    """A class's page lists its documented methods only: ``Method.train`` or ``Encoder.encode`` without a
    docstring would vanish from the reference of the contract it defines."""
    missing = []
    for name, path in sorted(_public_paths().items()):
        obj = package[path.removeprefix("benchbench.")]
        if not obj.is_class:
            continue
        for member_name, member in obj.members.items():
            if member_name.startswith("_") or member.is_alias or not member.is_function:
                continue
            if not (member.docstring and member.docstring.value.strip()):
                missing.append(f"{name}.{member_name} ({member.relative_filepath}:{member.lineno})")
    assert not missing, "public methods without a docstring (say what each guarantees):\n" + "\n".join(missing)


def test_every_public_name_is_in_the_api_reference():
    """Each exported name is rendered by an identifier of its own (``::: benchbench.x.y.Name``); the
    hookspecs and the kit are rendered as modules."""
    pages = "\n".join(p.read_text() for p in sorted(API.glob("*.md")))
    rendered = set(re.findall(r"^::: (\S+)", pages, re.M))
    missing = [
        name
        for name, path in _public_paths().items()
        if path not in rendered and path.rsplit(".", 1)[0] not in rendered
    ]
    assert not missing, f"public names missing from docs/api/*.md: {sorted(missing)}"
    assert HOOKSPECS in rendered and KIT in rendered


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    return [p for v in node for p in _nav_pages(v)]


def _config() -> dict:
    return yaml.safe_load((REPO / "mkdocs.yml").read_text())


def test_nav_and_pages_agree():
    cfg = _config()
    nav = _nav_pages(cfg["nav"])
    assert len(nav) == len(set(nav)), "a page is in the nav twice"
    absent = [p for p in nav if not (DOCS / p).is_file()]
    assert not absent, f"mkdocs.yml's nav names pages that do not exist: {absent}"
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    unlisted = [p for p in pages if p not in nav]
    assert not unlisted, f"docs pages missing from mkdocs.yml's nav: {unlisted}"
    assert cfg["use_directory_urls"] is False  # plain .html files: the built site reads from file://


def test_a_broken_link_fails_the_strict_build(tmp_path):
    """The site's own validation settings turn a link to a missing page into a warning, which --strict
    makes an error (the API reference is left out: it is not what this checks, and it costs seconds)."""
    if shutil.which("mkdocs") is None and not (Path(sys.executable).parent / "mkdocs").exists():
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    cfg = _config()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the other page](other.md).\n")
    small = {
        "site_name": "t",
        "docs_dir": str(docs),
        "site_dir": str(tmp_path / "site"),
        "use_directory_urls": False,
        "validation": cfg["validation"],
        "nav": ["index.md"],
    }
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(small))

    def build() -> subprocess.CompletedProcess:  # never -q: mkdocs 1.6 then counts no warning for --strict
        cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    broken = build()
    assert broken.returncode != 0 and "other.md" in broken.stdout + broken.stderr
    (docs / "other.md").write_text("# Other\n")
    small["nav"] = ["index.md", "other.md"]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(small))
    fixed = build()
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


# ---- the README -------------------------------------------------------------------------------------
def test_readme_is_a_front_door():
    """Issue 49: under ~150 lines, short sentences, few asides; reference material lives in docs/."""
    stats = prose_stats.measure((REPO / "README.md").read_text())
    assert stats.lines < 150
    assert stats.words_per_sentence < 18
    assert stats.parens_per_100_words < 3.7


def test_readme_links_resolve():
    readme = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    assert len(targets) >= 8
    broken = [t for t in targets if "://" not in t and not (REPO / t).exists()]
    assert not broken, f"README links to missing files: {broken}"


def test_readme_test_command_is_what_ci_runs():
    """``.ci/run`` runs the README's test command: each step of it, in the same order."""
    readme = (REPO / "README.md").read_text()
    line = next(ln.strip() for ln in readme.splitlines() if "pip install -e" in ln and "pytest" in ln)
    steps = [s.strip() for s in line.split("&&")]
    ci = (REPO / ".ci" / "run").read_text()
    at = 0
    for step in steps:
        found = ci.find(step, at)
        assert found >= 0, f"README test step not in .ci/run (in this order): {step!r}"
        at = found + len(step)


# ---- the leaderboard site links the docs --------------------------------------------------------------
def test_the_committed_leaderboard_site_links_the_docs():
    from benchbench.report.site.folder import docs_link

    board = REPO / "leaderboards"
    docs = docs_link(board)
    assert docs is not None and (board / "site" / docs).resolve() == (DOCS / "index.md").resolve()
    for page in ("index.html", "all.html"):
        assert f'<a href="{docs}">docs</a>' in (board / "site" / page).read_text()
    method_page = next((board / "site" / "methods").glob("*.html"))
    assert f'<a href="../{docs}">docs</a>' in method_page.read_text()  # one level down, one more "../"


def test_a_board_outside_a_checkout_has_no_docs_link(tmp_path):
    from benchbench.report.site.folder import docs_link
    from benchbench.report.site.html import with_docs_link

    assert docs_link(tmp_path / "lb") is None
    page = '<html><body><p class="nav"><a href="index.html">studies</a></p><p>x</p></body></html>'
    linked = with_docs_link({"a.html": page, "m/b.html": page, "p.svg": "<svg/>"}, "../../docs/index.md")
    assert '<a href="index.html">studies</a> · <a href="../../docs/index.md">docs</a></p><p>x</p>' in linked["a.html"]
    assert '<a href="../../../docs/index.md">docs</a>' in linked["m/b.html"]
    assert linked["p.svg"] == "<svg/>"
