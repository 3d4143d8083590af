"""InfoCSE's mechanisms: the auxiliary masked LM reads the FROZEN lower layers' token states of the
MASKED sentence at positions 1.. and the encoder's last-layer [CLS] of the UNMASKED sentence (before the
MLP) at position 0, so its gradient reaches the encoder only through [CLS]; the frozen network is the
start's first ``skip_from`` layers, without gradient or dropout, and never moves; the head layers are
new and BERT-initialised, the LM head the checkpoint's (untied) or random (said in the record); each
view's row is masked on its own (40% chosen, 80/10/10, never a special token); loss = InfoNCE +
``mlm_weight`` x the masked-token cross-entropy. Equality with a transcription of the reference's
``cl_forward`` (loss, gradients, 3 SGD steps); with the reference's own code when its mirror is here
(bench/fidelity_infocse.py). Defaults pinned to the BERT-base run script; the build path a run takes."""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from benchbench_plugins import infocse as mod
from benchbench_plugins.infocse import InfoCSE, InfoCSEConfig, InfoCSEObjective, random_lm_head
from helpers import lrs_over

from benchbench import ConfigError, TrainContext, tiny_bert
from benchbench.testing import check_method

TINY = "tiny-bert:16:1:2:32"
CORPUS = [f"sentence number {i} is about topic {i % 5} and has some more words {i * 3}" for i in range(24)]
# every third sentence cut to a few words: each batch of 6 holds padding, so the attention masks matter
RAGGED = [s if i % 3 else " ".join(s.split()[: 2 + i % 4]) for i, s in enumerate(CORPUS)]
OVERRIDES = {"skip_from": 1, "batch_size": 4}


def _encoder(dropout=0.0, layers=2, hidden=16, seed=0):
    enc = tiny_bert(hidden, layers, 2, 2 * hidden, pooling="cls", max_seq_length=32, seed=seed)
    enc.model.config._attn_implementation = "eager"
    for m in enc.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = dropout
    return enc


def _objective(dropout=0.0, skip_from=1, mlm_weight=1.0, temperature=1.0, frozen_eval=True, seed=0):
    enc = _encoder(dropout, seed=seed)
    torch.manual_seed(seed)
    obj = InfoCSEObjective(enc, None, temperature, mlm_weight, 0.4, skip_from, 2, frozen_eval)
    for m in obj.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = dropout
    return obj.train()


def _batch(obj, n=6, seed=0):
    b = obj.collate(RAGGED[:n], np.random.default_rng(seed))
    b.pop("n_tokens")
    assert (b["attention_mask"] == 0).any()
    return b


# ---- defaults --------------------------------------------------------------------------------------
def test_defaults_are_the_bert_base_run_scripts():
    c = InfoCSEConfig()
    assert (c.batch_size, c.lr, c.epochs, c.max_seq_length, c.temperature) == (64, 7e-6, 2.0, 32, 0.05)
    assert (c.mlm_weight, c.mlm_probability, c.n_head_layers, c.frozen_eval) == (1e-5, 0.4, 2, True)
    assert c.skip_from is None  # the paper's 6 of BERT-base's 12 layers, as a share of the start's
    assert (c.pooling, c.max_grad_norm, c.steps, c.grad_accum, c.checkpoint_every) == ("cls", 1.0, None, 1, 1000)


def _shape(hidden: int, layers: int):
    from benchbench.encode.sizes import Shape

    return Shape(hidden, layers, 12, 4 * hidden, 30522, 512)


@pytest.mark.parametrize("layers,half", [(12, 6), (6, 3), (2, 1), (1, 1), (24, 12)])
def test_skip_from_defaults_to_half_the_starts_layers(layers, half):
    """BERT-base's 12 give the paper's 6; all-MiniLM-L6-v2's 6 give 3; tiny-bert's 2 give 1, never 0."""
    assert InfoCSE.model_defaults(InfoCSEConfig(), _shape(384, layers)) == {"skip_from": half}
    assert InfoCSE(InfoCSEConfig()).skip_from(layers) == half  # the build path's rule is the same
    InfoCSE(InfoCSEConfig())._check(layers)  # the default always fits the start
    assert InfoCSE.model_defaults(InfoCSEConfig(skip_from=4), _shape(384, layers)) == {}  # an explicit value wins
    assert InfoCSE.model_defaults(InfoCSEConfig(), _shape(0, 0)) == {}  # shape unknown: left to the build


def test_a_default_run_shares_its_key_with_an_explicit_run_of_the_same_value():
    """The runner hashes the resolved config: on all-MiniLM-L6-v2 the default is the explicit skip_from=3
    the stored study records name, on BERT-base the old default 6."""
    from benchbench.core.methods import config_hash, resolve_model_defaults

    for layers, value in ((6, 3), (12, 6)):
        resolved = resolve_model_defaults(InfoCSE, InfoCSEConfig(), _shape(768, layers))
        assert config_hash(resolved) == config_hash(InfoCSEConfig(skip_from=value))


def test_the_objectives_own_defaults_are_the_references():
    import inspect

    got = {k: v.default for k, v in inspect.signature(InfoCSEObjective).parameters.items() if k != "encoder"}
    assert got == {
        "lm_head": None,
        "temperature": 0.05,
        "mlm_weight": 1e-5,
        "mlm_probability": 0.4,
        "skip_from": 6,
        "n_head_layers": 2,
        "frozen_eval": True,
        "batchnorm": True,
    }


def test_loss_chance_is_ln_b_plus_weight_times_ln_vocab():
    obj = _objective()
    v = len(obj.encoder.tokenizer)
    got = InfoCSE(InfoCSEConfig(batch_size=8, mlm_weight=0.5)).loss_chance(obj)
    assert got == pytest.approx(math.log(8) + 0.5 * math.log(v), abs=1e-9)


# ---- masking ---------------------------------------------------------------------------------------
def test_collate_masks_each_views_row_on_its_own_40_percent_80_10_10_never_a_special_token():
    obj = _objective()
    tok = obj.encoder.tokenize(RAGGED[:8])
    ids = tok["input_ids"].repeat_interleave(2, 0)
    special = torch.isin(ids, obj.special_ids)
    counts = np.zeros(4)  # chosen, chosen -> [MASK], chosen -> other id, chosen and kept
    rng = np.random.default_rng(0)
    for _ in range(150):
        b = obj.collate(RAGGED[:8], rng)
        assert torch.equal(b["input_ids"], tok["input_ids"]) and b["mlm_input_ids"].shape == ids.shape
        chosen = b["mlm_labels"] != -100
        assert not (chosen & special).any() and torch.equal(b["mlm_input_ids"][special], ids[special])
        assert torch.equal(b["mlm_labels"][chosen], ids[chosen])  # the label is the original token
        assert torch.equal(b["mlm_input_ids"][~chosen], ids[~chosen])  # nothing else changes
        out = b["mlm_input_ids"]
        masked = out == obj.encoder.tokenizer.mask_token_id
        counts += [int(chosen.sum()), int((chosen & masked).sum()), int((chosen & ~masked & (out != ids)).sum())] + [
            int((chosen & (out == ids)).sum())
        ]
        assert b["n_tokens"] == 2 * int(tok["attention_mask"].sum())
    real = int((~special).sum()) * 150
    assert counts[0] / real == pytest.approx(0.4, abs=0.01)
    assert counts[1] / counts[0] == pytest.approx(0.8, abs=0.015)
    assert counts[2] / counts[0] == pytest.approx(0.1, abs=0.01)  # (a random id can be the same: rare)
    assert counts[3] / counts[0] == pytest.approx(0.1, abs=0.01)
    # the two views' rows of one sentence (2i, 2i + 1) are masked independently
    b = obj.collate(CORPUS[:8], np.random.default_rng(3))
    assert all(not torch.equal(b["mlm_labels"][2 * i], b["mlm_labels"][2 * i + 1]) for i in range(8))


def test_collate_is_transformers_masking_seeded_from_the_loops_rng():
    obj = _objective()
    a = obj.collate(CORPUS[:6], np.random.default_rng(7))
    b = obj.collate(CORPUS[:6], np.random.default_rng(7))
    assert torch.equal(a["mlm_input_ids"], b["mlm_input_ids"]) and torch.equal(a["mlm_labels"], b["mlm_labels"])
    ids = obj.encoder.tokenize(CORPUS[:6])["input_ids"].repeat_interleave(2, 0)
    for s in range(7, 13):  # several loop states: the generator's seed is the rng's next draw below 2**62
        got = obj.collate(CORPUS[:6], np.random.default_rng(s))
        obj.masker.generator = torch.Generator().manual_seed(int(np.random.default_rng(s).integers(2**62)))
        want, labels = obj.masker.torch_mask_tokens(ids.clone(), torch.isin(ids, obj.special_ids))
        assert torch.equal(got["mlm_input_ids"], want) and torch.equal(got["mlm_labels"], labels)
    assert obj.masker.mlm_probability == 0.4
    c = obj.collate(CORPUS[:6], np.random.default_rng(8))
    assert not torch.equal(a["mlm_input_ids"], c["mlm_input_ids"])


# ---- the auxiliary network --------------------------------------------------------------------------
def test_frozen_network_is_the_starts_lower_layers_without_gradient():
    from transformers.models.bert.modeling_bert import BertPooler

    enc = _encoder(layers=3)
    enc.model.pooler = BertPooler(enc.model.config)  # bert-base has one (tiny BERT is built without)
    obj = InfoCSEObjective(enc, skip_from=2)
    assert len(obj.frozen.encoder.layer) == 2 and obj.frozen.config.num_hidden_layers == 2
    assert len(enc.model.encoder.layer) == 3 and enc.model.config.num_hidden_layers == 3  # the encoder's untouched
    start = dict(enc.model.named_parameters())
    for k, p in obj.frozen.named_parameters():
        assert torch.equal(p, start[k]) and p is not start[k] and not p.requires_grad
    assert not any(k.startswith("encoder.layer.2") for k, _ in obj.frozen.named_parameters())
    assert obj.frozen.pooler is None and not any("pooler" in k for k in obj.frozen.state_dict())  # unused
    with torch.no_grad():  # its states are those of the start's lower two layers
        tok = enc.tokenize(CORPUS[:3])
        full = enc.model(**tok, output_hidden_states=True).hidden_states[2]
        mine = obj.frozen(**tok).last_hidden_state
    assert torch.allclose(full, mine, atol=1e-5)


@pytest.mark.parametrize("frozen_eval", [True, False])
def test_frozen_network_runs_without_dropout_unless_asked(frozen_eval):
    obj = _objective(dropout=0.3, frozen_eval=frozen_eval)
    b = _batch(obj)
    seen = []
    obj.frozen.register_forward_hook(lambda m, i, o: seen.append(o.last_hidden_state.detach().clone()))
    obj(**b)
    obj(**b)
    assert torch.equal(seen[0], seen[1]) == frozen_eval
    assert obj.frozen.training != frozen_eval and obj.encoder.training


def test_head_layers_are_new_bert_initialised_layers_of_the_encoders_class():
    enc = _encoder(hidden=64)
    torch.manual_seed(0)
    obj = InfoCSEObjective(enc, skip_from=1, n_head_layers=3)
    assert len(obj.c_head) == 3 and all(type(x) is type(enc.model.encoder.layer[0]) for x in obj.c_head)
    std = enc.model.config.initializer_range
    for layer in obj.c_head:
        for m in layer.modules():
            if isinstance(m, torch.nn.Linear):
                assert m.weight.std().item() == pytest.approx(std, rel=0.15) and m.weight.mean().abs() < 0.01
                assert torch.count_nonzero(m.bias) == 0
            elif isinstance(m, torch.nn.LayerNorm):
                assert torch.all(m.weight == 1) and torch.count_nonzero(m.bias) == 0
    start = [p for p in enc.model.encoder.layer[0].parameters()]
    assert not any(torch.equal(p, q) for p, q in zip(obj.c_head[0].parameters(), start) if p.dim() == 2)


def test_the_pretrained_lm_head_is_copied_untied_and_a_missing_one_is_random(generator_dir, tmp_path, monkeypatch):
    from transformers import BertForMaskedLM

    seen = {}
    real = mod.InfoCSEObjective
    monkeypatch.setattr(mod, "InfoCSEObjective", lambda *a, **k: seen.setdefault("obj", real(*a, **k)))
    monkeypatch.setattr(mod, "fit", lambda m, obj, *a, **k: obj)
    ctx = TrainContext(model=str(generator_dir), seed=0, output_dir=tmp_path, progress=False, device="cpu")
    InfoCSE(InfoCSEConfig(**OVERRIDES)).train(CORPUS, ctx)
    assert ctx.accounting["pretrained_lm_head"] == "loaded"
    head, mlm = seen["obj"].lm_head, BertForMaskedLM.from_pretrained(generator_dir)
    for (k, p), q in zip(head.state_dict().items(), mlm.cls.state_dict().values()):
        assert torch.equal(p, q), k
    emb = seen["obj"].encoder.model.embeddings.word_embeddings.weight
    assert head.predictions.decoder.weight is not emb and torch.equal(head.predictions.decoder.weight, emb)
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path / "t", progress=False, device="cpu")
    InfoCSE(InfoCSEConfig(**OVERRIDES)).train(CORPUS, ctx)
    assert ctx.accounting["pretrained_lm_head"].startswith("none")


# ---- the loss ---------------------------------------------------------------------------------------
def _by_hand(obj, b, dropout_free=True):
    """The objective's loss written out: both views' [CLS] (rows 2i + v), InfoNCE on the MLP's output,
    and the masked LM over [CLS; frozen(masked)[1:]] through the head layers, full-vocabulary CE."""
    n = b["input_ids"].shape[0]
    ids, mask = b["input_ids"].repeat_interleave(2, 0), b["attention_mask"].repeat_interleave(2, 0)
    tt = b["token_type_ids"].repeat_interleave(2, 0)
    hidden = obj.encoder.model(input_ids=ids, attention_mask=mask, token_type_ids=tt).last_hidden_state
    z = obj.mlp(hidden[:, 0])
    z1, z2 = z[0::2], z[1::2]
    sim = torch.nn.CosineSimilarity(dim=-1)(z1.unsqueeze(1), z2.unsqueeze(0)) / obj.temperature  # its Similarity
    cl = F.cross_entropy(sim, torch.arange(n))
    with torch.no_grad():
        skip = obj.frozen(input_ids=b["mlm_input_ids"], attention_mask=mask, token_type_ids=tt).last_hidden_state
    h = torch.cat([hidden[:, :1], skip[:, 1:]], 1)
    ext = (1.0 - mask[:, None, None, :].float()) * -10000.0
    for layer in obj.c_head:
        h = layer(h, ext)
    logits = obj.lm_head(h)
    rec = F.cross_entropy(logits.view(-1, logits.shape[-1]), b["mlm_labels"].view(-1), ignore_index=-100)
    return cl, rec


def test_the_loss_is_infonce_plus_weight_times_the_masked_lm_through_cls():
    obj = _objective(mlm_weight=0.7, temperature=0.5)
    b = _batch(obj)
    cl, rec = _by_hand(obj, b)
    assert torch.allclose(obj(**b), cl + 0.7 * rec, atol=1e-5)
    assert rec.item() > 1.0 and abs(cl.item() - rec.item()) > 0.5  # both terms matter and differ
    obj.mlm_weight = 0.0
    assert torch.allclose(obj(**b), cl, atol=1e-5)
    # the frozen network reads the MASKED sentence: fed the original, the loss would differ
    plain = dict(b, mlm_input_ids=b["input_ids"].repeat_interleave(2, 0))
    obj.mlm_weight = 1.0
    assert not torch.allclose(obj(**plain), cl + rec, atol=1e-3)


def test_the_reconstruction_sees_cls_of_the_unmasked_sentence_before_the_mlp(monkeypatch):
    obj = _objective()
    b = _batch(obj)
    got = {}
    real = obj.reconstruction_loss

    def spy(cls, *a, **k):
        got["cls"] = cls.detach().clone()
        return real(cls, *a, **k)

    monkeypatch.setattr(obj, "reconstruction_loss", spy)
    obj(**b)
    ids, mask = b["input_ids"].repeat_interleave(2, 0), b["attention_mask"].repeat_interleave(2, 0)
    with torch.no_grad():
        want = obj.encoder(
            input_ids=ids, attention_mask=mask, token_type_ids=b["token_type_ids"].repeat_interleave(2, 0)
        )
    assert torch.allclose(got["cls"], want["token_embeddings"][:, 0], atol=1e-6)
    assert not torch.allclose(got["cls"], obj.mlp(want["token_embeddings"][:, 0]), atol=1e-2)


def test_gradient_of_the_masked_lm_reaches_the_encoder_only_through_cls_and_never_the_frozen_network():
    obj = _objective()
    b = _batch(obj)
    mask = b["attention_mask"].repeat_interleave(2, 0)
    tt = b["token_type_ids"].repeat_interleave(2, 0)
    cls = torch.randn(mask.shape[0], 16, requires_grad=True)
    rec = obj.reconstruction_loss(cls, b["mlm_input_ids"], mask, b["mlm_labels"], token_type_ids=tt)
    rec.backward()
    assert cls.grad.abs().sum() > 0
    assert all(p.grad is None for p in obj.frozen.parameters())
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in obj.c_head.parameters())
    assert obj.lm_head.predictions.decoder.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in obj.encoder.parameters())  # only what is passed as [CLS]
    # through the whole objective the encoder gets the masked-LM gradient (contrastive term off)
    obj.zero_grad()
    obj.temperature = 1e9  # every similarity ~0: the InfoNCE gradient vanishes
    obj(**b).backward()
    g = obj.encoder.model.embeddings.word_embeddings.weight.grad
    assert g is not None and g.abs().max() > 1e-6


def test_a_tokenizer_without_token_type_ids_is_served():
    """RoBERTa's tokenizer gives no token_type_ids: the batch then has none, and for single sentences
    the result is BERT's with all-zero token types."""
    obj = _objective()
    b = _batch(obj)
    without = {k: v for k, v in b.items() if k != "token_type_ids"}
    assert torch.count_nonzero(b["token_type_ids"]) == 0
    assert torch.allclose(obj(**without), obj(**b), atol=1e-6)


def test_a_batch_with_no_chosen_token_adds_zero_not_nan():
    obj = _objective()
    b = _batch(obj)
    b["mlm_labels"] = torch.full_like(b["mlm_labels"], -100)
    cl, _ = _by_hand(obj, b)
    loss = obj(**b)
    assert torch.isfinite(loss) and torch.allclose(loss, cl, atol=1e-5)


def test_padding_is_masked_in_the_head_layers():
    """A sentence's loss does not depend on how much padding its batch adds (the head's attention mask)."""
    obj = _objective()
    obj.eval()
    obj.mlp.eval()
    short = obj.collate(["a short one here", CORPUS[0]], np.random.default_rng(0))
    short.pop("n_tokens")
    alone = {k: v[:1] if k in ("input_ids", "attention_mask", "token_type_ids") else v[:2] for k, v in short.items()}
    width = int(alone["attention_mask"].sum())
    alone = {k: v[:, :width] for k, v in alone.items()}
    mask = short["attention_mask"].repeat_interleave(2, 0)
    tt = short["token_type_ids"].repeat_interleave(2, 0)
    with torch.no_grad():
        cls = torch.randn(4, 16, generator=torch.Generator().manual_seed(0))
        labels = short["mlm_labels"].clone()
        labels[2:] = -100  # only the short sentence's rows count
        padded = obj.reconstruction_loss(cls, short["mlm_input_ids"], mask, labels, token_type_ids=tt)
        lone = obj.reconstruction_loss(
            cls[:2],
            alone["mlm_input_ids"],
            alone["attention_mask"].repeat_interleave(2, 0),
            alone["mlm_labels"],
            token_type_ids=alone["token_type_ids"].repeat_interleave(2, 0),
        )
    assert short["input_ids"].shape[1] > width and torch.allclose(padded, lone, atol=1e-5)


def test_equal_to_a_transcription_of_the_references_cl_forward_over_three_sgd_steps():
    """caskcsg/sentemb@5eeec55 InfoCSE/infocse/models_cls_mlm.py ``cl_forward`` (InfoNCE on the
    ProjectionMLP of both views' [CLS] + ``mlm_weight`` x CrossEntropyLoss of ``lm_head(c_head([CLS];
    mlm(mlm_input_ids).hidden_states[-1][:, 1:]))``), transcribed in ``_by_hand`` and run on a deep copy
    with the same weights: loss, every gradient and every weight after each of 3 SGD steps, within 1e-5
    (dropout 0: the two sides draw no random numbers)."""
    ours = _objective(mlm_weight=0.3, temperature=0.1)
    ref = copy.deepcopy(ours)
    opts = [torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1) for m in (ours, ref)]
    for step in range(3):
        b = ours.collate(RAGGED[step * 6 : (step + 1) * 6], np.random.default_rng(step))
        assert (b["attention_mask"] == 0).any()
        b.pop("n_tokens")
        loss_ours = ours(**b)
        cl, rec = _by_hand(ref, b)
        loss_ref = cl + 0.3 * rec
        assert abs(loss_ours.item() - loss_ref.item()) < 1e-5
        for opt, loss in zip(opts, (loss_ours, loss_ref)):
            opt.zero_grad()
            loss.backward()
        pairs = list(zip(ours.parameters(), ref.parameters()))
        assert sum(p.grad is not None for p, _ in pairs) > 40
        for p, q in pairs:
            assert (p.grad is None) == (q.grad is None)
            if p.grad is not None:
                assert torch.allclose(p.grad, q.grad, atol=1e-5)
        for opt in opts:
            opt.step()
        assert max((p - q).abs().max().item() for p, q in pairs) < 1e-5
    start = _objective(mlm_weight=0.3, temperature=0.1)
    moved = max((p - q).abs().max().item() for p, q in zip(ours.c_head.parameters(), start.c_head.parameters()))
    assert moved > 1e-5  # the steps trained the head (a comparison of two idle copies would pass anything)
    assert torch.equal(
        ours.frozen.encoder.layer[0].output.dense.weight, start.frozen.encoder.layer[0].output.dense.weight
    )


MIRROR = Path(os.environ.get("INFOCSE_MIRROR", "/work/.mirror/caskcsg+sentemb/repo"))


@pytest.mark.slow
@pytest.mark.skipif(not MIRROR.is_dir(), reason="no mirror of caskcsg/sentemb here (fetch github:caskcsg/sentemb)")
def test_equal_to_the_reference_codes_own_cl_forward(tmp_path, monkeypatch):
    import importlib.util
    import sys

    bench = Path(__file__).resolve().parents[2] / "bench"
    monkeypatch.syspath_prepend(str(bench))
    spec = importlib.util.spec_from_file_location("fidelity_infocse", bench / "fidelity_infocse.py")
    fid = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fid)
    fid.extract(str(MIRROR), tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("infocse", "infocse.models_cls_mlm"):  # the reference's package, fresh from tmp_path
        monkeypatch.delitem(sys.modules, name, raising=False)
    import infocse.models_cls_mlm as models

    monkeypatch.setattr(fid, "sts_sentences", lambda k: (CORPUS * 10)[:k])
    for wt in ((1e-5, 0.05), (1.0, 1.0)):
        for _, _, dl, dg, _, dh, dw, df in fid.check_training_steps(models, *wt):
            assert max(dl, dg, dh, dw) < fid.TOL and df == 0.0


# ---- the build path ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw,option",
    [
        ({"skip_from": 2}, "skip_from"),
        ({"skip_from": 0}, "skip_from"),
        ({"mlm_probability": 1.5}, "mlm_probability"),
        ({"mlm_probability": -0.1}, "mlm_probability"),
        ({"mlm_weight": -1.0}, "mlm_weight"),
        ({"temperature": 0.0}, "temperature"),
        ({"n_head_layers": 0}, "n_head_layers"),
    ],
)
def test_bad_options_are_refused_naming_the_option(tmp_path, kw, option):
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    with pytest.raises(ConfigError, match=f"infocse: option '{option}'"):
        InfoCSE(InfoCSEConfig(**{**OVERRIDES, "steps": 1, **kw})).train(CORPUS, ctx)


def test_limits_of_the_options_that_are_allowed():
    InfoCSE(InfoCSEConfig(skip_from=12, mlm_probability=0.0, mlm_weight=0.0, n_head_layers=1))._check(12)
    InfoCSE(InfoCSEConfig(skip_from=1, mlm_probability=1.0))._check(1)
    with pytest.raises(ConfigError, match=r"--set skip_from=3\.$"):  # half the layers suggested
        InfoCSE(InfoCSEConfig(skip_from=7))._check(6)
    with pytest.raises(ConfigError, match=r"--set skip_from=1\.$"):  # at least one
        InfoCSE(InfoCSEConfig(skip_from=2))._check(1)


def test_the_speed_knob_is_not_in_the_result_key():
    from benchbench import config_hash

    assert config_hash(InfoCSEConfig(checkpoint_every=7)) == config_hash(InfoCSEConfig())
    assert config_hash(InfoCSEConfig(mlm_weight=0.1)) != config_hash(InfoCSEConfig())


def _caught(tmp_path, monkeypatch, **kw) -> dict:
    """What ``InfoCSE.train`` hands to ``fit`` (training skipped)."""
    caught = {}
    monkeypatch.setattr(mod, "fit", lambda m, obj, items, ctx, **k: caught.update(k, obj=obj) or obj)
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    InfoCSE(InfoCSEConfig(**{**OVERRIDES, **kw})).train(CORPUS, ctx)
    return caught


def test_adamw_without_weight_decay_on_the_trained_parameters_linear_decay_to_zero(tmp_path, monkeypatch):
    caught = _caught(tmp_path, monkeypatch, steps=10, lr=1e-3)
    obj = caught["obj"]
    opt = caught["make_optimizer"](obj)
    (group,) = opt.param_groups
    assert group["lr"] == 1e-3 and group["weight_decay"] == 0.0 and isinstance(opt, torch.optim.AdamW)
    trained = {id(p) for p in group["params"]}
    assert trained == {id(p) for p in obj.parameters() if p.requires_grad}
    assert not trained & {id(p) for p in obj.frozen.parameters()} and len(trained) > 40
    lrs = lrs_over(opt, caught["make_scheduler"](opt), 10)
    assert lrs == pytest.approx([1e-3 * (1 - s / 10) for s in range(10)])
    assert caught["loop"].steps == 10 and caught["loop"].batch_size == 4 and caught["loop"].max_grad_norm == 1.0


@pytest.mark.parametrize("grad_accum,steps", [(1, 12), (2, 6)])
def test_the_default_budget_is_two_epochs_over_the_corpus(tmp_path, monkeypatch, grad_accum, steps):
    caught = _caught(tmp_path, monkeypatch, grad_accum=grad_accum)  # 24 sentences, batch 4, 2 epochs
    assert caught["loop"].steps == steps and caught["loop"].grad_accum == grad_accum


def test_result_is_a_bare_cls_copy_at_the_evaluation_length(tmp_path, monkeypatch):
    obj = _caught(tmp_path, monkeypatch, steps=1)["obj"]
    enc = obj.result()
    assert enc is not obj.encoder and type(enc).__name__ == "TransformerEncoder" and enc.pooling == "cls"
    assert enc.max_seq_length == 128 and obj.encoder.train_max_seq_length == 32
    assert np.allclose(enc.encode(CORPUS[:2]), obj.encoder.encode(CORPUS[:2]), atol=1e-6)


def test_train_builds_the_objective_from_the_options_and_returns_the_bare_cls_encoder(tmp_path, monkeypatch):
    seen = {}
    real = mod.InfoCSEObjective
    monkeypatch.setattr(mod, "InfoCSEObjective", lambda *a, **k: seen.setdefault("obj", real(*a, **k)))
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    cfg = InfoCSEConfig(steps=2, temperature=0.2, mlm_weight=0.3, mlm_probability=0.25, n_head_layers=3, **OVERRIDES)
    enc = InfoCSE(cfg).train(CORPUS, ctx)
    obj = seen["obj"]
    assert (obj.temperature, obj.mlm_weight, obj.masker.mlm_probability) == (0.2, 0.3, 0.25)
    assert len(obj.c_head) == 3 and len(obj.frozen.encoder.layer) == 1 and obj.frozen_eval
    assert obj.encoder.train_max_seq_length == 32 and isinstance(obj.mlp[1], torch.nn.BatchNorm1d)
    assert type(enc).__name__ == "TransformerEncoder" and enc.pooling == "cls" and enc is obj.encoder
    assert enc.max_seq_length == 128 and ctx.accounting["steps"] == 2
    assert ctx.accounting["loss_chance"] == pytest.approx(math.log(4) + 0.3 * math.log(len(enc.tokenizer)), abs=1e-4)
    with pytest.raises(AttributeError):
        enc.c_head  # noqa: B018  the auxiliary network is training only


def test_the_optimiser_skips_the_frozen_network_and_training_moves_everything_else(tmp_path, monkeypatch):
    seen = {}
    real = mod.InfoCSEObjective
    monkeypatch.setattr(mod, "InfoCSEObjective", lambda *a, **k: seen.setdefault("obj", real(*a, **k)))
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    start = copy.deepcopy(tiny_bert(16, 1, 2, 32, pooling="cls").model.state_dict())
    InfoCSE(InfoCSEConfig(steps=3, lr=1e-3, mlm_weight=1.0, **OVERRIDES)).train(CORPUS, ctx)
    obj = seen["obj"]
    frozen = obj.frozen.state_dict()
    assert all(torch.equal(frozen[k], v) for k, v in start.items() if k in frozen and "pooler" not in k)
    moved = obj.encoder.model.state_dict()
    assert not torch.equal(moved["encoder.layer.0.output.dense.weight"], start["encoder.layer.0.output.dense.weight"])
    assert ctx.accounting["steps"] == 3


def test_a_model_without_an_encoder_layer_stack_is_refused(tmp_path, monkeypatch):
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    load = TrainContext.load_encoder

    def no_stack(self, **kw):
        enc = load(self, **kw)
        enc.model.encoder = torch.nn.Module()
        return enc

    monkeypatch.setattr(TrainContext, "load_encoder", no_stack)
    with pytest.raises(ConfigError, match="infocse: model .* has no ``encoder.layer`` stack"):
        InfoCSE(InfoCSEConfig(steps=1, **OVERRIDES)).train(CORPUS, ctx)


def test_random_lm_head_is_the_families_head_at_the_encoders_sizes():
    enc = _encoder()
    head = random_lm_head(enc)
    out = head(torch.randn(3, 16))
    assert out.shape == (3, len(enc.tokenizer))


def test_step0_returns_the_start_encoder(tmp_path):
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    enc = InfoCSE(InfoCSEConfig(steps=0, **OVERRIDES)).train(CORPUS, ctx)
    start = tiny_bert(16, 1, 2, 32, pooling="cls")
    assert ctx.accounting["steps"] == 0 and enc.pooling == "cls" and enc.max_seq_length == start.max_seq_length
    assert np.allclose(enc.encode(CORPUS[:3]), start.encode(CORPUS[:3]), atol=1e-6)


def test_cli_run_on_tiny_bert_with_the_defaults(env, monkeypatch):
    """``--model tiny-bert`` (2 layers) with no option set: the frozen network is its first layer, and the
    record names that value (config and training accounting) and hashes it."""
    from benchbench.cli.main import main
    from benchbench.core.methods import config_hash

    monkeypatch.chdir(env)
    args = ["run", "--method", "infocse", "--model", "tiny-bert", "--tasks", "sts-mini", "--steps", "2"]
    assert main([*args, "--output", "out", "--json"]) == 0
    rec = next(json.loads(p.read_text()) for p in (env / "out").rglob("sts-mini.json"))
    assert rec["config"]["skip_from"] == 1 and rec["train"]["skip_from"] == 1
    assert rec["config_hash"] == config_hash(InfoCSEConfig(steps=2, skip_from=1))


def test_cli_run_on_the_fixture_task(env, monkeypatch):
    from benchbench.cli.main import main

    monkeypatch.chdir(env)
    args = ["run", "--method", "infocse", "--model", TINY, "--tasks", "sts-mini", "--steps", "2"]
    assert main([*args, "--batch-size", "4", "--set", "skip_from=1", "--output", "out", "--json"]) == 0
    rec = next(
        json.loads(p.read_text()) for p in (env / "out").rglob("*.json") if '"method": "infocse"' in p.read_text()
    )
    assert rec["config"]["skip_from"] == 1 and rec["config"]["mlm_weight"] == 1e-5
    assert rec["train"]["pretrained_lm_head"].startswith("none")


def test_conformance():
    report = check_method(InfoCSE, overrides={"steps": 4, "checkpoint_every": 2, **OVERRIDES})
    assert "resume equality" in report["passed"], report


def test_registered(registry):
    assert registry.methods["infocse"] is InfoCSE
