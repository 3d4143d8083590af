"""Method fidelity: each method's loss equals its reference implementation's on the same
weights and batch, and the mechanisms the references rely on (fresh noise, per-step scheduling,
gradient clipping, pretrained heads, SimCSE's test-time MLP, the flow's log-determinant) are in place.
bench/mutations.py checks that each listed one-line breakage makes a test here fail."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from benchbench.encode.models import TransformerEncoder, load_encoder, load_pretrained_head, tiny_bert
from benchbench.train.context import TrainContext
from benchbench.train.loop import LoopConfig, Objective, train_loop

SENTS = [
    "the quick brown fox jumps over the lazy dog near the river bank today .",
    "a second sentence , somewhat longer than the first one and with more words in it",
    "short one here",
    "how do i install ubuntu on a usb stick without losing data ?",
]
CORPUS = [f"sentence {i} talks about topic {i % 5} with some extra words number {i * 7}" for i in range(24)]
TOL = 1e-4


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> str:
    """A tiny BERT checkpoint WITH a non-random masked-LM head (as bert-base-uncased has one)."""
    from transformers import BertForMaskedLM

    enc = tiny_bert(32, 2, 2, 64, seed=3)
    mlm = BertForMaskedLM(enc.model.config)
    mlm.bert.load_state_dict(enc.model.state_dict(), strict=False)
    with torch.no_grad():
        g = torch.Generator().manual_seed(5)
        for n, p in mlm.cls.named_parameters():
            if "decoder.weight" not in n:  # the tied word embeddings stay the encoder's
                p.copy_(torch.randn(p.shape, generator=g) * 0.3 + (1.0 if "LayerNorm.weight" in n else 0.0))
    d = tmp_path_factory.mktemp("ckpt") / "tiny-with-head"
    mlm.save_pretrained(d)
    enc.tokenizer.save_pretrained(d)
    return str(d)


def _ctx(tmp_path, model):
    return TrainContext(model=model, seed=0, output_dir=tmp_path, progress=False, device="cpu")


def _st(path: str, pooling: str):
    from sentence_transformers import SentenceTransformer, models

    t = models.Transformer(path, max_seq_length=128)
    return SentenceTransformer(modules=[t, models.Pooling(t.get_word_embedding_dimension(), pooling)], device="cpu")


def _same_tok(st, enc, texts):
    f = {k: v for k, v in st.tokenize(texts).items() if isinstance(v, torch.Tensor)}
    g = enc.tokenize(texts)
    assert torch.equal(f["input_ids"], g["input_ids"])
    return f


# ---- loss equality with the references ---------------------------------------------------------
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_tsdae_loss_equals_denoising_auto_encoder_loss(ckpt, mode):
    from benchbench_plugins.tsdae import TSDAE, TSDAEConfig
    from sentence_transformers.losses import DenoisingAutoEncoderLoss

    st = _st(ckpt, "cls")
    ref = DenoisingAutoEncoderLoss(st, decoder_name_or_path=ckpt, tie_encoder_decoder=True)
    # the library attention in train mode (same RNG stream as the reference); the exact shortcut in eval
    cfg = TSDAEConfig(fast_cross_attention=(mode == "eval"))
    obj = TSDAE(cfg).build(_ctx(None, ckpt))
    # cross-attention is new in both decoders (random init): give ours the reference's
    ref_x = {k: v for k, v in ref.decoder.base_model.state_dict().items() if "crossattention" in k}
    assert ref_x and not obj.decoder.base_model.load_state_dict(ref_x, strict=False).unexpected_keys
    batch = obj.collate(SENTS, np.random.default_rng(0))
    batch.pop("n_tokens")
    src = {k.removeprefix("src_"): v for k, v in batch.items() if k.startswith("src_")}
    tgt = {"input_ids": batch["target_ids"], "attention_mask": (batch["target_ids"] != 0).long()}
    for m in (obj, ref):
        m.train(mode == "train")
    torch.manual_seed(11)
    ours = obj(**batch)
    torch.manual_seed(11)
    theirs = ref([src, tgt], None)
    assert abs(float(ours) - float(theirs)) < TOL, (float(ours), float(theirs))


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_ct_loss_equals_contrastive_tension_loss(ckpt, mode):
    from benchbench_plugins.ct import CTObjective
    from sentence_transformers.losses import ContrastiveTensionLoss

    st = _st(ckpt, "mean")
    ref = ContrastiveTensionLoss(st)
    enc = TransformerEncoder.load(ckpt, pooling="mean", max_seq_length=128)
    obj = CTObjective(enc, CORPUS, negatives=3)
    batch = obj.collate(SENTS * 2, np.random.default_rng(1))
    batch.pop("n_tokens")
    a = {k[2:]: v for k, v in batch.items() if k.startswith("a_")}
    b = {k[2:]: v for k, v in batch.items() if k.startswith("b_")}
    assert batch["labels"].tolist() == [1.0, 0, 0, 0] * 2
    for m in (obj, ref):
        m.train(mode == "train")
    torch.manual_seed(3)
    ours = obj(**batch)
    torch.manual_seed(3)
    theirs = ref([a, b], batch["labels"])
    assert abs(float(ours) - float(theirs)) < TOL, (float(ours), float(theirs))


def test_simcse_loss_equals_mnrl_scale_20_on_non_unit_vectors(ckpt):
    """Eval mode (the reference encodes the two views in two passes, benchbench in one doubled pass,
    so their dropout masks cannot coincide). The vectors are far from unit length, so a dot product
    in place of the cosine would change the loss."""
    from benchbench_plugins.simcse import SimCSEObjective
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    st = _st(ckpt, "cls")
    ref = MultipleNegativesRankingLoss(st, scale=20.0)
    enc = TransformerEncoder.load(ckpt, pooling="cls", max_seq_length=128)
    obj = SimCSEObjective(enc, 0.05, mlp=False)
    obj.eval(), ref.eval()
    f = _same_tok(st, enc, SENTS)
    norms = enc.encode(SENTS)
    assert np.abs(np.linalg.norm(norms, axis=1) - 1).min() > 0.5
    ours = obj(**{k: v for k, v in f.items()})
    theirs = ref([f, f], None)
    assert abs(float(ours) - float(theirs)) < TOL, (float(ours), float(theirs))


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_mlm_loss_equals_bert_for_masked_lm(ckpt, mode):
    from benchbench_plugins.mlm import MLMObjective, build_mlm_head
    from transformers import BertForMaskedLM

    ref = BertForMaskedLM.from_pretrained(ckpt)
    enc = TransformerEncoder.load(ckpt, pooling="mean", max_seq_length=128)
    head, note = load_pretrained_head(ckpt, "AutoModelForMaskedLM")
    assert note == "loaded"
    obj = MLMObjective(enc, build_mlm_head(enc, head), 0.15, False)
    batch = obj.collate(SENTS, np.random.default_rng(2))
    batch.pop("n_tokens")
    batch.pop("special_tokens_mask", None)
    for m in (obj, ref):
        m.train(mode == "train")
    torch.manual_seed(4)
    ours = obj(**batch)
    torch.manual_seed(4)
    theirs = ref(**batch).loss
    assert abs(float(ours) - float(theirs)) < TOL, (float(ours), float(theirs))


# ---- pretrained heads for every model source ----------------------------------------------------
def _head_equal(head_state: dict, ckpt_dir: str) -> None:
    from safetensors.torch import load_file

    ref = load_file(os.path.join(ckpt_dir, "model.safetensors"))
    checked = 0
    for k, v in head_state.items():
        key = "cls." + k
        if key in ref and "decoder.weight" not in key:
            assert torch.equal(v.cpu(), ref[key]), key
            checked += 1
    assert checked >= 4


def test_pretrained_heads_load_from_a_local_and_a_sentence_transformers_folder(ckpt, tmp_path):
    from benchbench_plugins.mlm import build_mlm_head
    from benchbench_plugins.tsdae import TSDAE, TSDAEConfig, lm_head

    st_dir = tmp_path / "st"
    _st(ckpt, "cls").save(str(st_dir))
    # a sentence-transformers folder keeps the transformer at its root: copy the head weights there
    import shutil

    shutil.copy(os.path.join(ckpt, "model.safetensors"), st_dir / "model.safetensors")
    for source in (ckpt, str(st_dir)):
        ctx = _ctx(tmp_path, source)
        obj = TSDAE(TSDAEConfig()).build(ctx)
        assert ctx.accounting["pretrained_lm_head"] == "loaded"
        _head_equal({f"{k}": v for k, v in lm_head(obj.decoder).state_dict().items()}, ckpt)
        enc = TransformerEncoder.load(source, pooling="mean")
        head, note = load_pretrained_head(source, "AutoModelForMaskedLM")
        model = build_mlm_head(enc, head)
        _head_equal(model.cls.state_dict(), ckpt)
        assert model.cls.predictions.decoder.weight is enc.model.get_input_embeddings().weight


def test_a_checkpoint_without_an_lm_head_says_so(tmp_path):
    enc = tiny_bert(16, 1, 2, 32)
    enc.save(tmp_path / "nohead")
    head, note = load_pretrained_head(str(tmp_path / "nohead"), "AutoModelForMaskedLM")
    assert head is None and note.startswith("none in the checkpoint of") and "/" not in note.split("(")[0]
    assert load_pretrained_head("tiny-bert", "AutoModelForMaskedLM")[1].startswith("none")


def test_mlm_train_uses_the_checkpoint_head(ckpt, tmp_path, monkeypatch):
    import benchbench_plugins.mlm as mlm_mod

    seen = {}
    monkeypatch.setattr("benchbench.train.fit.train_loop", lambda obj, *a, **k: seen.setdefault("obj", obj))
    ctx = _ctx(tmp_path, ckpt)
    mlm_mod.MLM(mlm_mod.MLMConfig(steps=1)).train(CORPUS, ctx)
    _head_equal(seen["obj"].head.state_dict(), ckpt)
    assert ctx.accounting["pretrained_lm_head"] == "loaded"


HUB_SCRIPT = textwrap.dedent("""
    import json, os, torch
    from safetensors.torch import load_file
    from benchbench.train.context import TrainContext
    from benchbench.encode.models import load_pretrained_head, TransformerEncoder
    from benchbench_plugins.mlm import build_mlm_head
    from benchbench_plugins.tsdae import TSDAE, TSDAEConfig, lm_head
    ref = load_file(os.environ["REF"])
    name = "fake-org/tiny-bert-with-head"
    ctx = TrainContext(model=name, seed=0, output_dir=None, progress=False, device="cpu")
    dec = lm_head(TSDAE(TSDAEConfig()).build(ctx).decoder).state_dict()
    enc = TransformerEncoder.load(name, pooling="mean")
    head, note = load_pretrained_head(name, "AutoModelForMaskedLM")
    mlm = build_mlm_head(enc, head).cls.state_dict()
    out = {"note": note, "tsdae_note": ctx.accounting["pretrained_lm_head"], "checked": 0}
    for state in (dec, mlm):
        for k, v in state.items():
            if "cls." + k in ref and "decoder.weight" not in k:
                assert torch.equal(v, ref["cls." + k]), k
                out["checked"] += 1
    print(json.dumps(out))
""")


def test_hub_id_loads_the_checkpoint_head_through_the_hf_cache(ckpt, tmp_path):
    """A hub id (not a directory) resolves through the HF cache exactly as bert-base-uncased would:
    a fake cache with HF_HUB_OFFLINE=1 holds the tiny checkpoint under ``fake-org/...``."""
    import shutil

    snap = tmp_path / "hf" / "hub" / "models--fake-org--tiny-bert-with-head"
    (snap / "refs").mkdir(parents=True)
    (snap / "refs" / "main").write_text("0" * 40)
    shutil.copytree(ckpt, snap / "snapshots" / ("0" * 40))
    env = {
        **os.environ,
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "REF": os.path.join(ckpt, "model.safetensors"),
    }
    env.pop("TRANSFORMERS_CACHE", None)
    r = subprocess.run([sys.executable, "-c", HUB_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    import json

    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["note"] == "loaded" and out["tsdae_note"] == "loaded" and out["checked"] >= 8, out


# ---- TSDAE mechanisms -----------------------------------------------------------------------------
def test_tsdae_noise_corrupts_the_input_and_leaves_the_target_clean():
    from benchbench_plugins.tsdae import TSDAEObjective, build_decoder

    from benchbench.train.noise import WordNoise

    enc = tiny_bert(16, 1, 2, 32)
    obj = TSDAEObjective(enc, build_decoder(enc), WordNoise("delete", 0.6))
    batch = obj.collate(SENTS, np.random.default_rng(0))
    assert torch.equal(batch["target_ids"], enc.tokenize(SENTS)["input_ids"])
    src_len = batch["src_attention_mask"].sum(1)
    tgt_len = (batch["target_ids"] != 0).sum(1)
    assert (src_len < tgt_len).all()


def test_one_vector_shortcut_keeps_attention_dropout_in_training():
    """With attention dropout, the single attention weight is dropped per (position, head): in train
    mode two calls differ and positions differ; the average over draws is the eval-mode output."""
    from benchbench_plugins.tsdae import OneVectorCrossAttention
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertAttention

    cfg = BertConfig(
        hidden_size=16,
        num_attention_heads=2,
        attention_probs_dropout_prob=0.5,
        hidden_dropout_prob=0.0,
        is_decoder=True,
        add_cross_attention=True,
    )
    torch.manual_seed(0)
    block = OneVectorCrossAttention(BertAttention(cfg, is_cross_attention=True))
    h, mem = torch.randn(2, 5, 16), torch.randn(2, 1, 16)
    block.eval()
    ev = block(h, encoder_hidden_states=mem)[0]
    block.train()
    a, b = block(h, encoder_hidden_states=mem)[0], block(h, encoder_hidden_states=mem)[0]
    assert not torch.allclose(a, b)
    assert not torch.allclose(a, ev)


class _Recorder(Objective):
    """A one-parameter objective recording what the loop hands it."""

    def __init__(self, scale: float = 1.0):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.scale = scale
        self.draws: list[float] = []

    def collate(self, items, rng):
        self.draws.append(float(rng.random()))
        return {"x": torch.ones(1)}

    def forward(self, x):
        return (self.w * x * self.scale).sum()


def test_collate_rng_is_fresh_per_micro_batch(tmp_path):
    obj = _Recorder()
    train_loop(
        obj,
        list(range(10)),
        _ctx(tmp_path, "x"),
        LoopConfig(steps=3, batch_size=2, grad_accum=2, checkpoint_every=0, checkpoint_minutes=0),
        fingerprint="rng",
        make_optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.0),
    )
    assert len(obj.draws) == 6 and len(set(obj.draws)) == 6


def test_scheduler_steps_once_per_optimizer_step(tmp_path):
    obj, lrs = _Recorder(), []
    train_loop(
        obj,
        list(range(10)),
        _ctx(tmp_path, "x"),
        LoopConfig(steps=3, batch_size=2, grad_accum=4, checkpoint_every=0, checkpoint_minutes=0),
        fingerprint="sched",
        make_optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=1.0),
        make_scheduler=lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: lrs.append(s) or 1.0),
    )
    assert lrs == [0, 1, 2, 3]  # construction + one step per optimizer update


def test_gradient_clipping_is_on_by_default_at_norm_1(tmp_path):
    assert LoopConfig(steps=1, batch_size=1).max_grad_norm == 1.0
    obj = _Recorder(scale=1000.0)  # gradient 1000
    train_loop(
        obj,
        list(range(4)),
        _ctx(tmp_path, "x"),
        LoopConfig(steps=1, batch_size=1, checkpoint_every=0, checkpoint_minutes=0),
        fingerprint="clip",
        make_optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=1.0),
    )
    assert abs(float(obj.w) + 1.0) < 1e-5  # clipped to norm 1: one unit step, not 1000


@pytest.mark.parametrize("name", ["tsdae", "ct", "simcse", "mlm", "bertflow"])
def test_every_method_passes_max_grad_norm_to_the_loop(name, tmp_path, monkeypatch):
    import importlib

    mod = importlib.import_module(f"benchbench_plugins.{name}")
    seen = {}

    def fake_loop(obj, items, ctx, loop, **kw):
        seen["loop"] = loop
        raise RuntimeError("stop")

    monkeypatch.setattr(mod, "train_loop", fake_loop, raising=False)  # methods that call the loop directly
    monkeypatch.setattr("benchbench.train.fit.train_loop", fake_loop)  # and those that go through fit
    method = [v for v in vars(mod).values() if isinstance(v, type) and getattr(v, "name", None) == name][0]
    cfg = method.Config(max_grad_norm=0.5, steps=1)
    with pytest.raises(RuntimeError, match="stop"):
        method(cfg).train(CORPUS, _ctx(tmp_path, "tiny-bert:16:1:2:32"))
    assert seen["loop"].max_grad_norm == 0.5 and method.Config().max_grad_norm == 1.0


# ---- CT -------------------------------------------------------------------------------------------
def test_ct_uses_the_segmented_schedule(tmp_path, monkeypatch):
    import benchbench_plugins.ct as ct_mod

    seen = {}
    monkeypatch.setattr("benchbench.train.fit.train_loop", lambda obj, *a, **k: seen.update(k) or obj)
    ct_mod.CT(ct_mod.CTConfig(steps=1)).train(CORPUS, _ctx(tmp_path, "tiny-bert:16:1:2:32"))
    opt = torch.optim.RMSprop([torch.nn.Parameter(torch.zeros(1))], lr=1e-5)
    sched = seen["make_scheduler"](opt)
    for _ in range(500):
        opt.step(), sched.step()
    assert abs(opt.param_groups[0]["lr"] - 8e-6) < 1e-12


def test_ct_random_negative_equal_to_anchor_is_labelled_0_and_dropout_option():
    from benchbench_plugins.ct import CTObjective

    obj = CTObjective(tiny_bert(16, 1, 2, 32, pooling="mean"), ["same"], negatives=3, dropout=False)
    batch = obj.collate(["same"] * 4, np.random.default_rng(0))
    assert batch["labels"].tolist() == [1.0, 0.0, 0.0, 0.0]
    obj.train()
    assert not obj.first.training and not obj.second.training
    assert CTObjective(tiny_bert(16, 1, 2, 32), ["x"], 1).train().second.training


# ---- SimCSE ---------------------------------------------------------------------------------------
def test_simcse_keeps_the_mlp_at_test_time_and_not_the_training_length(tmp_path):
    from benchbench_plugins.simcse import SimCSE, SimCSEConfig

    start = load_encoder("tiny-bert:16:1:2:32")
    enc = SimCSE(SimCSEConfig(steps=2, batch_size=4, lr=1e-3)).train(CORPUS, _ctx(tmp_path, "tiny-bert:16:1:2:32"))
    assert enc.max_seq_length == start.max_seq_length != 32
    cls = TransformerEncoder.forward(enc, **enc.tokenize(SENTS))["sentence_embedding"]
    with torch.no_grad():
        expected = enc.mlp(cls).numpy()
    out = enc.encode(SENTS)
    assert np.allclose(out, expected, atol=1e-6) and not np.allclose(out, cls.detach().numpy(), atol=1e-3)
    enc.save(tmp_path / "saved")
    again = load_encoder(str(tmp_path / "saved"))
    assert np.allclose(again.encode(SENTS), out, atol=1e-5) and again.max_seq_length == start.max_seq_length
    plain = SimCSE(SimCSEConfig(steps=1, batch_size=4, mlp="train_only")).train(
        CORPUS, _ctx(tmp_path / "p", "tiny-bert:16:1:2:32")
    )
    assert not hasattr(plain, "mlp")


# ---- BERT-flow ------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", [("additive", "reverse"), ("affine", "lu")])
def test_flow_nll_is_the_exact_change_of_variables(variant):
    from benchbench_plugins.bertflow import Glow

    torch.manual_seed(0)
    flow = Glow(6, levels=2, depth=2, hidden=8, coupling=variant[0], permutation=variant[1])
    with torch.no_grad():
        for p in flow.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    flow.train()
    flow(torch.randn(16, 6))  # ActNorm init
    flow.eval()
    with torch.no_grad():  # a non-trivial ActNorm scale
        for m in flow.modules():
            if hasattr(m, "log_scale"):
                m.log_scale.add_(0.4)
    u = torch.randn(3, 6)
    expected = []
    for row in u:
        jac = torch.autograd.functional.jacobian(lambda x: flow(x[None])[0][0], row)
        z = flow(row[None])[0][0]
        log_pz = -0.5 * (z**2).sum() - 3 * np.log(2 * np.pi)
        expected.append(-(log_pz + torch.linalg.slogdet(jac)[1]) / 6)
    assert abs(float(flow.nll(u)) - float(torch.stack(expected).mean())) < 1e-4


def test_bertflow_default_is_the_official_config(tmp_path):
    from benchbench_plugins.bertflow import AdditiveCoupling, BertFlow, BertFlowConfig, Reverse

    c = BertFlowConfig()
    assert (c.coupling, c.permutation, c.vectors) == ("additive", "reverse", "dropout")
    enc = BertFlow(BertFlowConfig(steps=2, batch_size=4)).train(CORPUS, _ctx(tmp_path, "tiny-bert:16:1:2:32"))
    kinds = {type(m) for m in enc.flow.modules()}
    assert AdditiveCoupling in kinds and Reverse in kinds


def test_simcse_stsb_dev_selection_keeps_the_best_step(real_data, tmp_path):
    from benchbench_plugins.simcse import SimCSE, SimCSEConfig

    from benchbench.core.registry import get_registry, make_adapter
    from benchbench.encode.encoding import Embedder
    from benchbench.store.data import DataStore

    ctx = _ctx(tmp_path, "tiny-bert:16:1:2:32")
    ctx.data = DataStore(real_data, allow_download=False)
    seen = []
    ctx.monitor, ctx.monitor_every = (lambda step, enc: seen.append(step) or {}), 3
    enc = SimCSE(SimCSEConfig(steps=4, batch_size=4, lr=5e-3, select_on_stsb_dev=True, eval_every=2)).train(CORPUS, ctx)
    curve = {p[0]: p[1]["stsb_dev_select"] for p in ctx.accounting["monitor"] if "stsb_dev_select" in p[1]}
    step, best = ctx.accounting["stsb_dev_selected_step"], ctx.accounting["stsb_dev_best"]
    assert step in (2, 4) and seen == [3, 4]  # the caller's own monitor still runs at its steps
    score = make_adapter(get_registry(), "stsb", ctx.data).evaluate(Embedder(enc, progress=False), "dev").main_score
    assert abs(score - best) < 1e-6
    assert sorted(curve) == [2, 4] and best == max(curve.values()) and curve[step] == best
