"""Trans-Encoder's ``both_orders`` branch, enabled.

Every Trans-Encoder test set ``both_orders="false"``, so its swapped (b, a) training pairs were never
built in a test, and writing them as (a, b) passed the suite. The cross-encoder reads a pair in order
(segment ids, positions), so on a tiny deterministic BERT the two orders give different logits: with
both orders the bi->cross phase sees 12 distinct examples for 6 pairs, each order with the pair's
bi-encoder label; with one order, or the branch broken, it sees 6.
"""

from __future__ import annotations

import numpy as np
import pytest
from benchbench_plugins import trans_encoder as te
from test_trans_encoder import PAIRS, Spy, _cos, _ctx, _method, _tiny_dir


def _cross_examples(monkeypatch) -> list[list[tuple]]:
    seen: list[list[tuple]] = []
    real = te.TransEncoder._phase

    def spy(self, t, kind, examples, *a, **kw):
        if kind == "cross":
            seen.append(list(examples))
        return real(self, t, kind, examples, *a, **kw)

    monkeypatch.setattr(te.TransEncoder, "_phase", spy)
    return seen


def test_both_orders_trains_the_cross_encoder_on_a_b_and_b_a_with_one_label(tmp_path, monkeypatch):
    model = _tiny_dir(tmp_path)
    seen = _cross_examples(monkeypatch)
    bce = Spy(monkeypatch, "bi_to_cross_loss")
    _method(both_orders="true").train([], _ctx(tmp_path, model))
    (examples,) = seen
    labels = dict(zip(PAIRS, _cos(model)))
    assert [(a, b) for a, b, _ in examples] == [*PAIRS, *((b, a) for a, b in PAIRS)]
    for a, b, y in examples:  # each order carries its pair's bi-encoder cosine
        assert y == pytest.approx(labels.get((a, b), labels.get((b, a))), abs=1e-6)
    ((logits, targets),) = bce.calls  # one batch of 12
    # the orders differ (a pair given twice in one order would give one logit twice, bit for bit)
    assert len(logits) == 12 and len(np.unique(logits.numpy())) == 12
    np.testing.assert_allclose(np.sort(targets.numpy()), np.sort(np.repeat(_cos(model), 2)), atol=1e-6)


@pytest.mark.parametrize(
    "both_orders,task,expected",
    [("false", None, 6), ("auto", None, 12), ("auto", "qnli", 6), ("true", "qnli", 12)],
)
def test_which_runs_train_both_orders(tmp_path, monkeypatch, both_orders, task, expected):
    """``auto``: both orders, except for QNLI (question vs answer: not symmetric); ``true`` forces them."""
    model = _tiny_dir(tmp_path)
    seen = _cross_examples(monkeypatch)
    ctx = _ctx(tmp_path, model)
    ctx.task = task
    _method(both_orders=both_orders).train([], ctx)
    assert [len(e) for e in seen] == [expected]
    assert ctx.accounting["both_orders"] is (expected == 12)
