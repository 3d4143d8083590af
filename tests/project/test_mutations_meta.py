"""bench/mutations.py must not rot: every mutation's target text still occurs exactly once in the code
and every test it relies on still exists (otherwise a mutation would 'survive' or error for the wrong
reason)."""

from __future__ import annotations

import importlib.util
import re

from conftest import REPO


def _bench():
    spec = importlib.util.spec_from_file_location("bb_mutations", REPO / "bench" / "mutations.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_mutation_target_matches_exactly_once_and_changes_the_code():
    mod = _bench()
    assert len([m for m in mod.MUTATIONS if not m[0].startswith("(extra)")]) == 21
    for name, rel, edits, tests in mod.MUTATIONS:
        text = (REPO / rel).read_text()
        assert mod.apply(text, edits, rel) != text, name
        for t in tests:
            path, _, func = t.partition("::")
            assert re.search(rf"^def {re.escape(func)}\(", (REPO / path).read_text(), re.M), (name, t)


def test_every_new_methods_mutation_target_matches_exactly_once_and_its_tests_exist():
    """The same for bench/mutations_new_methods.py (ESimCSE ... SimCSE++, and the decoder / LLM methods of
    issue 48)."""
    spec = importlib.util.spec_from_file_location("bb_mutations_new", REPO / "bench" / "mutations_new_methods.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    names = [m[0] for m in mod.MUTATIONS]
    assert len(names) == len(set(names)) and any(n.startswith("LLM2Vec") for n in names)
    for name, rel, edits, tests in mod.MUTATIONS:
        text = (REPO / rel).read_text()
        assert mod.M.apply(text, edits, rel) != text, name
        assert tests, name
        for t in tests:
            path, _, func = t.partition("::")
            assert re.search(rf"^def {re.escape(func)}\(", (REPO / path).read_text(), re.M), (name, t)
