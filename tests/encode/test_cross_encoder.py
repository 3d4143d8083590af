"""The library's cross-encoder (``benchbench.CrossEncoderScorer``) and its objective
(``benchbench.CrossEncoderObjective``): a seeded head that leaves the global RNG alone, scores in input
order whatever the batching, a saved folder of safetensors that reloads to the same scores, a pickled
folder refused, and the objective's loss being its loss of the scorer's logits on flattened batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchbench import ConfigError, CrossEncoderObjective, CrossEncoderScorer, soft_bce, tiny_bert

A = ["a man plays a guitar", "the cat sleeps", "stocks fell sharply today on the news", "rain"]
B = ["a person plays music", "a dog runs in the park", "the market dropped", "the sun is shining brightly"]


@pytest.fixture(scope="module")
def scorer():
    return CrossEncoderScorer.from_encoder(tiny_bert(16, 1, 2, 32, seed=1), max_length=32, seed=5)


def test_the_head_is_seeded_and_the_global_rng_untouched(scorer):
    before = torch.random.get_rng_state()
    again = CrossEncoderScorer.from_encoder(tiny_bert(16, 1, 2, 32, seed=1), max_length=32, seed=5)
    assert torch.equal(torch.random.get_rng_state(), before)
    other = CrossEncoderScorer.from_encoder(tiny_bert(16, 1, 2, 32, seed=1), max_length=32, seed=6)
    assert again.fingerprint == scorer.fingerprint != other.fingerprint
    assert scorer.head_names() == {
        "model.bert.pooler.dense.weight",
        "model.bert.pooler.dense.bias",
        "model.classifier.weight",
        "model.classifier.bias",
    }


def test_scores_come_back_in_input_order_whatever_the_batch(scorer):
    one_by_one = np.array([torch.sigmoid(scorer.logits([a], [b])).item() for a, b in zip(A, B)])
    for batch_size in (1, 3, 64):  # longest-first batching, then put back in order
        scorer.batch_size = batch_size
        np.testing.assert_allclose(scorer.score_pairs(A, B), one_by_one, atol=1e-6, rtol=0)
    assert len(set(np.round(one_by_one, 6))) == len(A)  # four different scores: an order slip would show


def test_saved_as_safetensors_and_reloaded_to_the_same_scores(scorer, tmp_path):
    path = scorer.save(tmp_path / "ce")
    assert (path / "model.safetensors").is_file() and not list(path.glob("*.bin"))
    back = CrossEncoderScorer.load(path)
    assert back.max_length == 32 and back.fingerprint == scorer.fingerprint
    np.testing.assert_allclose(back.score_pairs(A, B), scorer.score_pairs(A, B), atol=1e-6, rtol=0)


def test_a_pickled_cross_encoder_is_refused(scorer, tmp_path):
    path = scorer.save(tmp_path / "ce")
    state = {k: v.clone() for k, v in scorer.model.state_dict().items()}
    (path / "model.safetensors").unlink()
    torch.save(state, path / "pytorch_model.bin")
    with pytest.raises(ConfigError, match="pickle"):
        CrossEncoderScorer.load(path)


def test_the_objective_is_its_loss_of_the_logits_on_flattened_batches(scorer):
    items = [(A[0], B[0], 0.9), (A[1], B[1], -0.2)]
    batched = [[items[0]], [items[1], (A[2], B[2], 0.4)]]  # pre-made batches, as Trans-Encoder hands them
    obj = CrossEncoderObjective(scorer)
    scorer.eval()
    batch = obj.collate(batched, np.random.default_rng(0))
    assert batch["n_tokens"] == int(batch["attention_mask"].sum()) > 0
    batch.pop("n_tokens")
    logits = scorer.logits(A[:3], B[:3])
    want = soft_bce(logits, torch.tensor([0.9, -0.2, 0.4]))
    assert obj(**batch).item() == pytest.approx(want.item(), abs=1e-7)
    # soft BCE clips targets into [0, 1]: -0.2 counts as 0
    assert want.item() == pytest.approx(soft_bce(logits, torch.tensor([0.9, 0.0, 0.4])).item(), abs=1e-7)
    seen = []
    custom = CrossEncoderObjective(scorer, loss=lambda lg, y: seen.append(y) or lg.sum())
    single = custom.collate(items, np.random.default_rng(0))
    single.pop("n_tokens")
    custom(**single)
    assert seen[0].tolist() == pytest.approx([0.9, -0.2])  # the method's own loss gets the raw targets


def _cased(s: CrossEncoderScorer) -> None:
    from transformers import BertTokenizerFast

    from benchbench.encode.models import BUNDLED_VOCAB

    s.tokenizer = BertTokenizerFast(vocab=str(BUNDLED_VOCAB), do_lower_case=False)


def _more_tokens(s: CrossEncoderScorer) -> None:
    import copy

    s.tokenizer = copy.deepcopy(s.tokenizer)
    s.tokenizer.add_tokens(["glockenspiel"])  # was two word pieces, now one new token (its row exists already)


def _nudged(s: CrossEncoderScorer) -> None:
    s.model.classifier.weight.data.mul_(3.0)  # a write the version counters do not see


# each field that changes a score, changed alone
CROSS_FIELDS = {
    "max_length": lambda s: setattr(s, "max_length", 4),
    "weights (in place)": _nudged,
    "tokenizer lowercasing": _cased,
    "tokenizer vocabulary": _more_tokens,
}


@pytest.mark.parametrize("field", list(CROSS_FIELDS))
def test_each_field_that_changes_a_cross_encoders_scores_changes_its_fingerprint(field):
    """Issue 50: no test varied the max length, so a fingerprint without it survived mutation. One
    field at a time: the scores differ (checked) and so must the fingerprint."""
    import copy

    base = CrossEncoderScorer.from_encoder(tiny_bert(16, 1, 2, 32, seed=1), max_length=32, seed=5)
    base.model.resize_token_embeddings(len(base.tokenizer) + 1)  # room for the added token
    A2 = [a.upper() for a in A[:-1]] + ["a glockenspiel"]
    changed = copy.deepcopy(base)
    CROSS_FIELDS[field](changed)
    assert not np.allclose(changed.score_pairs(A2, B), base.score_pairs(A2, B), atol=1e-7, rtol=0), field
    assert changed.fingerprint != base.fingerprint


def test_batch_size_leaves_a_cross_encoders_fingerprint_alone(scorer):
    """A key must not depend on what does not change the value: the batching does not change scores."""
    import copy

    other = copy.deepcopy(scorer)
    other.batch_size = 1
    np.testing.assert_allclose(other.score_pairs(A, B), scorer.score_pairs(A, B), atol=1e-6, rtol=0)
    assert other.fingerprint == scorer.fingerprint
