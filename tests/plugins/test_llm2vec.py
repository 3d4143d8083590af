"""LLM2Vec (plugins/llm2vec.py) against the reference code, McGill-NLP/llm2vec@312adcfb578b4023bfc9d3bcc83b6b87448ab059.

The reference's classes import transformers 4.4x internals that transformers 5 removed
(``LlamaFlashAttention2``, ``LlamaSdpaAttention``), so each reference function the method depends on is
re-implemented here from that commit, line for line where it computes, and run on tiny random Llama and
Qwen2 decoders (``tiny-llama``: a BOS token; ``tiny-qwen2``: none), float32 on the CPU:

- ``LlamaBiModel._update_causal_mask`` (``llm2vec/models/bidirectional_llama.py``) and Qwen2's
  ``_prepare_4d_causal_attention_mask(is_causal=False)`` (``llm2vec/models/attn_mask_utils.py``): the 4D
  mask a causal model is then run with, against ``make_bidirectional``;
- ``LlamaBiForMNTP.forward`` = ``LlamaForCausalLM.forward`` with ``labels`` (the shifted loss) on the same
  LoRA (``experiments/run_mntp.py``: ``initialize_peft``, ``model.model = initialize_peft(model.model)``),
  and its collator (``DataCollatorForLanguageModeling``, ``mlm_probability`` 0.2, mask token "blank");
- ``LLM2Vec.tokenize`` / ``_convert_to_str`` / ``_skip_instruction`` / ``get_pooling("mean")``
  (``llm2vec/llm2vec.py``) for encoding and for SimCSE training;
- ``HardNegativeNLLLoss`` (``llm2vec/loss/HardNegativeNLLLoss.py``, ``cos_sim``, scale 20) and
  ``SimCSETrainer.compute_loss`` (``experiments/run_simcse.py``: two passes, attention dropout 0.3).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from benchbench_plugins import llm2vec as L
from benchbench_plugins.llm2vec import (
    LLM2Vec,
    LLM2VecConfig,
    LLM2VecEncoder,
    MNTPObjective,
    SimCSEStageObjective,
    add_lora,
    load_lm,
    mntp_tokenizer,
    set_attention_dropout,
    simcse_loss,
)

from benchbench import ConfigError, TrainContext, config_hash, load_decoder, load_encoder

REF = "McGill-NLP/llm2vec@312adcf"
ARCHS = ["tiny-llama", "tiny-qwen2"]
CORPUS = [f"sentence number {i} is about topic {i % 5} and has some more words {i * 3}" for i in range(24)]
TEXTS = ["a cat sat on the mat", "the dog", "stocks fell sharply today after the report", "hello world again"]
TOL = 1e-5
SEPARATOR = "!@#$%^&*()"  # LLM2Vec's instruction/text separator (_convert_to_str)


# ---- the reference, re-implemented -----------------------------------------------------------------
def ref_llama_bi_mask(attention_mask: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
    """``LlamaBiModel._update_causal_mask`` (sdpa/eager, no cache, 2D mask): zeros instead of the causal
    triangle, padding keys at the dtype's minimum."""
    dtype, device = input_tensor.dtype, input_tensor.device
    min_dtype = torch.finfo(dtype).min
    sequence_length = input_tensor.shape[1]
    cache_position = torch.arange(sequence_length, device=device)
    target_length = attention_mask.shape[-1]
    causal_mask = torch.zeros((sequence_length, target_length), dtype=dtype, device=device)
    causal_mask *= torch.arange(target_length, device=device) > cache_position.reshape(-1, 1)
    causal_mask = causal_mask[None, None, :, :].expand(input_tensor.shape[0], 1, -1, -1)
    causal_mask = causal_mask.clone()
    mask_length = attention_mask.shape[-1]
    padding_mask = causal_mask[..., :mask_length].eq(0.0) * attention_mask[:, None, None, :].eq(0.0)
    causal_mask[..., :mask_length] = causal_mask[..., :mask_length].masked_fill(padding_mask, min_dtype)
    return causal_mask


def ref_qwen2_bi_mask(attention_mask: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
    """``_prepare_4d_causal_attention_mask(..., is_causal=False)``: ``AttentionMaskConverter.to_4d`` without
    the causal part, i.e. ``_expand_mask``: (1 - mask) broadcast over the queries, times the minimum."""
    bsz, src_len = attention_mask.shape
    tgt_len = input_tensor.shape[1]
    expanded = attention_mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(input_tensor.dtype)
    inverted = 1.0 - expanded
    return inverted.masked_fill(inverted.to(torch.bool), torch.finfo(input_tensor.dtype).min)


def ref_mask(arch: str, attention_mask, embeds):
    return (ref_llama_bi_mask if "llama" in arch else ref_qwen2_bi_mask)(attention_mask, embeds)


def ref_initialize_peft(model, lora_r=8, lora_alpha=16, lora_dropout=0.05, lora_modules=None):
    """``initialize_peft`` of run_mntp.py / run_simcse.py."""
    from peft import LoraConfig, get_peft_model

    if lora_modules is None:
        lora_modules = ["q_proj", "v_proj", "k_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    config = LoraConfig(
        r=lora_r,
        lora_alpha=lora_alpha,
        target_modules=lora_modules,
        lora_dropout=lora_dropout,
        bias="none",
        task_type=None,
    )
    return get_peft_model(model, config)


def ref_cos_sim(a, b):
    a_norm = torch.nn.functional.normalize(a, p=2, dim=1)
    b_norm = torch.nn.functional.normalize(b, p=2, dim=1)
    return torch.mm(a_norm, b_norm.transpose(0, 1))


def ref_hard_negative_nll(q_reps, d_reps_pos, d_reps_neg=None, scale=20.0):
    """``HardNegativeNLLLoss.__call__`` (one process: no all-gather)."""
    if d_reps_neg is None:
        d_reps_neg = d_reps_pos[:0, :]
    d_reps = torch.cat([d_reps_pos, d_reps_neg], dim=0)
    scores = ref_cos_sim(q_reps, d_reps) * scale
    labels = torch.tensor(range(len(scores)), dtype=torch.long, device=scores.device)
    return torch.nn.CrossEntropyLoss()(scores, labels)


class RefLLM2Vec:
    """``LLM2Vec``'s tokenize / pooling path (``max_length`` 512, ``skip_instruction`` True, mean)."""

    def __init__(self, model, tokenizer, max_length=512, mask_fn=None, arch="tiny-llama"):
        self.model, self.tokenizer, self.max_length = model, copy.deepcopy(tokenizer), max_length
        self.tokenizer.pad_token = self.tokenizer.eos_token  # from_pretrained
        self.tokenizer.padding_side = "left"
        self.arch = arch

    @staticmethod
    def _convert_to_str(instruction, text):  # short texts: the doc_max_length loop never runs
        return f"{instruction.strip()} !@#$%^&*(){text}" if instruction else f"!@#$%^&*(){text}"

    def tokenize(self, texts):
        texts_2, original_texts = [], []
        for text in texts:
            t = text.split("!@#$%^&*()")
            texts_2.append(t[1] if len(t) > 1 else "")
            original_texts.append("".join(t))
        original = self.tokenizer(
            original_texts, return_tensors="pt", padding=True, truncation=True, max_length=self.max_length
        )
        embed_mask = None
        for t_i, t in enumerate(texts_2):
            ids = self.tokenizer(
                [t],
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=self.max_length,
                add_special_tokens=False,
            )
            e_m = torch.zeros_like(original["attention_mask"][t_i])
            if len(ids["input_ids"][0]) > 0:
                e_m[-len(ids["input_ids"][0]) :] = torch.ones(len(ids["input_ids"][0]))
            embed_mask = e_m.unsqueeze(0) if embed_mask is None else torch.cat((embed_mask, e_m.unsqueeze(0)), dim=0)
        original["embed_mask"] = embed_mask
        return original

    def forward(self, sentence_feature):
        embed_mask = sentence_feature.pop("embed_mask")
        embeds = self.model.get_input_embeddings()(sentence_feature["input_ids"])
        mask4d = ref_mask(self.arch, sentence_feature["attention_mask"], embeds)
        reps = self.model(input_ids=sentence_feature["input_ids"], attention_mask=mask4d)
        sentence_feature["embed_mask"] = embed_mask
        return self.get_pooling(sentence_feature, reps.last_hidden_state)

    def get_pooling(self, features, last_hidden_states):
        assert self.tokenizer.padding_side == "left"
        features["attention_mask"] = features["embed_mask"]  # _skip_instruction
        seq_lengths = features["attention_mask"].sum(dim=-1)
        return torch.stack(
            [last_hidden_states[i, -length:, :].mean(dim=0) for i, length in enumerate(seq_lengths)], dim=0
        )

    def encode(self, sentences):
        texts = [self._convert_to_str("", s) for s in sentences]
        with torch.no_grad():
            return self.forward(self.tokenize(texts))


def _causal(arch: str, seed: int = 0):
    return load_decoder(arch, attention="causal", seed=seed)


def _batch(tok, texts=TEXTS, side="left"):
    t = copy.deepcopy(tok)
    t.padding_side = side
    return t(texts, padding=True, return_tensors="pt")


def _perturb_lora_b(model, seed=3):
    """LoRA's B starts at zero (the adapter a no-op): give every B the same random values in both models."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)


# ---- stage 1: bidirectional attention ----------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_bidirectional_model_equals_the_reference_mask(arch, impl):
    """Our bidirectional model (transformers' own switch) equals the causal model run with the reference's
    4D mask, at every position of a left-padded batch (padding rows included)."""
    causal, tok = _causal(arch)
    causal.config._attn_implementation = impl
    ours, _ = load_decoder(arch, attention="bidirectional", seed=0)
    ours.config._attn_implementation = impl
    b = _batch(tok)
    with torch.no_grad():
        embeds = causal.get_input_embeddings()(b["input_ids"])
        ref = causal(
            input_ids=b["input_ids"], attention_mask=ref_mask(arch, b["attention_mask"], embeds)
        ).last_hidden_state
        got = ours(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
        plain = causal(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
    assert (ref - got).abs().max() < TOL
    assert (ref - plain).abs().max() > 1e-2  # the causal model is far from it: the mask really matters


@pytest.mark.parametrize("arch", ARCHS)
def test_bidirectional_attention_sees_later_tokens(arch):
    """Changing the LAST token changes the FIRST position's state under the method's model; a model
    left causal (the mutation) does not see it, and fails this test."""
    lm, tok = load_lm(arch)
    ids = _batch(tok, ["a cat sat on the mat"])["input_ids"]
    other = ids.clone()
    other[0, -1] = tok.convert_tokens_to_ids("dog")
    with torch.no_grad():
        first = lm.model(input_ids=ids).last_hidden_state[0, 0]
        changed = lm.model(input_ids=other).last_hidden_state[0, 0]
    assert (first - changed).abs().max() > 1e-3
    lm.body.config.is_causal = True  # the mutation: causal again
    for m in lm.modules():
        if hasattr(m, "is_causal"):
            m.is_causal = True
    with torch.no_grad():
        assert torch.equal(
            lm.model(input_ids=ids).last_hidden_state[0, 0], lm.model(input_ids=other).last_hidden_state[0, 0]
        )


# ---- stage 2: MNTP -----------------------------------------------------------------------------------
def test_mntp_tokenizer_masks_with_blank_when_the_tokenizer_has_no_mask_token():
    _, tok = _causal("tiny-qwen2")
    bare = copy.deepcopy(tok)
    bare.mask_token = None
    t = mntp_tokenizer(bare)
    assert t.mask_token == "_" and t.padding_side == "right" and bare.mask_token is None  # a copy
    assert mntp_tokenizer(tok).mask_token == tok.mask_token  # one it has is kept (the reference's rule)
    assert tok.pad_token is not None and mntp_tokenizer(tok).pad_token == tok.pad_token  # so is its pad token
    bare.pad_token = None
    assert mntp_tokenizer(bare).pad_token == tok.eos_token  # none: EOS, as run_mntp.py


@pytest.mark.parametrize("arch", ARCHS)
def test_mntp_collate_equals_the_reference_collator(arch):
    """``DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.2)`` (run_mntp's "default" collator)
    on the same rows and generator: identical inputs and labels (80/10/10 of the chosen 20%)."""
    from transformers import DataCollatorForLanguageModeling

    lm, tok = load_lm(arch)
    obj = MNTPObjective(lm, tok, 0.2, 512, None)
    rng = np.random.default_rng(5)
    ours = obj.collate(CORPUS[:8], rng)
    ref_tok = mntp_tokenizer(tok)
    enc = ref_tok([t.strip() for t in CORPUS[:8]], truncation=True, max_length=512, return_special_tokens_mask=True)
    ref = DataCollatorForLanguageModeling(ref_tok, mlm_probability=0.2)
    ref.generator = torch.Generator().manual_seed(int(np.random.default_rng(5).integers(2**62)))
    want = ref([{k: enc[k][i] for k in enc} for i in range(8)])
    for k in ("input_ids", "attention_mask", "labels"):
        assert torch.equal(ours[k], want[k]), k
    assert (ours["labels"] != -100).sum() > 0


def _ref_mntp_model(arch, body):
    """``LlamaBiForMNTP`` / ``Qwen2BiForMNTP``: the causal-LM class (its forward and loss) over the same
    weights, the reference's 4D mask passed in."""
    from transformers import LlamaForCausalLM, Qwen2ForCausalLM

    cls = LlamaForCausalLM if "llama" in arch else Qwen2ForCausalLM
    ref = cls(body.config)
    ref.model.load_state_dict(body.state_dict())
    ref.tie_weights()
    return ref


@pytest.mark.parametrize("arch", ARCHS)
def test_mntp_loss_and_gradients_equal_the_reference(arch):
    """The token at i predicted from position i-1's output: our loss equals ``LlamaForCausalLM``'s shifted
    loss (what ``LlamaBiForMNTP`` inherits) on masked labels, with the same LoRA (B perturbed so the
    adapter acts), dropout on under one seed; LoRA gradients too. An unshifted loss differs."""
    c = LLM2VecConfig()
    causal, tok = _causal(arch)
    ref = _ref_mntp_model(arch, causal)
    torch.manual_seed(11)
    ref.model = ref_initialize_peft(ref.model, lora_r=16, lora_alpha=32, lora_dropout=0.05)
    lm, _ = load_lm(arch)
    torch.manual_seed(11)
    add_lora(lm, c)
    _perturb_lora_b(ref.model)
    _perturb_lora_b(lm.model)
    obj = MNTPObjective(lm, tok, 0.2, 512, None)
    batch = obj.collate(CORPUS[:6], np.random.default_rng(1))
    batch.pop("n_tokens")
    ref.train()
    obj.train()
    embeds = ref.get_input_embeddings()(batch["input_ids"])
    torch.manual_seed(7)
    want = ref(
        input_ids=batch["input_ids"],
        attention_mask=ref_mask(arch, batch["attention_mask"], embeds),
        labels=batch["labels"],
    ).loss
    want.backward()
    torch.manual_seed(7)
    got = obj(**batch)
    got.backward()
    assert abs(float(got) - float(want)) < TOL * max(1.0, float(want))
    gref = {n.replace("base_model.model.", ""): p.grad for n, p in ref.model.named_parameters() if p.grad is not None}
    gours = {n.replace("base_model.model.", ""): p.grad for n, p in lm.model.named_parameters() if p.grad is not None}
    assert gref.keys() == gours.keys() and len(gours) > 0
    assert all(n.find("lora_") >= 0 for n in gours)  # only the adapter trains
    scale = max(g.abs().max() for g in gref.values())
    assert max((gref[n] - gours[n]).abs().max() for n in gref) < TOL * scale
    with torch.no_grad():  # control: predicting the token at i from position i's own output
        obj.eval()
        hidden = lm.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        where = batch["labels"] != -100
        unshifted = F.cross_entropy(lm.head(hidden[where]), batch["labels"][where])
        assert abs(float(unshifted) - float(want)) > 1e-3


# ---- stage 3: pooling and SimCSE ---------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
def test_encoding_equals_llm2vec_encode(arch):
    """``LLM2VecEncoder.encode`` = ``LLM2Vec.encode`` (empty instruction, left padding, the mean over the
    text's own tokens: tiny-llama's BOS is skipped). A plain masked mean (BOS in) differs for Llama."""
    model, tok = load_decoder(arch, attention="causal", seed=0)
    ref = RefLLM2Vec(model, tok, arch=arch).encode(TEXTS).numpy()
    bi, tok2 = load_decoder(arch, attention="bidirectional", seed=0)
    enc = LLM2VecEncoder(bi, tok2)
    got = enc.encode(TEXTS)
    assert np.abs(got - ref).max() < TOL
    if "llama" in arch:
        from benchbench import DecoderEncoder

        plain = DecoderEncoder(bi, tok2, pooling="mean", attention="bidirectional").encode(TEXTS)
        assert np.abs(plain - ref).max() > 1e-3


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("pool", ["padded-row", "text"])
def test_simcse_step_equals_the_reference_compute_loss(arch, pool):
    """``SimCSETrainer.compute_loss``: q = LLM2Vec(features[0]), d = LLM2Vec(features[1]) (two passes of the
    same tokens, attention dropout 0.3 and LoRA dropout on, one seed), ``HardNegativeNLLLoss`` scale 20.
    ``padded-row``: the reference fed Wiki1M lines (no separator: an all-zero ``embed_mask``, the whole
    padded row averaged); ``text``: the reference fed ``"!@#$%^&*()" + line`` (the text's tokens, as at
    encoding). Loss and LoRA gradients equal."""
    c = LLM2VecConfig()
    causal, tok = _causal(arch)
    causal.config.attention_dropout = 0.3
    for m in causal.modules():
        if isinstance(getattr(m, "attention_dropout", None), float):
            m.attention_dropout = 0.3
    torch.manual_seed(11)
    ref_model = ref_initialize_peft(causal, lora_r=16, lora_alpha=32, lora_dropout=0.05)
    lm, _ = load_lm(arch)
    torch.manual_seed(11)
    add_lora(lm, c)
    set_attention_dropout(lm, 0.3)
    _perturb_lora_b(ref_model)
    _perturb_lora_b(lm.model)
    items = TEXTS + CORPUS[:2]  # of different lengths: left padding in the batch
    texts = [t.strip() for t in items]
    ref = RefLLM2Vec(ref_model, tok, max_length=128, arch=arch)
    feed = texts if pool == "padded-row" else [SEPARATOR + t for t in texts]
    ref_model.train()
    torch.manual_seed(5)
    q = ref.forward(ref.tokenize(feed))
    d = ref.forward(ref.tokenize(feed))
    want = ref_hard_negative_nll(q, d, scale=20.0)
    want.backward()
    obj = SimCSEStageObjective(lm, tok, 20.0, 128, pool, None)
    obj.train()
    batch = obj.collate(items, np.random.default_rng(0))
    assert (batch["attention_mask"] == 0).any()
    batch.pop("n_tokens")
    torch.manual_seed(5)
    got = obj(**batch)
    got.backward()
    assert abs(float(got) - float(want)) < TOL * max(1.0, float(want))
    gref = {n: p.grad for n, p in ref_model.named_parameters() if p.grad is not None}
    gours = {n: p.grad for n, p in lm.model.named_parameters() if p.grad is not None}
    assert gref.keys() == gours.keys() and len(gours) > 0
    scale = max(g.abs().max() for g in gref.values())
    assert max((gref[n] - gours[n]).abs().max() for n in gref) < TOL * scale


def test_simcse_loss_equals_hard_negative_nll_loss_scale_20():
    g = torch.Generator().manual_seed(0)
    q, d = torch.randn(9, 16, generator=g) * 3, torch.randn(9, 16, generator=g)
    assert abs(float(simcse_loss(q, d, 20.0)) - float(ref_hard_negative_nll(q, d, scale=20.0))) < 1e-6
    assert abs(float(simcse_loss(q, d, 20.0)) - float(ref_hard_negative_nll(q, d, scale=50.0))) > 1e-2  # scale matters


# ---- the method --------------------------------------------------------------------------------------
def _ctx(tmp_path: Path, name: str, model: str = "tiny-llama", defer: bool = False) -> TrainContext:
    ctx = TrainContext(model=model, seed=1, output_dir=tmp_path / name, progress=False, device="cpu")
    ctx.defer_checkpoint_cleanup = defer
    return ctx


def _train(tmp_path, name, model="tiny-llama", **kw):
    ctx = _ctx(tmp_path, name, model)
    enc = LLM2Vec(LLM2VecConfig(**{"steps": 3, "batch_size": 4, **kw})).train(CORPUS, ctx)
    return enc, ctx.accounting


def test_defaults_are_the_published_recipe():
    c = LLM2VecConfig()
    assert (c.stage, c.steps, c.mask_ratio, c.simcse_dropout, c.loss_scale, c.pooling) == (
        "mntp+simcse",
        1000,
        0.2,
        0.3,
        20.0,
        "mean",
    )
    assert (c.lora_r, c.lora_alpha, c.lora_dropout) == (16, 32, 0.05)
    assert c.lora_modules.split(",") == ["q_proj", "v_proj", "k_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert L.PUBLISHED == {
        "mntp": {"batch_size": 32, "lr": 5e-5},
        "simcse": {"batch_size": 128, "lr": 3e-5},
    }
    assert c.max_seq_length == 128 and L.ENCODE_MAX_LENGTH == 512
    assert c.max_grad_norm == 1.0  # HF Trainer's default clipping
    assert config_hash(c) == config_hash(dataclasses.replace(c, checkpoint_every=7))


def test_budget_applies_to_each_stage_and_only_the_adapter_moves(tmp_path):
    """steps and batch_size apply to EACH trained stage; merged, the trained model differs from the start
    only in the LoRA-targeted projections (embeddings and norms untouched)."""
    enc, acc = _train(tmp_path, "a")
    assert [(s, acc["stages"][s]["steps"], acc["stages"][s]["batch_size"]) for s in acc["stages"]] == [
        ("mntp", 3, 4),
        ("simcse", 3, 4),
    ]
    assert acc["steps"] == 3 and acc["examples"] == 24
    assert (
        acc["stages"]["mntp"]["loss_chance"]
        > acc["stages"]["simcse"]["loss_chance"]
        == pytest.approx(np.log(4), abs=1e-5)
    )
    start, _ = load_decoder("tiny-llama", attention="bidirectional", seed=0)
    moved = {n for n, p in enc.model.state_dict().items() if not torch.equal(p, start.state_dict()[n])}
    assert moved and all(any(m in n for m in L.LORA_MODULES.split(",")) for n in moved)


def test_step0_is_the_bidirectional_start_untrained(tmp_path):
    enc, acc = _train(tmp_path, "z", steps=0)
    assert acc["step0_row"] is True and acc["steps"] == 0
    bi, tok = load_decoder("tiny-llama", attention="bidirectional", seed=0)
    assert np.array_equal(enc.encode(TEXTS), LLM2VecEncoder(bi, tok).encode(TEXTS))
    assert LLM2Vec.step0_options is None and "steps" in {f.name for f in dataclasses.fields(LLM2VecConfig)}


@pytest.mark.parametrize("stage", ["mntp", "simcse"])
def test_single_stages_train(tmp_path, stage):
    enc, acc = _train(tmp_path, stage, stage=stage, steps=2)
    assert list(acc["stages"]) == [stage] and np.isfinite(enc.encode(TEXTS)).all()


class _Killed(BaseException):
    pass


def test_resume_after_a_kill_in_simcse_redoes_no_mntp_step(tmp_path, monkeypatch):
    """Under the runner (deferred clean-up), a kill during SimCSE resumes SimCSE from its checkpoint
    and reads MNTP's weights from MNTP's kept last checkpoint: the encoder equals the uninterrupted one."""
    import benchbench.train.checkpoint as T

    cfg = LLM2VecConfig(steps=3, batch_size=4, checkpoint_every=1)
    ref = LLM2Vec(cfg).train(CORPUS, _ctx(tmp_path, "u", defer=True)).encode(TEXTS)
    real, saves = T.save_checkpoint, []

    def killing(*a, **k):
        real(*a, **k)
        saves.append(Path(a[4]).name)
        if saves.count("checkpoints") == 2:  # the second SimCSE checkpoint (MNTP's are in checkpoints/mntp)
            raise _Killed

    monkeypatch.setattr(T, "save_checkpoint", killing)
    with pytest.raises(_Killed):
        LLM2Vec(cfg).train(CORPUS, _ctx(tmp_path, "r", defer=True))
    monkeypatch.setattr(T, "save_checkpoint", real)
    ctx = _ctx(tmp_path, "r", defer=True)
    got = LLM2Vec(cfg).train(CORPUS, ctx).encode(TEXTS)
    assert np.array_equal(got, ref)
    assert ctx.accounting["stages"]["mntp"]["resumed_from_steps"] == [3]  # finished: read back, not retrained
    assert ctx.accounting["stages"]["simcse"]["resumed_from_steps"] == [2]


def test_conformance_kit_on_a_tiny_decoder(tmp_path):
    from benchbench.testing import check_method

    report = check_method(
        LLM2Vec, overrides={"steps": 3, "batch_size": 4, "checkpoint_every": 1}, model="tiny-qwen2", tmp_dir=tmp_path
    )
    assert {"determinism", "save/load round trip", "resume equality"} <= set(report["passed"])


def test_saved_encoder_reloads_with_its_pooling(tmp_path):
    enc, _ = _train(tmp_path, "s", stage="simcse", steps=1)
    back = load_encoder(str(enc.save(tmp_path / "saved")))
    assert isinstance(back, LLM2VecEncoder) and back.fingerprint == enc.fingerprint
    assert np.array_equal(back.encode(TEXTS), enc.encode(TEXTS))


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"stage": "simcse+mntp"}, "'stage'"),
        ({"mask_ratio": 0.0}, "'mask_ratio'"),
        ({"lora_r": 0}, "'lora_r'"),
        ({"loss_scale": 0.0}, "'loss_scale'"),
        ({"simcse_train_pool": "cls"}, "'simcse_train_pool'"),
        ({"pooling": "last"}, "'pooling'"),
        ({"simcse_dropout": -0.1}, "'simcse_dropout'"),
        ({"simcse_dropout": 1.0}, "'simcse_dropout'"),
        ({"lora_dropout": 1.0}, "'lora_dropout'"),
    ],
)
def test_bad_options_are_refused_by_name(tmp_path, kw, match):
    with pytest.raises(ConfigError, match=match):
        LLM2Vec(LLM2VecConfig(**kw)).train(CORPUS, _ctx(tmp_path, "x"))


def test_an_encoder_start_is_refused_with_the_reason(tmp_path):
    with pytest.raises(ConfigError, match="llm2vec.*decoder-only"):
        LLM2Vec(LLM2VecConfig(steps=1)).train(CORPUS, _ctx(tmp_path, "b", model="tiny-bert:16:1:2:32"))


def test_no_dropout_is_an_allowed_setting():
    assert LLM2Vec(LLM2VecConfig(simcse_dropout=0.0, lora_dropout=0.0))._check() == ["mntp", "simcse"]


def test_mntp_loss_of_a_batch_without_a_mask_is_zero_with_a_gradient():
    """One-token sentences can draw no masked position: the loss is 0 (not NaN or inf), still a graph."""
    hidden = torch.randn(2, 3, 8, requires_grad=True)
    head = torch.nn.Linear(8, 11)
    loss = L.mntp_loss(hidden, torch.full((2, 3), -100), head)
    assert float(loss.detach()) == 0.0 and loss.requires_grad
    loss.backward()
    assert torch.equal(hidden.grad, torch.zeros_like(hidden))


def test_mean_pool_is_the_mean_over_the_pooled_positions():
    hidden = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    mask = torch.tensor([[0, 0, 1], [0, 0, 0]])
    assert L.mean_pool(hidden, mask).tolist() == [hidden[0, 2].tolist(), [0.0] * 4]  # one token; none: zeros
    assert torch.allclose(L.mean_pool(hidden, torch.ones(2, 3)), hidden.mean(1))


def test_simcse_collate_cuts_each_text_at_the_training_length():
    lm, tok = load_lm("tiny-llama")
    obj = SimCSEStageObjective(lm, tok, 20.0, 8, "text", lambda m: m)
    long = " ".join(["word"] * 30)
    batch = obj.collate([long, "a cat"], np.random.default_rng(0))
    assert batch["input_ids"].shape == batch["attention_mask"].shape == (2, 8)


def test_one_step_is_a_trained_row_and_step_0_reads_the_last_stage_setting(tmp_path):
    """steps=1 trains (only 0 is the step-0 row); the step-0 row runs through the LAST stage's loop (its
    published batch size: SimCSE's 128 after MNTP's 32)."""
    _, acc = _train(tmp_path, "one", stage="simcse", steps=1)
    assert acc["steps"] == 1 and not acc.get("step0_row")
    _, acc = _train(tmp_path, "zero", steps=0, batch_size=None)
    assert acc["step0_row"] is True and acc["batch_size"] == L.PUBLISHED["simcse"]["batch_size"]


def test_mntp_keeps_the_models_own_attention_dropout(tmp_path, monkeypatch):
    """MNTP trains with the model's own attention dropout (the SimCSE stage sets 0.3), and the returned
    model has it back: a model whose config says 0.1 keeps 0.1."""
    load = L.load_lm

    def with_dropout(name, *a, **kw):
        lm, tok = load(name, *a, **kw)
        set_attention_dropout(lm, 0.1)
        return lm, tok

    monkeypatch.setattr(L, "load_lm", with_dropout)
    enc, _ = _train(tmp_path, "drop", stage="mntp+simcse", steps=1)
    assert enc.model.config.attention_dropout == 0.1
