"""Small fakes shared by the core tests."""

from __future__ import annotations

import numpy as np

# cosine(a_i, b_i) in the sts_mini fixture
FIXTURE_COS = {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.9, 4: 0.8}


class CosineFixtureEncoder:
    """Maps 'a<i>' to e1 and 'b<i>' to a unit vector whose cosine with e1 is FIXTURE_COS[i];
    counts what it is asked to encode."""

    fingerprint = "fixture-cos-v1"
    batch_size = 2

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = []
        for t in texts:
            if t.startswith("a"):
                out.append([1.0, 0.0])
            elif t.startswith("b"):
                c = FIXTURE_COS[int(t[1:])]
                out.append([c, (1 - c * c) ** 0.5])
            else:
                out.append([0.5, 0.5])
        return np.asarray(out, dtype=np.float32)

    @property
    def n_encoded(self) -> int:
        return sum(len(c) for c in self.calls)


from pathlib import Path  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture_adapter(registry, task: str, root, **params):
    """The registered task's adapter reading a fixture root. The spec's checksums are dropped (fixtures
    are not the published bytes); ``params`` override the spec's."""
    import dataclasses

    from benchbench.store.data import DataStore

    spec = registry.task(task)
    spec = dataclasses.replace(spec, files={}, params={**spec.params, **params})
    return registry.adapter(spec.kind)(spec, DataStore(root, allow_download=False))


class TablePairScorer:
    """A vectorless 'encoder' whose score_pairs reads a table: exact, hand-checkable rankings.
    ``strict``: a pair missing from the table is an error instead of scoring 0."""

    fingerprint = "table-scorer"

    def __init__(self, table, strict: bool = False):
        self.table = table
        self.strict = strict

    def encode(self, texts):
        raise AssertionError("must not be called: the adapter should use score_pairs")

    def score_pairs(self, a, b):
        return np.array([self.table[(x, y)] if self.strict else self.table.get((x, y), 0.0) for x, y in zip(a, b)])


def local_plugin_workdir(tmp_path, monkeypatch, source: str):
    """A working directory holding ``source`` as its ``benchbench_plugin.py`` (the local-plugin
    mechanism), with the fixtures as data dir and a fresh registry; a generator for a pytest fixture."""
    import textwrap

    from benchbench.core import registry

    (tmp_path / "benchbench_plugin.py").write_text(textwrap.dedent(source))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCHBENCH_DATA", str(FIXTURES))
    monkeypatch.setattr(registry, "_REGISTRY", None)
    yield tmp_path
    registry.reset_registry()


# a local plugin (for ``local_plugin_workdir``) registering method "fixed": no training, the fixture
# encoder; a test adds its own tasks with BENCHBENCH_TASK_PATH
FIXED_METHOD_PLUGIN = f"""
import sys
from dataclasses import dataclass
sys.path.insert(0, {str(FIXTURES.parent)!r})
from helpers import CosineFixtureEncoder
from benchbench import Method, hookimpl

@dataclass
class Cfg:
    steps: int = 1

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


def lrs_over(optimizer, scheduler, steps: int) -> list[float]:
    """The learning rate at each of ``steps`` optimizer steps under ``scheduler`` (what a method's
    ``make_scheduler`` hands the loop), read before each step as the loop applies it."""
    out = []
    for _ in range(steps):
        out.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return out
