"""DiffCSE's defining mechanisms: the generator's input masking (30%; 80/10/10; special tokens never),
the edit (the frozen generator's top token at EVERY position, [CLS] put back, labels against the
ORIGINAL ids), the discriminator conditioned on h through its position-0 input, the loss
InfoNCE + lambda x RTD with the RTD mean over every position (padding included, as the reference), the
BatchNorm projection at training only; defaults pinned to the paper; the generator's errors; the same
build path a run takes (``DiffCSE.train``, the CLI) and the conformance kit. Equality with the
reference's ``cl_forward``: bench/fidelity_diffcse.py."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from benchbench_plugins import diffcse as D
from benchbench_plugins.diffcse import DiffCSE, DiffCSEConfig, DiffCSEObjective, load_generator, mask_for_generator

from benchbench import ConfigError, TrainContext, tiny_bert
from benchbench.testing import check_method

TINY = "tiny-bert:16:1:2:32"
CORPUS = [f"sentence number {i} talks about topic {i % 5} with a few more words" for i in range(24)]


def _no_dropout(m: torch.nn.Module) -> None:
    for x in m.modules():
        if isinstance(x, torch.nn.Dropout):
            x.p = 0.0


def _obj(generator_dir, **kw) -> DiffCSEObjective:
    torch.manual_seed(0)
    enc = tiny_bert(16, 1, 2, 32, pooling="cls", max_seq_length=32)
    obj = DiffCSEObjective(enc, load_generator(str(generator_dir), enc), **kw)
    _no_dropout(obj)
    return obj.train()


def _batch(obj, items, seed=0):
    b = obj.collate(items, np.random.default_rng(seed))
    b.pop("n_tokens")
    return b


def test_defaults_are_the_papers():
    c = DiffCSEConfig()
    assert (c.lr, c.batch_size, c.epochs, c.max_seq_length) == (7e-6, 64, 2.0, 32)
    assert (c.temperature, c.lambda_weight, c.masking_ratio) == (0.05, 0.005, 0.30)
    assert c.generator == "distilbert-base-uncased" and c.pooling == "cls"
    assert c.batchnorm is True and c.condition_before_mlp is False and c.max_grad_norm == 1.0
    assert c.replace == "all"  # the reference code's edit
    assert (D.MASK_SHARE, D.RANDOM_SHARE_OF_REST) == (0.8, 0.5)


def test_masking_chooses_the_ratio_and_splits_80_10_10_never_a_special_token():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 2000, (400, 50), generator=g)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    rng = np.random.default_rng(0)
    out = mask_for_generator(ids, special, 0.3, 30522, 103, rng)
    assert torch.equal(out[special], ids[special])
    real = ~special
    n = int(real.sum())
    masked = int((out[real] == 103).sum()) / n
    randomised = int(((out != ids) & (out != 103))[real].sum()) / n
    assert masked == pytest.approx(0.3 * 0.8, abs=0.01)
    assert randomised == pytest.approx(0.3 * 0.1, abs=0.006)
    assert int(out[(out != ids) & (out != 103)].max()) > 15000  # random ids from the whole vocabulary
    everything = mask_for_generator(ids, special, 1.0, 30522, 103, np.random.default_rng(1))
    assert float((everything[real] == 103).float().mean()) == pytest.approx(0.8, abs=0.01)
    kept = float((everything == ids)[real].float().mean())
    assert kept == pytest.approx(0.1, abs=0.01)
    assert torch.equal(mask_for_generator(ids, special, 0.0, 30522, 103, rng), ids)


def test_collate_masks_each_view_independently_and_never_the_special_tokens(generator_dir):
    obj = _obj(generator_dir, masking_ratio=0.5)
    b = obj.collate(CORPUS[:8], np.random.default_rng(0))
    ids, mlm = b["input_ids"], b["mlm_input_ids"]
    assert mlm.shape == (16, ids.shape[1]) and b["n_tokens"] == 2 * int(b["attention_mask"].sum())
    both = torch.cat([ids, ids])
    special = torch.isin(both, obj.special_ids)  # [CLS], [SEP], [PAD] (and [UNK], [MASK])
    assert special[:, 0].all() and torch.equal(mlm[special], both[special])
    assert not torch.equal(mlm[:8], mlm[8:])  # two masks, one per view
    assert (mlm != both).any()


class _EchoGenerator(torch.nn.Module):
    """A masked LM whose top token at each position is the token it was given there."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab
        self.w = torch.nn.Parameter(torch.zeros(()))

    def forward(self, input_ids, attention_mask):
        return type("Out", (), {"logits": F.one_hot(input_ids, self.vocab).float() + 0 * self.w})()


def test_the_edit_takes_the_generators_token_everywhere_and_labels_against_the_original(generator_dir):
    obj = _obj(generator_dir)
    obj.generator = _EchoGenerator(obj.vocab_size)
    ids = torch.tensor([[101, 2000, 2001, 2002, 102, 0], [101, 2003, 2004, 102, 0, 0]])
    mask = (ids != 0).long()
    mlm = ids.clone()
    mlm[0, 2], mlm[1, 1] = 103, 5000  # a [MASK] and a random id the echo keeps
    mlm[0, 0] = 103  # position 0 is always [CLS] again, whatever the generator says
    mlm[1, 5] = 7  # padding stays padding (id 0) and is never a replacement
    edited, replaced = obj.edit(mlm, ids, mask)
    assert edited[0, 0] == 101 and edited[0, 2] == 103 and edited[1, 1] == 5000 and edited[1, 5] == 0
    expected = torch.zeros_like(ids)
    expected[0, 2] = expected[1, 1] = 1
    assert torch.equal(replaced, expected)


class _ConstantGenerator(torch.nn.Module):
    """A masked LM whose top token is 5000 everywhere."""

    def forward(self, input_ids, attention_mask):
        logits = torch.zeros(*input_ids.shape, 30522)
        logits[..., 5000] = 1.0
        return type("Out", (), {"logits": logits})()


def test_replace_masked_edits_only_what_the_generator_was_asked_about(generator_dir):
    ids = torch.tensor([[101, 2000, 2001, 2002, 102, 0]])
    mask = (ids != 0).long()
    mlm = ids.clone()
    mlm[0, 2] = 103
    for rule, expected in (("all", [101, 5000, 5000, 5000, 5000, 0]), ("masked", [101, 2000, 5000, 2002, 102, 0])):
        obj = _obj(generator_dir, replace=rule)
        obj.generator = _ConstantGenerator()
        edited, replaced = obj.edit(mlm, ids, mask)
        assert edited[0].tolist() == expected
        assert torch.equal(replaced, ((edited != ids) & (mask == 1)).long())
    with pytest.raises(ConfigError, match="option 'replace'"):
        _obj(generator_dir, replace="some")


def test_the_discriminator_reads_h_in_place_of_its_first_input_vector(generator_dir):
    obj = _obj(generator_dir)
    b = _batch(obj, CORPUS[:4])
    ids, mask = b["input_ids"], b["attention_mask"]
    c = torch.randn(4, obj.encoder.dim, requires_grad=True)
    out = obj.discriminate(ids, mask, c)
    disc = obj.discriminator  # the same computation by hand: embeddings, position 0 replaced, the encoder
    emb = disc.embeddings(input_ids=ids)
    emb = torch.cat([c[:, None], emb[:, 1:]], 1)
    ext = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    by_hand = disc.encoder(emb, attention_mask=ext)[0]
    assert torch.allclose(out, by_hand, atol=1e-5)
    other = obj.discriminate(ids, mask, torch.randn(4, obj.encoder.dim))
    assert (out - other)[:, 0].abs().max() > 0.1
    assert (out - other)[:, 1:].abs().max() > 1e-4  # through attention, the other positions too
    out.sum().backward()
    assert c.grad is not None and c.grad.abs().sum() > 0
    assert not disc.embeddings._forward_hooks  # the hook is gone after the call


def test_the_loss_is_infonce_plus_lambda_times_rtd_over_every_position(generator_dir):
    items = [CORPUS[0], "short", CORPUS[2] + " and a much longer tail to force padding", "two words"]
    losses = {}
    for lam in (0.0, 1.0, 3.0):
        obj = _obj(generator_dir, lambda_weight=lam, temperature=0.5)
        torch.manual_seed(0)
        losses[lam] = obj(**_batch(obj, items)).item()
    rtd = losses[1.0] - losses[0.0]
    assert losses[3.0] == pytest.approx(losses[0.0] + 3 * rtd, rel=1e-5)
    # each term by hand, on the same objective and batch
    obj = _obj(generator_dir, lambda_weight=1.0, temperature=0.5)
    b = _batch(obj, items)
    n = len(items)
    ids, mask = torch.cat([b["input_ids"]] * 2), torch.cat([b["attention_mask"]] * 2)
    assert (mask == 0).any()  # padding present: its positions count in the RTD mean
    h = obj.mlp(obj.encoder(input_ids=ids, attention_mask=mask)["sentence_embedding"])
    sim = F.cosine_similarity(h[:n, None], h[None, n:], dim=-1) / 0.5
    infonce = F.cross_entropy(sim, torch.arange(n))
    edited, replaced = obj.edit(b["mlm_input_ids"], ids, mask)
    logits = obj.electra_head(obj.discriminate(edited, mask, h))
    every = F.cross_entropy(logits.reshape(-1, 2), replaced.reshape(-1))
    real_only = F.cross_entropy(logits[mask.bool()], replaced[mask.bool()])
    assert losses[0.0] == pytest.approx(infonce.item(), rel=1e-5)
    assert rtd == pytest.approx(every.item(), rel=1e-4)
    assert abs(every.item() - real_only.item()) > 1e-3  # the two normalisations differ on this batch


def test_gradients_reach_encoder_discriminator_and_head_never_the_generator(generator_dir):
    obj = _obj(generator_dir, lambda_weight=1.0)
    obj(**_batch(obj, CORPUS[:6])).backward()
    assert all(p.grad is None for p in obj.generator.parameters())
    assert not any(p.requires_grad for p in obj.generator.parameters())
    for part in (obj.encoder, obj.discriminator, obj.electra_head, obj.mlp):
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters()), part
    # the RTD loss alone reaches the encoder only through h (the discriminator's first input)
    obj.zero_grad()
    obj.condition_before_mlp = False
    b = _batch(obj, CORPUS[:6])
    ids, mask = torch.cat([b["input_ids"]] * 2), torch.cat([b["attention_mask"]] * 2)
    h = obj.mlp(obj.encoder(input_ids=ids, attention_mask=mask)["sentence_embedding"])
    edited, replaced = obj.edit(b["mlm_input_ids"], ids, mask)
    F.cross_entropy(obj.electra_head(obj.discriminate(edited, mask, h)).reshape(-1, 2), replaced.reshape(-1)).backward()
    assert obj.encoder.model.embeddings.word_embeddings.weight.grad.abs().sum() > 0


def test_condition_before_the_mlp_on_request(generator_dir, monkeypatch):
    seen = []
    for before in (False, True):
        obj = _obj(generator_dir, condition_before_mlp=before)
        real = obj.discriminate
        monkeypatch.setattr(obj, "discriminate", lambda i, m, c, real=real: seen.append(c.detach()) or real(i, m, c))
        b = _batch(obj, CORPUS[:4])
        obj(**b)
        ids, mask = torch.cat([b["input_ids"]] * 2), torch.cat([b["attention_mask"]] * 2)
        cls = obj.encoder(input_ids=ids, attention_mask=mask)["sentence_embedding"].detach()
        assert torch.allclose(seen[-1], cls if before else obj.mlp(cls).detach(), atol=1e-5)


def test_projection_is_diffcses_batchnorm_mlp_with_bert_init():
    enc = tiny_bert(32, 1, 2, 64, pooling="cls")
    torch.manual_seed(0)
    mlp = D.make_projection(enc)
    kinds = [type(m).__name__ for m in mlp]
    assert kinds == ["Linear", "BatchNorm1d", "ReLU", "Linear", "BatchNorm1d"]
    assert mlp[0].weight.shape == (64, 32) and mlp[3].weight.shape == (32, 64)
    assert mlp[0].bias is None and mlp[3].bias is None and mlp[4].affine is False and mlp[1].affine is True
    assert float(mlp[0].weight.detach().std()) == pytest.approx(0.02, rel=0.15)
    plain = D.make_projection(enc, batchnorm=False)
    assert [type(m).__name__ for m in plain] == ["Linear", "Tanh"] and float(plain[0].bias.abs().sum()) == 0


def test_train_returns_the_bare_cls_encoder_and_leaves_the_generator_alone(generator_dir, tmp_path, monkeypatch):
    kept = {}
    real_init = DiffCSEObjective.__init__

    def spy(self, *a, **k):
        real_init(self, *a, **k)
        kept["obj"], kept["gen"] = self, {n: p.clone() for n, p in self.generator.named_parameters()}

    monkeypatch.setattr(DiffCSEObjective, "__init__", spy)
    cfg = DiffCSEConfig(steps=3, batch_size=4, generator=str(generator_dir), lr=1e-3)
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    enc = DiffCSE(cfg).train(CORPUS, ctx)
    assert type(enc).__name__ == "TransformerEncoder" and enc.pooling == "cls" and enc.max_seq_length == 128
    assert not any("discriminator" in n or "generator" in n for n, _ in enc.named_modules())
    gen = dict(kept["obj"].generator.named_parameters())
    assert all(torch.equal(gen[n], p) for n, p in kept["gen"].items())
    a = ctx.accounting
    assert a["steps"] == 3 and a["diffcse_generator"].startswith(generator_dir.name + "@")
    assert "/" not in a["diffcse_generator"]  # a label, never a machine path
    assert 0 < a["diffcse_replaced_share"] <= 1 and 0 <= a["diffcse_discriminator_accuracy"] <= 1


def test_generator_errors_name_the_option_and_come_fast(generator_dir, tmp_path):
    enc = tiny_bert(16, 1, 2, 32)
    t = time.perf_counter()
    with pytest.raises(ConfigError, match="option 'generator'.*pretrain_tiny_mlm"):
        load_generator("no-such-org/no-such-generator-model", enc)
    assert time.perf_counter() - t < 10
    with pytest.raises(ConfigError, match="option 'generator'"):
        load_generator(TINY, enc)  # a random model has no pretrained MLM head
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    other = tmp_path / "other-vocab"
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
    BertTokenizerFast(vocab=str(vocab)).save_pretrained(other)
    BertForMaskedLM(
        BertConfig(vocab_size=7, hidden_size=8, num_hidden_layers=1, num_attention_heads=2)
    ).save_pretrained(other)
    with pytest.raises(ConfigError, match="different vocabulary"):
        load_generator(str(other), enc)


def test_cli_run_on_the_fixture_task(env, monkeypatch, generator_dir):
    from benchbench.cli.main import main

    monkeypatch.chdir(env)
    args = ["run", "--method", "diffcse", "--model", TINY, "--tasks", "sts-mini", "--steps", "2", "--batch-size", "4"]
    assert main([*args, "--set", f"generator={generator_dir}", "--output", "out", "--json"]) == 0
    rec = next(
        json.loads(p.read_text()) for p in (env / "out").rglob("*.json") if '"method": "diffcse"' in p.read_text()
    )
    assert rec["config"]["lambda_weight"] == 0.005 and rec["config"]["masking_ratio"] == 0.3


def test_conformance(generator_dir):
    report = check_method(
        DiffCSE, overrides={"steps": 4, "batch_size": 4, "checkpoint_every": 2, "generator": str(generator_dir)}
    )
    assert "resume equality" in report["passed"], report


def test_registered(registry):
    assert registry.methods["diffcse"] is DiffCSE
