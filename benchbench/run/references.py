"""The reference rows of ``benchbench run``: what a trained row is read against.

A score alone does not say whether training helped. Beside a trained method's row, ``run`` shows the
two readings a study makes of every trained row (docs: DESIGN.md, "Studies"):

* the start: the base model read with its own readout, untrained (method ``plm-mean``: mean pooling,
  as the sentence-transformers models were trained to be read). Trained minus start: is the result
  worth using;
* the method's step 0: the start read through the method's own pooling, head and template before
  its first update (its options plus ``Method.step0_options``). Trained minus step 0: did the
  objective move it.

Each is an ordinary run (``runner.run``) under its own result key, in the same store, with the same
tasks, seeds, splits and evaluation runtime: a second run reuses the records and costs nothing, and
the plm-mean row reuses the embedding cache of any earlier plm-mean run of the same model. The cost
of a first run is one evaluation of each row (no training). A method that does not train has no
reference rows (it is its own start); a method with no base model (QT's word vectors, BM25) has no
start row; a method whose step 0 reads nothing (BERT-flow) has no step-0 row.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from benchbench.core.errors import ConfigError
from benchbench.core.methods import step0_options_of
from benchbench.core.registry import Registry, get_registry
from benchbench.run.runner import RunOptions, RunReport, process_rank, run

log = logging.getLogger(__name__)

START_METHOD = "plm-mean"  # the start's own readout: mean pooling, no training


@dataclass(frozen=True)
class Reference:
    """One reference row: its ``label`` in the table, what it ``means`` (a table note) and the
    options of the run that computes it."""

    label: str
    means: str
    options: RunOptions


def references_for(opts: RunOptions, registry: Registry | None = None) -> tuple[list[Reference], str]:
    """(the reference rows of the run ``opts``, in table order, and why a reading is missing: "" when
    none is). Empty for a training-free method, a --setup other than unsupervised (its stages train
    the start before the method does: there is no untouched start to read) and a multi-process run
    (the references run afterwards on one process). Each row's options are ``opts`` with the method
    and its options replaced, no learning curve and no --force/--retrain: a reference is computed
    once and reused."""
    reg = registry or get_registry()
    cls = reg.method(opts.method)
    if not getattr(cls, "trains", True):
        return [], ""
    if str(opts.setup) != "unsupervised":
        return [], f"--setup {opts.setup}: no reference rows (they read an untrained start; this setup trains it first)"
    if process_rank()[1] > 1:
        return [], "a multi-process run computes no reference rows; run the same command on one process for them"
    common = dict(force=False, retrain=False, eval_every=0, eval_task=None)
    out: list[Reference] = []
    why: list[str] = []
    model = opts.model or getattr(cls, "default_model", None)
    if getattr(cls, "fixed_model", None):
        why.append(f"{opts.method} has no base model to read untrained (no start row)")
    elif START_METHOD in reg.methods and model:
        start = dataclasses.replace(
            opts, method=START_METHOD, model=model, overrides={}, corpus=None, train_task=None, score="bi", **common
        )
        out.append(Reference(f"start: {START_METHOD} (no training)", _START_MEANS, start))
    try:
        stop = step0_options_of(cls)
    except ConfigError as e:
        why.append(f"no step-0 row: {str(e).split(': ', 1)[-1]}")
    else:
        if any(str(opts.overrides.get(k)) != str(v) for k, v in stop.items()):  # else the run IS its step 0
            step0 = dataclasses.replace(opts, overrides={**opts.overrides, **stop}, **common)
            out.append(Reference(f"{opts.method} at step 0 (no training)", _STEP0_MEANS, step0))
    return out, "; ".join(why)


_START_MEANS = "the base model read with its own mean pooling, untrained: is the trained row worth using"
_STEP0_MEANS = (
    "the start through the method's own pooling, head and template before its first update: did training move it"
)


def run_references(refs: list[Reference], registry: Registry | None = None) -> list[tuple[Reference, RunReport]]:
    """Each reference row's run, in order. A reference that fails is named in a warning and left out
    (the trained row is stored already, and a table without its context is still its table); an
    interrupt is not caught."""
    out = []
    for ref in refs:
        try:
            out.append((ref, run(ref.options, registry)))
        except Exception as e:  # named, never silent; the run's own result stands
            log.warning("reference row %r not computed: %s: %s", ref.label, type(e).__name__, e)
    return out


def reference_rows(done: list[tuple[Reference, RunReport]]) -> list[tuple[str, str, str]]:
    """(method, config hash, label) of each computed reference row, as ``report.leaderboard.summarise``
    takes them to put those rows first under their labels."""
    rows: list[tuple[str, str, str]] = []
    for ref, report in done:
        hashes = dict.fromkeys(str(r.get("config_hash", "")) for r in report.records)
        rows.extend((ref.options.method, h, ref.label) for h in hashes)
    return rows


def records_of(done: list[tuple[Reference, RunReport]]) -> list[dict[str, Any]]:
    """Every record the reference runs stored or reused."""
    return [r for _, report in done for r in report.records]
