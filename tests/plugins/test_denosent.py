"""DenoSent (plugins/denosent.py): equality with the reference code's own functions on the same inputs
(a verbatim copy of ``DenoSentModel.forward`` and ``map_fn`` below: loss, gradients, AdamW steps, token
ids), then each mechanism with a test that fails when it breaks: the decoder rebuilds the NOISED copy
from its own detached embeddings under dropout 0.825 with the original's projected vector as its only
memory and no causal mask; the contrast of the projected [MASK] vectors; the weights 5 and 7; the
rows (sentences, then their back-translations); the reference's decoder and its init; the warm-up;
the saved encoder (the bare [MASK] vector, no period). The full bench on real STS-B sentences with
the reference read from its repository: bench/fidelity_denosent.py."""

from __future__ import annotations

import copy
import hashlib
import json
import math
from types import SimpleNamespace
from typing import Optional

import benchbench_plugins.denosent as ds
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_outputs import TokenClassifierOutput

from benchbench import ConfigError, TrainContext, build_config, tiny_bert
from benchbench.testing import check_method

TINY = "tiny-bert:16:1:2:32"
CORPUS = [f"sentence number {i} is about topic {i % 5} and has some more words {i * 3}" for i in range(24)]
LONG = "a very long sentence " + " ".join(f"word{i}" for i in range(60)) + " ends here ."
SENTS = ["A plane is taking off.", "A man is playing a large flute.", LONG, "Three men are playing chess."]
NOISY = ["A plan is taking was.", "A man is touching a big flute.", "a long sentence", "Three men play chess."]
OVERRIDES = {"batch_size": 4, "decoder_layers": 2, "decoder_ffn": 32, "warmup_steps": 0}

# --- the reference's own code, verbatim (xinghaow99/DenoSent@35d05f5): model.py DenoSentModel.forward,
# train.py map_fn. ``wandb`` is a stand-in whose ``log`` does nothing; ``self``/globals are supplied below.
wandb = SimpleNamespace(log=lambda *a, **k: None)


def reference_forward(
    self,
    input_ids: Optional[torch.LongTensor] = None,  # noqa: UP045 (verbatim)
    attention_mask: Optional[torch.LongTensor] = None,  # noqa: UP045
    positive_input_ids: Optional[torch.LongTensor] = None,  # noqa: UP045
    positive_attention_mask: Optional[torch.LongTensor] = None,  # noqa: UP045
    negative_input_ids: Optional[torch.LongTensor] = None,  # noqa: UP045
    negative_attention_mask: Optional[torch.LongTensor] = None,  # noqa: UP045
    global_step: Optional[int] = None,  # noqa: UP045
    max_steps: Optional[int] = None,  # noqa: UP045
):
    batch_size = input_ids.size(0)
    if negative_input_ids is not None:
        encoder_input_ids = torch.cat([input_ids, positive_input_ids, negative_input_ids], dim=0).to(self.device)
        encoder_attention_mask = torch.cat(
            [attention_mask, positive_attention_mask, negative_attention_mask], dim=0
        ).to(self.device)
    elif positive_input_ids is not None:
        encoder_input_ids = torch.cat([input_ids, positive_input_ids], dim=0).to(self.device)
        encoder_attention_mask = torch.cat([attention_mask, positive_attention_mask], dim=0).to(self.device)
    elif self.config.do_contrastive:
        encoder_input_ids = torch.cat([input_ids, input_ids], dim=0).to(self.device)
        encoder_attention_mask = torch.cat([attention_mask, attention_mask], dim=0).to(self.device)
    elif self.config.do_generative and not self.config.do_contrastive:
        encoder_input_ids = input_ids.to(self.device)
        encoder_attention_mask = attention_mask.to(self.device)
    else:
        raise NotImplementedError()
    encoder_outputs = self.encoder(
        input_ids=encoder_input_ids,
        attention_mask=encoder_attention_mask,
        return_dict=True,
        output_hidden_states=True,
        output_attentions=True,
    )
    if self.pooler == "cls":
        sent_embedding = encoder_outputs.last_hidden_state[:, 0, :]
    elif self.pooler == "mean":
        sent_embedding = (encoder_outputs.last_hidden_state * encoder_attention_mask.unsqueeze(-1)).sum(
            1
        ) / encoder_attention_mask.sum(-1).unsqueeze(-1)
    elif self.pooler == "mask":
        sent_embedding = encoder_outputs.last_hidden_state[encoder_input_ids == self.tokenizer.mask_token_id]
    else:
        raise NotImplementedError()
    sent_embedding = sent_embedding.unsqueeze(1)
    sent_embedding = self.sent_embedding_projector(sent_embedding)

    if self.config.do_generative:
        if positive_input_ids is not None:
            tgt = encoder_outputs.hidden_states[0][batch_size : 2 * batch_size].detach()
            tgt_key_padding_mask = positive_input_ids == self.tokenizer.pad_token_id
            labels = positive_input_ids
        else:
            tgt = encoder_outputs.hidden_states[0][:batch_size].detach()
            tgt_key_padding_mask = input_ids == self.tokenizer.pad_token_id
            labels = input_ids
        tgt = self.decoder_noise_dropout(tgt)
        decoder_outputs = self.decoder(
            tgt=tgt, memory=sent_embedding[:batch_size], tgt_mask=None, tgt_key_padding_mask=tgt_key_padding_mask
        )
        logits = self.prediction_head(decoder_outputs)
        loss_fct = nn.CrossEntropyLoss(ignore_index=self.tokenizer.pad_token_id)
        generative_loss = loss_fct(logits.view(-1, self.encoder.config.vocab_size), labels.view(-1))
        wandb.log({"train/generative_loss": generative_loss})

    if self.config.do_contrastive:
        positive_sim = self.sim(
            sent_embedding[:batch_size], sent_embedding[batch_size : 2 * batch_size].transpose(0, 1)
        )
        cos_sim = positive_sim
        if negative_attention_mask is not None:
            negative_sim = self.sim(sent_embedding[:batch_size], sent_embedding[2 * batch_size :].transpose(0, 1))
            cos_sim = torch.cat([positive_sim, negative_sim], dim=1)
        cos_sim = cos_sim / self.config.contrastive_temp
        contrastive_labels = torch.arange(batch_size, dtype=torch.long, device=self.device)
        contrastive_loss = nn.CrossEntropyLoss()(cos_sim, contrastive_labels)
        wandb.log({"train/contrastive_loss": contrastive_loss.item()})
        logits = None
    loss = 0
    if self.config.do_contrastive:
        loss += self.config.contrastive_weight * contrastive_loss
    if self.config.do_generative:
        loss += self.config.generative_weight * generative_loss
    wandb.log({"train/loss": loss})
    return TokenClassifierOutput(
        loss=loss,
        logits=logits,
        hidden_states=encoder_outputs.hidden_states,
        attentions=encoder_outputs.attentions,
    )


def reference_map_fn(example, tokenizer, config, model_args):
    """train.py's ``map_fn`` (a closure there over ``tokenizer``, ``config`` and ``model_args``)."""
    max_length = model_args.max_length
    if config.pooler == "mask":
        prompt_len = len(tokenizer(config.prompt_format, add_special_tokens=False)["input_ids"])
        example["sent0"] = tokenizer.decode(
            tokenizer(example["sent0"], padding=True, truncation=True, max_length=config.max_length)["input_ids"],
            skip_special_tokens=True,
        )
        example["sent1"] = tokenizer.decode(
            tokenizer(example["sent1"], padding=True, truncation=True, max_length=config.max_length)["input_ids"],
            skip_special_tokens=True,
        )
        example["sent0"] = config.prompt_format.replace("[X]", example["sent0"]).replace("[MASK]", tokenizer.mask_token)
        example["sent1"] = config.prompt_format.replace("[X]", example["sent1"]).replace("[MASK]", tokenizer.mask_token)
        max_length = max_length + prompt_len
    original_inputs = tokenizer(example["sent0"], padding="max_length", truncation=True, max_length=max_length)
    example["input_ids"] = original_inputs["input_ids"]
    example["attention_mask"] = original_inputs["attention_mask"]

    positive_inputs = tokenizer(example["sent1"], padding="max_length", truncation=True, max_length=max_length)
    example["positive_input_ids"] = positive_inputs["input_ids"]
    example["positive_attention_mask"] = positive_inputs["attention_mask"]
    return example


# --- builders ---------------------------------------------------------------------------------------------
def _objective(cw=5.0, gw=7.0, noise=None, dropout=None, **kw) -> ds.DenoSentObjective:
    base = tiny_bert(16, 1, 2, 32, max_seq_length=128, seed=0)
    if dropout is not None:
        for m in base.modules():
            if isinstance(m, nn.Dropout):
                m.p = dropout
    enc = ds.DenoSentEncoder(base, ds.DenoSentConfig().template)
    c = ds.DenoSentConfig(decoder_layers=2, decoder_ffn=32, contrastive_weight=cw, generative_weight=gw, **kw)
    torch.manual_seed(1)
    return ds.DenoSentObjective(enc, c, ds.mlm_head(enc), noise).train()


def _reference_batch(obj, sents, noisy, max_length=32):
    tok = obj.encoder.tokenizer
    cfg = SimpleNamespace(pooler="mask", max_length=max_length, prompt_format=ds.DenoSentConfig().template)
    rows = [
        reference_map_fn({"sent0": a, "sent1": b}, tok, cfg, SimpleNamespace(max_length=max_length))
        for a, b in zip(sents, noisy, strict=True)
    ]
    t = lambda k: torch.tensor([r[k] for r in rows])  # noqa: E731
    return {k: t(k) for k in ("input_ids", "attention_mask", "positive_input_ids", "positive_attention_mask")}


def _ours(obj, ref):
    ids = torch.cat([ref["input_ids"], ref["positive_input_ids"]])
    mask = torch.cat([ref["attention_mask"], ref["positive_attention_mask"]])
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "mask_pos": (ids == obj.encoder.tokenizer.mask_token_id).int().argmax(1),
    }


def _reference_self(obj, cw, gw):
    r = copy.deepcopy(obj)
    config = SimpleNamespace(
        do_contrastive=True, do_generative=True, contrastive_temp=0.05, contrastive_weight=cw, generative_weight=gw
    )
    return r, SimpleNamespace(
        config=config,
        pooler="mask",
        device=torch.device("cpu"),
        tokenizer=obj.encoder.tokenizer,
        encoder=r.encoder.model,
        sent_embedding_projector=r.projector,
        decoder_noise_dropout=r.noise_dropout,
        decoder=r.decoder,
        prediction_head=r.head,
        sim=nn.CosineSimilarity(dim=-1),
    )


# --- equality with the reference ----------------------------------------------------------------------------
def test_collate_gives_the_reference_inputs_up_to_padding():
    obj = _objective(noise=lambda texts, rng: [dict(zip(SENTS, NOISY))[t] for t in texts])
    batch = obj.collate(SENTS, np.random.default_rng(0))
    ref = _reference_batch(obj, SENTS, NOISY)
    rows = list(ref["input_ids"]) + list(ref["positive_input_ids"])
    for i, row in enumerate(rows):
        ours = batch["input_ids"][i][batch["attention_mask"][i].bool()]
        assert ours.tolist() == [t for t in row.tolist() if t != 0], i
    assert torch.equal(batch["mask_pos"], torch.stack([(r == 103).int().argmax() for r in rows]))
    assert int(batch["attention_mask"][2].sum()) == 30 + 7  # LONG: 30 word pieces + the template's 7 tokens
    assert batch["n_tokens"] == int(batch["attention_mask"].sum())


@pytest.mark.parametrize("cw,gw", [(5.0, 7.0), (1.0, 0.0), (0.0, 1.0)])
def test_loss_gradients_and_adamw_steps_equal_the_references(cw, gw):
    """Dropout everywhere on (BERT's 0.1, the noise's 0.825, the decoder's 0.1): the same torch RNG
    state on both sides gives the same masks only if the draws come in the reference's order."""
    obj = _objective(cw, gw)
    r, rs = _reference_self(obj, cw, gw)
    opt_o = torch.optim.AdamW(obj.parameters(), lr=1e-3, weight_decay=0.0)
    opt_r = torch.optim.AdamW(r.parameters(), lr=1e-3, weight_decay=0.0)
    for step in range(2):
        ref = _reference_batch(obj, SENTS[step:] + SENTS[:step], NOISY[step:] + NOISY[:step])
        torch.manual_seed(10 + step)
        lo = obj(**_ours(obj, ref))
        torch.manual_seed(10 + step)
        lr_ = reference_forward(rs, **ref).loss
        assert lo.item() == pytest.approx(lr_.item(), rel=1e-5)
        opt_o.zero_grad()
        opt_r.zero_grad()
        lo.backward()
        lr_.backward()
        for (name, a), b in zip(obj.named_parameters(), r.parameters(), strict=True):
            ga = a.grad if a.grad is not None else torch.zeros_like(a)  # a term of weight 0 is skipped here
            gb = b.grad if b.grad is not None else torch.zeros_like(b)
            assert torch.allclose(ga, gb, atol=1e-5 * max(1.0, float(gb.abs().max()))), name
        opt_o.step()
        opt_r.step()
        for (name, a), b in zip(obj.named_parameters(), r.parameters(), strict=True):
            assert torch.allclose(a, b, atol=1e-4), name
    assert abs(lo.item() - lr_.item()) < 1e-3 and lo.item() > 0


# --- mechanisms --------------------------------------------------------------------------------------------
def _spy_decoder(obj, monkeypatch):
    seen = {}
    real = obj.decoder.forward

    def spy(tgt, memory, **kw):
        seen.update(tgt=tgt.detach().clone(), memory=memory.detach().clone(), **kw)
        return real(tgt, memory, **kw)

    monkeypatch.setattr(obj.decoder, "forward", spy)
    return seen


def test_the_decoder_rebuilds_the_noised_copy_from_its_dropped_embeddings_with_the_originals_vector(monkeypatch):
    obj = _objective(
        dropout=0.0, noise_dropout=0.5, noise=lambda texts, rng: [dict(zip(SENTS, NOISY))[t] for t in texts]
    )
    seen = _spy_decoder(obj, monkeypatch)
    batch = obj.collate(SENTS, None)
    ids, mask, pos = batch["input_ids"], batch["attention_mask"], batch["mask_pos"]
    obj(input_ids=ids, attention_mask=mask, mask_pos=pos)
    out = obj.encoder.model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    emb = out.hidden_states[0][4:]
    h = out.last_hidden_state[torch.arange(8), pos]
    # memory: the ORIGINALS' projected [MASK] vectors, one per sentence
    assert seen["memory"].shape == (4, 1, 16)
    assert torch.allclose(seen["memory"][:, 0], obj.projector(h[:4]), atol=1e-5)
    # target input: the NOISED rows' embedding output, dropped out at 0.5 and rescaled
    kept = seen["tgt"] != 0
    assert 0.35 < kept.float().mean() < 0.65
    assert torch.allclose(seen["tgt"][kept], (emb * 2)[kept], atol=1e-5)
    assert torch.equal(seen["tgt_key_padding_mask"], ids[4:] == 0)
    assert seen.get("tgt_mask") is None and not seen.get("tgt_is_causal", False)  # every position sees all


def test_continuous_noise_zeroes_0825_of_the_decoder_input(monkeypatch):
    obj = _objective(dropout=0.0)  # BERT's own embedding dropout off: only the noise zeroes elements
    seen = _spy_decoder(obj, monkeypatch)
    obj(**{k: v for k, v in obj.collate(CORPUS, None).items() if k != "n_tokens"})
    zero = (seen["tgt"] == 0).float().mean().item()
    assert abs(zero - 0.825) < 0.012  # ~8,000 elements: 3 standard deviations; 0.8 or 0.85 fail
    assert ds.DenoSentConfig().noise_dropout == 0.825


def test_denoising_is_token_ce_on_the_labels_without_pads_and_no_gradient_into_its_input():
    obj = _objective(dropout=0.0, noise_dropout=0.0).eval()
    torch.manual_seed(0)
    emb = torch.randn(3, 7, 16, requires_grad=True)
    memory = torch.randn(3, 16, requires_grad=True)
    labels = torch.tensor([[101, 5, 6, 7, 102, 0, 0], [101, 8, 102, 0, 0, 0, 0], [101, 9, 10, 11, 12, 13, 102]])
    loss = obj.denoising(emb, labels, memory)
    states = obj.decoder(tgt=emb, memory=memory[:, None], tgt_key_padding_mask=labels == 0)
    full = F.cross_entropy(obj.head(states).reshape(-1, 30522), labels.reshape(-1), ignore_index=0)
    assert loss.item() == pytest.approx(full.item(), rel=1e-5)
    loss.backward()
    assert emb.grad is None and memory.grad is not None and memory.grad.abs().sum() > 0
    # the memory is what the decoder reads of the sentence: another memory, another loss
    assert obj.denoising(emb, labels, memory.detach() * 3).item() != pytest.approx(loss.item(), rel=1e-4)


def test_head_is_the_mlm_head_tied_to_the_encoders_word_embeddings():
    obj = _objective()
    emb = obj.encoder.model.get_input_embeddings().weight
    assert obj.head.predictions.decoder.weight is emb
    assert type(obj.head).__name__ == "BertOnlyMLMHead"


def test_contrast_is_infonce_of_the_projected_vectors_at_the_temperature():
    g = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(5, 8, generator=g), torch.randn(5, 8, generator=g)
    cos = F.normalize(z1, dim=-1) @ F.normalize(z2, dim=-1).T
    want = F.cross_entropy(cos / 0.05, torch.arange(5))
    assert ds.contrastive_loss(z1, z2, 0.05).item() == pytest.approx(want.item(), rel=1e-5)
    assert ds.contrastive_loss(z2, z1, 0.05).item() != pytest.approx(want.item(), rel=1e-3)
    assert ds.contrastive_loss(z1, z2, 0.1).item() != pytest.approx(want.item(), rel=1e-3)


def test_loss_is_5_contrast_plus_7_denoising_of_the_right_halves(monkeypatch):
    obj = _objective(dropout=0.0)
    calls = {}
    monkeypatch.setattr(ds, "contrastive_loss", lambda a, b, t: calls.update(c=(a, b, t)) or torch.tensor(1.0))
    monkeypatch.setattr(obj, "denoising", lambda e, lab, m: calls.update(d=(e, lab, m)) or torch.tensor(10.0))
    batch = {k: v for k, v in obj.collate(CORPUS[:4], None).items() if k != "n_tokens"}
    assert obj(**batch).item() == pytest.approx(5 * 1 + 7 * 10)
    out = obj.encoder.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    z = obj.projector(out.last_hidden_state[torch.arange(8), batch["mask_pos"]])
    a, b, t = calls["c"]
    assert torch.allclose(a, z[:4], atol=1e-5) and torch.allclose(b, z[4:], atol=1e-5) and t == 0.05
    e, lab, m = calls["d"]
    assert torch.equal(lab, batch["input_ids"][4:]) and torch.allclose(m, z[:4], atol=1e-5) and e.shape[0] == 4
    calls.clear()
    obj.gw = 0.0
    assert obj(**batch).item() == pytest.approx(5.0) and "d" not in calls  # a weight 0 leaves its term out
    obj.gw, obj.cw = 7.0, 0.0
    calls.clear()
    assert obj(**batch).item() == pytest.approx(70.0) and "c" not in calls


def test_rows_are_the_sentences_then_their_noised_copies():
    obj = _objective(noise=lambda texts, rng: [t.upper() + " again" for t in texts])
    b = obj.collate(["one two", "three"], None)
    tok = obj.encoder.tokenizer
    text = [tok.decode(r[m.bool()]) for r, m in zip(b["input_ids"], b["attention_mask"])]
    assert text == [
        '[CLS] " one two " means [MASK]. [SEP]',
        '[CLS] " three " means [MASK]. [SEP]',
        '[CLS] " one two again " means [MASK]. [SEP]',
        '[CLS] " three again " means [MASK]. [SEP]',
    ]
    plain = _objective().collate(["one two", "three"], None)  # augmenter "none": x+ is x
    assert torch.equal(plain["input_ids"][:2], plain["input_ids"][2:])


def test_training_truncation_counts_cls_and_sep():
    obj = _objective(max_seq_length=10)
    b = obj.collate([LONG], None)
    assert int(b["attention_mask"][0].sum()) == 8 + obj.encoder.template.overhead
    assert _objective(max_seq_length=None).limit is None
    assert _objective(max_seq_length=2).limit == 0 and _objective(max_seq_length=1).limit == 0  # never negative


def test_decoder_and_projector_are_the_references_modules_and_init():
    obj = _objective()
    layer = obj.decoder.layers[0]
    assert len(obj.decoder.layers) == 2 and obj.decoder.norm is None
    assert layer.self_attn.num_heads == 1 and layer.self_attn.batch_first and not layer.norm_first
    assert layer.linear1.out_features == 32 and layer.activation is F.relu and layer.dropout.p == 0.1
    a, b = obj.decoder.layers
    assert torch.equal(a.self_attn.in_proj_weight, b.self_attn.in_proj_weight)  # deep copies, left at torch's init
    assert not torch.equal(a.linear1.weight, b.linear1.weight)  # drawn one Linear at a time
    d = ds.build_decoder(64, 1, 4, 2048, 0.1, 0.02)
    w = torch.cat([m.weight.flatten() for m in d.modules() if isinstance(m, nn.Linear)])
    assert abs(w.std().item() - 0.02) < 0.001 and abs(w.mean().item()) < 0.001
    assert all(m.bias.abs().sum() == 0 for m in d.modules() if isinstance(m, nn.Linear))
    assert all(torch.all(m.weight == 1) and torch.all(m.bias == 0) for m in d.modules() if isinstance(m, nn.LayerNorm))
    assert d.layers[0].linear1.out_features == 2048
    p = _objective().projector
    assert p.in_features == p.out_features == 16 and p.bias.abs().sum() == 0
    assert abs(p.weight.std().item() - 0.02) < 0.004  # BERT's initializer_range, as the reference's _init_weights


def test_defaults_are_the_reference_runs():
    c = ds.DenoSentConfig()
    assert (c.steps, c.batch_size, c.lr, c.warmup_steps, c.epochs) == (5000, 64, 4e-5, 500, 1.0)
    assert (c.temperature, c.contrastive_weight, c.generative_weight) == (0.05, 5.0, 7.0)
    assert (c.decoder_layers, c.decoder_heads, c.decoder_ffn, c.decoder_dropout) == (16, 1, 2048, 0.1)
    assert (c.noise_dropout, c.augmenter, c.max_seq_length, c.template) == (
        0.825,
        "backtranslate",
        32,
        '"[X]" means [MASK].',
    )
    assert (c.max_grad_norm, c.grad_accum, c.checkpoint_every) == (1.0, 1, 1000)


def test_checkpoint_every_is_a_speed_knob_out_of_the_result_key():
    from benchbench import config_hash

    assert config_hash(ds.DenoSentConfig(checkpoint_every=7)) == config_hash(ds.DenoSentConfig())
    assert config_hash(ds.DenoSentConfig(noise_dropout=0.8)) != config_hash(ds.DenoSentConfig())


def test_constant_schedule_with_warmup_is_transformers():
    from transformers import get_constant_schedule_with_warmup

    for warm in (0, 1, 3):
        p = [nn.Parameter(torch.zeros(1))]
        a = ds.constant_with_warmup(torch.optim.SGD(p, lr=1.0), warm)
        b = get_constant_schedule_with_warmup(torch.optim.SGD(p, lr=1.0), warm)
        for _ in range(6):
            assert a.get_last_lr() == pytest.approx(b.get_last_lr())
            a.optimizer.step()
            b.optimizer.step()
            a.step()
            b.step()
    assert ds.constant_with_warmup(torch.optim.SGD(p, lr=1.0), 500).get_last_lr() == [0.0]


def test_loss_chance_is_the_weighted_sum_of_both_levels():
    obj = _objective()
    m = ds.DenoSent(ds.DenoSentConfig(batch_size=6))
    assert m.loss_chance(obj) == pytest.approx(5 * math.log(6) + 7 * math.log(30522))


# --- the build path a run takes ----------------------------------------------------------------------------
def _ctx(tmp_path):
    return TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")


def test_train_makes_the_budgets_back_translations_and_hands_them_to_the_objective(tmp_path, monkeypatch):
    from benchbench_plugins.augmenters import BackTranslate

    caught, made = {}, []
    monkeypatch.setattr(ds, "fit", lambda method, obj, *a, **k: caught.setdefault("obj", obj))
    real = BackTranslate.apply
    monkeypatch.setattr(
        BackTranslate,
        "apply",
        lambda self, texts, variant=0: made.append((list(texts), variant)) or real(self, texts, variant),
    )
    ctx = _ctx(tmp_path)
    enc = ds.DenoSent(build_config(ds.DenoSent, {"steps": "2", **{k: str(v) for k, v in OVERRIDES.items()}})).train(
        CORPUS, ctx
    )
    obj = caught["obj"]
    assert ctx.accounting["discrete_noise"] == "backtranslate" and ctx.accounting["preprocessed_sentences"] == 8
    assert ctx.accounting["pretrained_mlm_head"].startswith("none")
    assert obj.noise is ctx.registry.augmenters["backtranslate"]
    assert len(made) == 1 and len(made[0][0]) == 8 and made[0][1] == 0  # 2 steps of 4: the views made at once
    assert set(made[0][0]) <= set(CORPUS)
    b = obj.collate(CORPUS[:2], np.random.default_rng(0))
    assert not torch.equal(b["input_ids"][0], b["input_ids"][2])  # the copy is another sentence
    assert isinstance(enc, ds.DenoSentEncoder) and enc.max_seq_length == 128  # the start's evaluation length
    assert obj.limit == 30 and len(obj.decoder.layers) == 2


class _Noise:
    """An augmenter with ``prepare`` and without ``apply`` (a plain ``(texts, rng) -> texts`` one)."""

    def __init__(self):
        self.prepared = []

    def prepare(self, ctx):
        self.prepared.append(ctx)

    def __call__(self, texts, rng):
        return [t + " indeed" for t in texts]


def test_any_augmenter_by_name_is_prepared_and_used_without_apply(tmp_path, monkeypatch):
    from benchbench.core.registry import load_registry

    caught = {}
    monkeypatch.setattr(ds, "fit", lambda method, obj, *a, **k: caught.setdefault("obj", obj))
    ctx = _ctx(tmp_path)
    ctx.registry = load_registry()
    noise = _Noise()
    ctx.registry.augmenters["plain"] = noise
    ds.DenoSent(ds.DenoSentConfig(steps=1, augmenter="plain", **OVERRIDES)).train(CORPUS, ctx)
    assert noise.prepared == [ctx] and caught["obj"].noise is noise
    assert ctx.accounting["discrete_noise"] == "plain"


@pytest.mark.parametrize(
    "kw,option",
    [
        ({"temperature": 0.0}, "temperature"),
        ({"decoder_heads": 3}, "decoder_heads"),
        ({"contrastive_weight": 0.0, "generative_weight": 0.0}, "contrastive_weight"),
        ({"generative_weight": -0.5}, "generative_weight"),
        ({"contrastive_weight": -0.5}, "contrastive_weight"),
        ({"noise_dropout": 1.0}, "noise_dropout"),
        ({"noise_dropout": -0.1}, "noise_dropout"),
        ({"decoder_heads": 0}, "decoder_heads"),
        ({"decoder_layers": 0}, "decoder_layers"),
        ({"warmup_steps": -1}, "warmup_steps"),
    ],
)
def test_bad_options_are_refused_naming_the_option(tmp_path, kw, option):
    with pytest.raises(ConfigError, match=f"denosent: option.*'{option}'"):
        ds.DenoSent(ds.DenoSentConfig(steps=1, **{**OVERRIDES, **kw})).train(CORPUS, _ctx(tmp_path))


def test_limits_of_the_options_that_are_allowed():
    ds.DenoSent(ds.DenoSentConfig(decoder_heads=16, noise_dropout=0.0, warmup_steps=0))._check(16)
    ds.DenoSent(ds.DenoSentConfig(contrastive_weight=0.0))._check(16)
    ds.DenoSent(ds.DenoSentConfig(generative_weight=0.0, decoder_layers=1))._check(16)


def test_encoding_cuts_the_sentence_so_the_template_fits():
    enc = ds.DenoSentEncoder(tiny_bert(16, 1, 2, 32, max_seq_length=20, seed=0), ds.DenoSentConfig().template)
    t = enc.template
    long = enc.tokenize([LONG])
    assert long["input_ids"].shape[1] == 20 and long["input_ids"][0, -1] == t.sep  # the template's end survives
    assert int(long["mask_pos"][0]) == t.mask_index(20 - t.overhead)
    for room in (t.overhead, t.overhead - 1):  # no room for the sentence: the template alone, never a cut from the end
        enc.max_seq_length = room
        assert enc.tokenize(["a cat"])["input_ids"][0].tolist() == t.wrap([])


def test_head_inits_at_0_02_when_the_config_names_no_initializer_range(monkeypatch):
    """(A model family whose config lacks it; BERT's has it, 0.02, as a class default.)"""
    base = tiny_bert(16, 1, 2, 32, seed=0)
    base.model.config.initializer_range = 5.0  # an instance value, then none at all
    del base.model.config.initializer_range
    monkeypatch.delattr(type(base.model.config), "initializer_range", raising=False)
    assert not hasattr(base.model.config, "initializer_range")
    enc = ds.DenoSentEncoder(base, ds.DenoSentConfig().template)
    torch.manual_seed(0)
    obj = ds.DenoSentObjective(enc, ds.DenoSentConfig(decoder_layers=1, decoder_ffn=32), ds.mlm_head(enc))
    assert abs(obj.projector.weight.std().item() - 0.02) < 0.004
    assert abs(obj.decoder.layers[0].linear1.weight.std().item() - 0.02) < 0.004


def test_a_bad_template_names_denosent(tmp_path):
    with pytest.raises(ConfigError, match="denosent: template"):
        ds.DenoSent(ds.DenoSentConfig(steps=1, template="no slot", **OVERRIDES)).train(CORPUS, _ctx(tmp_path))


def test_encoder_reads_the_bare_mask_vector_without_a_period_and_reloads_so(tmp_path):
    from benchbench_plugins.promptbert import PromptEncoder

    from benchbench import load_encoder

    enc = ds.DenoSent(ds.DenoSentConfig(steps=0, **OVERRIDES)).train(CORPUS, _ctx(tmp_path / "a"))
    tok = enc.tokenize(["a cat sat"])
    assert enc.tokenizer.decode(tok["input_ids"][0]) == '[CLS] " a cat sat " means [MASK]. [SEP]'
    h = enc.model(input_ids=tok["input_ids"], attention_mask=tok["attention_mask"]).last_hidden_state
    v = enc.forward(**tok)["sentence_embedding"]
    assert torch.allclose(v[0], h[0][tok["input_ids"][0] == enc.tokenizer.mask_token_id][0], atol=1e-6)
    cfg = {"template": ds.DenoSentConfig().template, "denoise": False, "final_period": False}
    h8 = hashlib.blake2b(json.dumps(cfg, sort_keys=True).encode(), digest_size=8).hexdigest()
    assert enc.fingerprint.endswith(f"-denosent-{h8}") and enc.prompt_config() == cfg
    other = PromptEncoder(enc, ds.DenoSentConfig().template)
    assert other.fingerprint != enc.fingerprint  # PromptBERT's adds a period: not the same encoder
    path = enc.save(tmp_path / "saved")
    assert json.loads((path / "benchbench_wrapper.json").read_text()) == {"loader": ds.LOADER}
    back = load_encoder(str(path))
    assert isinstance(back, ds.DenoSentEncoder)
    np.testing.assert_allclose(back.encode(["a cat sat"]), enc.encode(["a cat sat"]), atol=1e-5)


def test_cli_run_on_the_fixture_task(env, monkeypatch):
    from benchbench.cli.main import main

    monkeypatch.chdir(env)
    args = ["run", "--method", "denosent", "--model", TINY, "--tasks", "sts-mini", "--steps", "2", "--batch-size", "4"]
    args += ["--set", "decoder_layers=1", "--set", "decoder_ffn=16", "--output", "out", "--json"]
    assert main(args) == 0
    rec = next(
        json.loads(p.read_text()) for p in (env / "out").rglob("*.json") if '"method": "denosent"' in p.read_text()
    )
    assert rec["config"]["decoder_layers"] == 1 and rec["config"]["generative_weight"] == 7.0
    assert rec["train"]["discrete_noise"] == "backtranslate"


def test_conformance():
    report = check_method(ds.DenoSent, overrides={"steps": 4, "checkpoint_every": 2, **OVERRIDES})
    assert "resume equality" in report["passed"], report


def test_registered(registry):
    assert registry.methods["denosent"] is ds.DenoSent
