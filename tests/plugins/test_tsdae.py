"""TSDAE's defining mechanisms: the decoder sees only the pooled sentence vector, encoder and decoder
are tied, the vocabulary projection covers only target positions, and the noise does what it says."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from benchbench_plugins.tsdae import TSDAE, TSDAEConfig, TSDAEObjective, build_decoder, lm_head

from benchbench.core.errors import ConfigError
from benchbench.encode.models import load_encoder, tiny_bert
from benchbench.train.context import TrainContext
from benchbench.train.noise import WordNoise, words

SENTS = [
    "the quick brown fox jumps over the lazy dog .",
    "a second sentence , somewhat longer than the first one",
    "short one",
    "how do i install ubuntu on a usb stick ?",
]


def _objective(pooling="cls", fast=True, tie=True):
    enc = tiny_bert(16, 1, 2, 32, pooling=pooling, seed=1)
    return TSDAEObjective(enc, build_decoder(enc, tie=tie, fast_cross_attention=fast), WordNoise("delete", 0.6))


def _batch(obj, seed=0):
    b = obj.collate(SENTS, np.random.default_rng(seed))
    b.pop("n_tokens")
    return b


def _perturb_non_pooled_states(obj):
    """Forward hook replacing every token state except position 0 ([CLS]) with noise."""

    def hook(module, args, output):
        h = output.last_hidden_state
        output.last_hidden_state = torch.cat([h[:, :1], torch.randn_like(h[:, 1:]) * 5], 1)
        return output

    return obj.encoder.model.register_forward_hook(hook)


def _decoder_states(obj, b, perturb=False):
    """The decoder states that reach the vocabulary projection (and the loss)."""
    rows = []
    h1 = lm_head(obj.decoder).register_forward_hook(lambda m, a, o: rows.append(a[0]))
    h2 = _perturb_non_pooled_states(obj) if perturb else None
    with torch.no_grad():
        loss = obj(**b)
    h1.remove()
    if h2:
        h2.remove()
    return rows[0], loss


@pytest.mark.parametrize("fast", [True, False])
def test_decoder_sees_only_the_pooled_vector(fast):
    obj = _objective("cls", fast).eval()
    b = _batch(obj)
    ref, ref_loss = _decoder_states(obj, b)
    changed, changed_loss = _decoder_states(obj, b, perturb=True)
    assert torch.equal(ref, changed) and torch.equal(ref_loss, changed_loss)
    # control: with mean pooling the same perturbation reaches the decoder through the vector
    mean = _objective("mean", fast).eval()
    ref, _ = _decoder_states(mean, b)
    changed, _ = _decoder_states(mean, b, perturb=True)
    assert (ref - changed).abs().max() > 1e-2


def test_decoder_output_depends_on_the_sentence_vector_and_is_causal():
    obj = _objective().eval()
    ids = obj.encoder.tokenize(SENTS[:1])["input_ids"]
    s = torch.randn(1, 16)
    with torch.no_grad():
        h1 = obj.decode_hidden(ids, s)
        h2 = obj.decode_hidden(ids, s + 1)
        ids2 = ids.clone()
        ids2[0, -2] = 2000
        h3 = obj.decode_hidden(ids2, s)
    assert not torch.allclose(h1, h2)
    assert torch.allclose(h1[:, :-1], h3[:, :-1])  # a later token cannot change an earlier state


def test_one_vector_shortcut_equals_the_library_cross_attention():
    fast = _objective(fast=True)
    slow = _objective(fast=False)
    slow.decoder.load_state_dict(fast.decoder.state_dict())
    b = _batch(fast)
    with torch.no_grad():
        assert torch.allclose(fast.eval()(**b), slow.eval()(**b), atol=1e-5)
    # training mode: attention dropout still acts on the one-key attention (losses differ run to run)
    fast.train()
    torch.manual_seed(0)
    a = fast(**b)
    torch.manual_seed(1)
    assert not torch.equal(a, fast(**b))


def test_encoder_and_decoder_are_tied():
    obj = _objective()
    enc, dec = obj.encoder.model, obj.decoder.bert
    assert dec.embeddings.word_embeddings.weight is enc.embeddings.word_embeddings.weight
    assert dec.encoder.layer[0].attention.self.query.weight is enc.encoder.layer[0].attention.self.query.weight
    assert obj.decoder.get_output_embeddings().weight is enc.embeddings.word_embeddings.weight
    untied = _objective(tie=False)
    assert (
        untied.decoder.bert.encoder.layer[0].output.dense.weight
        is not untied.encoder.model.encoder.layer[0].output.dense.weight
    )
    assert torch.equal(
        untied.decoder.bert.encoder.layer[0].output.dense.weight,
        untied.encoder.model.encoder.layer[0].output.dense.weight,
    )


def test_vocabulary_projection_only_on_target_positions():
    obj = _objective()
    b = _batch(obj)
    rows = []
    handle = lm_head(obj.decoder).register_forward_hook(lambda m, a, o: rows.append(a[0].shape[0]))
    obj(**b)
    handle.remove()
    labels = b["target_ids"][:, 1:]
    assert rows == [int((labels != obj.pad_id).sum())]
    assert rows[0] < labels.numel()  # the batch has padding, and it was skipped


@pytest.mark.parametrize(
    "kind,ratio", [("delete", 0.6), ("delete", 0.3), ("mask", 0.3), ("add", 0.3), ("replace", 0.3)]
)
def test_noise_ratio_is_honoured_on_average(kind, ratio):
    text = " ".join(f"w{i}" for i in range(40))
    noise = WordNoise(kind, ratio, "[MASK]")
    rng = np.random.default_rng(0)
    out = noise([text] * 300, rng)
    if kind == "delete":
        frac = 1 - np.mean([len(words(t)) for t in out]) / 40
    elif kind == "mask":
        frac = np.mean([t.count("[MASK]") for t in out]) / 40
    elif kind == "add":
        frac = np.mean([len(t.split()) - 40 for t in out]) / 40
    else:
        frac = np.mean([sum(a != b for a, b in zip(t.split(), text.split())) for t in out]) / 40
        frac = frac / (1 - 1 / 40)  # a replacement may draw the same word
    assert abs(frac - ratio) < 0.03, (kind, frac)


def test_swap_moves_the_requested_share_and_keeps_the_words():
    text = " ".join(f"w{i}" for i in range(40))
    out = WordNoise("swap", 0.3)([text] * 200, np.random.default_rng(1))
    assert all(sorted(t.split()) == sorted(text.split()) for t in out)
    moved = np.mean([sum(a != b for a, b in zip(t.split(), text.split())) for t in out])
    assert 0.2 * 40 < moved <= 0.3 * 40


def test_noise_is_fresh_per_draw_reproducible_per_rng_and_keeps_a_word():
    noise = WordNoise("delete", 0.6)
    a = noise(SENTS, np.random.default_rng(1))
    assert a == noise(SENTS, np.random.default_rng(1))
    assert a != noise(SENTS, np.random.default_rng(2))
    assert all(t for t in WordNoise("delete", 1.0)(SENTS, np.random.default_rng(0)))
    assert WordNoise("delete", 0.0)(["Hello, world!  x"], np.random.default_rng(0)) == ["Hello, world! x"]
    with pytest.raises(ConfigError):
        WordNoise("shuffle", 0.3)


def test_paper_defaults_and_bad_options():
    c = TSDAEConfig()
    assert (c.lr, c.batch_size, c.noise, c.noise_ratio, c.pooling, c.tie_encoder_decoder, c.steps) == (
        3e-5,
        8,
        "delete",
        0.6,
        "cls",
        True,
        100_000,
    )
    with pytest.raises(ConfigError):
        TSDAE(TSDAEConfig(noise="blur")).build(TrainContext(model="tiny-bert", seed=0, output_dir=None))


def test_train_saves_a_sentence_transformers_folder_usable_as_model(tmp_path):
    ctx = TrainContext(model="tiny-bert:16:1:2:32", seed=0, output_dir=tmp_path, progress=False, device="cpu")
    start = load_encoder("tiny-bert:16:1:2:32")
    enc = TSDAE(TSDAEConfig(steps=3, batch_size=2, lr=1e-3)).train(SENTS * 3, ctx)
    assert ctx.accounting["steps"] == 3 and ctx.accounting["examples"] == 6 and ctx.accounting["tokens"] > 0
    assert not np.allclose(enc.encode(SENTS), start.encode(SENTS))
    enc.save(tmp_path / "enc")
    again = load_encoder(str(tmp_path / "enc"))
    assert again.pooling == "cls"
    assert np.allclose(again.encode(SENTS), enc.encode(SENTS), atol=1e-5)
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(tmp_path / "enc"), device="cpu")
    assert np.allclose(st.encode(SENTS), enc.encode(SENTS), atol=1e-4)


def test_length_grouping_is_exact_and_covers_the_batch():
    from benchbench.train.loop import length_groups

    groups = length_groups(torch.tensor([30, 5, 6, 29, 7, 31, 5, 28]), overhead=4)
    assert sorted(torch.cat(groups).tolist()) == list(range(8)) and len(groups) == 2
    assert len(length_groups(torch.tensor([9, 9, 9, 9]))) == 1
    obj = _objective().eval()
    b = _batch(obj)
    plain = obj(**b)
    obj.group_by_length = True
    assert torch.allclose(plain, obj(**b), atol=1e-5)


def test_sparse_lookup_gradients_give_the_same_gradient_and_are_handed_back_dense():
    """On CPU the tied lookups' gradients are sparse rows added to the projection's dense gradient:
    the summed gradient must equal the all-dense one, and must itself be dense (AdamW needs it)."""
    grads = {}
    for sparse in (False, True):
        torch.manual_seed(0)  # the decoder's own (untied) weights are drawn at build time
        obj = _objective()
        obj.sparse_embedding_grad = sparse
        obj.train()
        torch.manual_seed(3)  # the same dropout masks in both runs
        obj(**_batch(obj)).backward()
        w = obj.encoder.model.embeddings.word_embeddings.weight
        assert w.grad is not None and w.grad.layout == torch.strided
        assert obj.encoder.model.embeddings.word_embeddings.sparse is sparse
        grads[sparse] = {n: p.grad.clone() for n, p in obj.named_parameters() if p.grad is not None}
    assert grads[True].keys() == grads[False].keys()
    for n in grads[False]:
        torch.testing.assert_close(grads[True][n], grads[False][n], atol=1e-6, rtol=1e-5, msg=n)
    obj.sparse_lookups(False)
    assert not any(m.sparse for m in obj._tied_lookups) and len(obj._tied_lookups) == 2  # encoder's and decoder's


def test_speed_only_options_do_not_change_the_config_hash():
    from benchbench.core.methods import config_hash

    assert config_hash(TSDAEConfig()) == config_hash(TSDAEConfig(sparse_embedding_grad=True))
    assert config_hash(TSDAEConfig()) != config_hash(TSDAEConfig(steps=10))
