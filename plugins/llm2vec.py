"""LLM2Vec (BehnamGhader et al., COLM 2024): a decoder-only LLM made a sentence encoder in three stages.

1. **Bidirectional attention**: every token attends to every (non-padding) token; the causal mask is
   dropped (``make_bidirectional``; the reference's ``LlamaBiModel`` / ``Qwen2BiModel``).
2. **Masked next-token prediction (MNTP)**: a fraction of the tokens is masked as in BERT's MLM (80% the
   mask token, 10% a random token, 10% kept) and the token at position i is predicted from the OUTPUT AT
   POSITION i-1 (the causal LM's shifted head, kept so that the pretrained head and the next-token habit
   are reused). Trained with LoRA; the adapter is merged after the stage.
3. **Unsupervised SimCSE** on the MNTP-merged model with a fresh LoRA: each sentence encoded twice
   (attention dropout 0.3 makes the two views differ), mean pooling, in-batch negatives, cosine x 20
   (``HardNegativeNLLLoss`` with scale 20 = temperature 0.05). Merged for encoding.

The encoder is the merged bidirectional model with LLM2Vec's mean pooling (over the sentence's own
tokens: the tokens a tokenizer adds, a BOS, are skipped, as ``LLM2Vec.encode`` does through its
``embed_mask``), left padding, pad = EOS.

Budget rule: ``steps``, ``batch_size``, ``lr`` and ``max_seq_length`` apply to EACH trained stage
(``stage="mntp+simcse"`` with ``--steps 20`` is 20 MNTP steps, then 20 SimCSE steps); ``batch_size`` and
``lr`` left at None take each stage's published value (MNTP 32 and 5e-5, SimCSE 128 and 3e-5). Step 0 (``steps=0``) is stage 1 alone: the bidirectional start
through LLM2Vec's mean pooling, no LoRA, no training: the row a study reads each trained row against.

Equality with the reference (re-implemented from McGill-NLP/llm2vec@312adcf, tiny random Llama and Qwen2,
float32): the bidirectional hidden states, MNTP's loss and LoRA gradients, the collator's masks, the
encoding's mean over the text's tokens, and a SimCSE step's loss and LoRA gradients
(``tests/plugins/test_llm2vec.py``). A learning curve (a study's monitor) is the LAST stage's: its step-0
point is the model the earlier stage left (for ``mntp+simcse``, the MNTP-merged model).

Resume: each trained stage is a run of the one loop. MNTP's loop checkpoints live in
``checkpoints/mntp/``; under ``benchbench run`` its LAST checkpoint is kept until the run's encoder is
stored (the loop's deferred clean-up), so a kill during SimCSE resumes SimCSE from its own checkpoint
after re-reading MNTP's weights from that last checkpoint (no MNTP step is redone).

| item | paper / reference code (McGill-NLP/llm2vec@312adcf, ``train_configs/{mntp,simcse}/*.json``) | benchbench |
|---|---|---|
| bidirectional attention | ``LlamaBiModel``: causal mask replaced by a padding-only mask (``is_causal=False``) | transformers 5's own switch (``config.is_causal=False`` and each attention's ``is_causal``), ``make_bidirectional``; equal hidden states (tests) |
| MNTP masking | ``DataCollatorForLanguageModeling``, ``mlm_probability`` 0.2, 80/10/10; ``mask_token_type`` "blank": mask token ``_`` when the tokenizer has none | same collator, 0.2, ``_``; its mask drawn from the loop's per-batch rng (exact resume) |
| MNTP loss | ``LlamaBiForMNTP`` = ``LlamaForCausalLM``'s forward: CE(logits[:, :-1], labels[:, 1:]) over masked positions | same shift, the vocabulary projection on masked positions only (equal loss, tests) |
| MNTP data | wikitext-103 (or Wikipedia), texts concatenated and cut into 512-token blocks | the task's own sentences, one per row, right-padded, cut at 128 tokens (``max_seq_length``, shared with SimCSE; few sentences reach it), no concatenation: a sentence's first token is never predicted (no left neighbour), as a block's first token |
| MNTP batch / lr / steps | 32 / 5e-5 (HF default, the config sets none) / 1000 (``stop_after_n_steps``) | the same defaults; ``steps``/``batch_size``/``lr`` apply to each stage when set |
| LoRA | r 16, alpha 2r = 32, dropout 0.05, q/k/v/o/gate/up/down, no bias, on the inner model (not the head) | same, through peft |
| SimCSE data | Wiki1M sentences (line = positive = query) | the task's own sentences |
| SimCSE views | two separate forward passes of the same batch, attention dropout 0.3 (``simcse_dropout``), LoRA dropout 0.05 | same |
| SimCSE loss | ``HardNegativeNLLLoss``: CE(cos(q, d) x 20) over in-batch candidates | same (equal loss and gradients, tests) |
| SimCSE batch / lr / steps / length | 128 / 3e-5 / 1000 / 128 tokens | same defaults |
| pooling in SimCSE training | ``mean`` with ``skip_instruction``: plain Wiki1M lines carry no separator, so ``embed_mask`` is all zero and ``last_hidden_states[i, -0:]`` averages the WHOLE padded row (left padding included) | ``simcse_train_pool="text"`` (default): the sentence's own tokens, as at encoding time; ``"padded-row"`` reproduces the reference (equal, tests) |
| pooling at encoding | ``LLM2Vec.encode``: ``"!@#$%^&*()" + text``, ``embed_mask`` = the text's tokens without the tokenizer's special tokens; mean | same tokens (tests); max length 512 |
| schedule | HF Trainer: linear decay over 3 epochs of the corpus, stopped at 1000 steps (lr still >= 95% of its start there) | constant lr (what the reference's lr is within 5% over its 1000 steps; a decay to 0 over our short budget would halve the step) |
| precision / speed | ``torch_dtype`` bfloat16 (the decoder's weights in bf16; no ``bf16`` autocast flag), flash-attention 2, ``gradient_checkpointing`` true (both stages' configs) | ``weights_dtype``: "float32" (default; on CUDA under the loop's bf16 autocast) or "bfloat16" (the reference's: the decoder's weights bf16 in both stages and in the trained encoder; the LoRA adapters stay float32, peft's default since 0.12, where the reference's 2024 peft likely cast them to bf16; a result key of its own; allowed on a CPU with a warning: numbers of their own, speed up to the CPU's bf16 units); ``gradient_checkpointing`` (off by default; torch's non-reentrant checkpoint per decoder layer, which restores the RNG state: the same loss and LoRA gradients with dropout on, tests, so not in the result key); sdpa attention; a GPU bench: ``bench/gpu_llm_mfu.py`` |
| model | Llama-2-7B, Mistral-7B, Llama-3-8B, Sheared-LLaMA-1.3B (and Qwen2 in the code) | offline: SmolLM2-135M-Instruct de-quantised from 4 bits (a Llama); any Llama or Qwen2 decoder by name |
| instructions | task instructions at evaluation (MTEB) | none: STS sentences encoded as themselves (the reference's encode with an empty instruction) |
"""

from __future__ import annotations

import copy
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from benchbench import (
    ConfigError,
    DecoderEncoder,
    LoopConfig,
    Method,
    Objective,
    TrainContext,
    adamw,
    fit,
    hookimpl,
    is_decoder_name,
    load_decoder,
    method_fingerprint,
    seed_everything,
    train_loop,
)

STAGES = ("mntp", "simcse", "mntp+simcse")
# each stage's published settings (train_configs/mntp/*.json, train_configs/simcse/*.json; MNTP's lr is the
# HF Trainer default, its config sets none)
PUBLISHED: dict[str, dict[str, Any]] = {
    "mntp": {"batch_size": 32, "lr": 5e-5},
    "simcse": {"batch_size": 128, "lr": 3e-5},
}
ENCODE_MAX_LENGTH = 512  # LLM2Vec's ``max_length`` default
LORA_MODULES = "q_proj,v_proj,k_proj,o_proj,gate_proj,up_proj,down_proj"  # initialize_peft's for Llama/Qwen2
TRAIN_POOLS = ("text", "padded-row")
WEIGHTS_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}

log = logging.getLogger(__name__)


@dataclass
class LLM2VecConfig:
    stage: str = "mntp+simcse"  # which trained stages follow stage 1 (bidirectional attention)
    steps: int = 1000  # per trained stage (both published configs: stop_after_n_steps 1000); 0 = step-0 row
    batch_size: int | None = None  # per trained stage; None: MNTP 32, SimCSE 128
    lr: float | None = None  # per trained stage; None: MNTP 5e-5, SimCSE 3e-5
    # the training cut of both stages: SimCSE's 128 (MNTP's 512 cut its concatenated blocks; one sentence a
    # row, 128 tokens cut few); encoding reads up to 512, LLM2Vec's max_length
    max_seq_length: int = 128
    mask_ratio: float = 0.2  # MNTP's mlm_probability
    lora_r: int = 16
    lora_alpha: int = 32  # the reference passes 2 x lora_r
    lora_dropout: float = 0.05
    lora_modules: str = LORA_MODULES
    simcse_dropout: float = 0.3  # attention dropout in the SimCSE stage
    loss_scale: float = 20.0  # HardNegativeNLLLoss scale (1 / temperature)
    simcse_train_pool: str = "text"  # "padded-row": the reference's training pooling (see the table)
    pooling: str = "mean"
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # HF Trainer's clipping
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key
    # the GPU path (issue 48). Activation (gradient) checkpointing of every decoder layer in both trained
    # stages: a memory knob, proven not to change the loss or the LoRA gradients with dropout on
    # (tests/plugins/test_llm2vec_gpu_path.py), so not in the result key
    gradient_checkpointing: bool = field(default=False, metadata={"hash": False})
    # the decoder's weights in training and in the trained encoder: "bfloat16" is the reference's; it changes
    # the numbers, so it enters the result key when set (results stored before it existed keep theirs)
    weights_dtype: str = field(default="float32", metadata={"hash": "unless_default"})


# ---- stage 2: MNTP -------------------------------------------------------------------------------
def mntp_tokenizer(tokenizer: Any) -> Any:
    """A copy of ``tokenizer`` set up as ``run_mntp.py`` sets its own: mask token ``_`` when it has none
    (``mask_token_type="blank"``), pad = EOS when it has none, right padding (the reference's blocks are
    unpadded: right padding keeps every real token at the position it would have there). A copy, so the
    encoder's tokenizer never learns a mask token."""
    tok = copy.deepcopy(tokenizer)
    if tok.mask_token is None:
        tok.mask_token = "_"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "right"
    return tok


def mntp_loss(hidden: torch.Tensor, labels: torch.Tensor, head: torch.nn.Module) -> torch.Tensor:
    """Masked NEXT-token prediction: the label at position i (a masked token) is read from the head's
    output at position i-1, exactly ``LlamaForCausalLM``'s shifted loss restricted to masked labels (the
    vocabulary projection is computed on those positions only)."""
    target = labels[:, 1:]
    where = target != -100
    if not where.any():  # a batch of one-token sentences can draw no mask
        return hidden.sum() * 0.0
    logits = head(hidden[:, :-1][where])
    return F.cross_entropy(logits.float(), target[where])


class MNTPObjective(Objective):
    def __init__(self, lm: torch.nn.Module, tokenizer: Any, mask_ratio: float, max_length: int, encoder_of):
        super().__init__()
        from transformers import DataCollatorForLanguageModeling

        self.lm = lm
        self.tokenizer = mntp_tokenizer(tokenizer)
        self.max_length = int(max_length)
        self.collator = DataCollatorForLanguageModeling(self.tokenizer, mlm_probability=mask_ratio)
        self._encoder_of = encoder_of

    def result(self):
        return self._encoder_of(self.lm)

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        tok = self.tokenizer(
            [t.strip() for t in items], truncation=True, max_length=self.max_length, return_special_tokens_mask=True
        )
        examples = [{k: tok[k][i] for k in tok} for i in range(len(items))]
        self.collator.generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
        batch = dict(self.collator(examples))
        batch["n_tokens"] = int(batch["attention_mask"].sum())
        return batch

    def forward(self, input_ids, attention_mask, labels) -> torch.Tensor:
        hidden = self.lm.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return mntp_loss(hidden, labels, self.lm.head)


# ---- stage 3: SimCSE -----------------------------------------------------------------------------
def text_mask(tokenizer: Any, texts: list[str], attention_mask: torch.Tensor, max_length: int) -> torch.Tensor:
    """LLM2Vec's ``embed_mask`` for texts without an instruction: the LAST n positions of each
    left-padded row, n = the text's token count without the tokenizer's special tokens (a BOS is left
    out of the mean)."""
    mask = torch.zeros_like(attention_mask)
    for i, t in enumerate(texts):
        n = len(tokenizer(t, truncation=True, max_length=max_length, add_special_tokens=False)["input_ids"])
        if n:
            mask[i, -n:] = 1
    return mask


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1)


def simcse_loss(q: torch.Tensor, d: torch.Tensor, scale: float) -> torch.Tensor:
    """``HardNegativeNLLLoss`` without hard negatives: cross-entropy over cos(q_i, d_j) x scale."""
    scores = F.normalize(q.float(), dim=-1) @ F.normalize(d.float(), dim=-1).T * scale
    return F.cross_entropy(scores, torch.arange(len(scores), device=scores.device))


def encode_tokenizer(tokenizer: Any) -> Any:
    """``LLM2Vec.from_pretrained``'s tokenizer settings: pad = EOS, left padding (a copy)."""
    tok = copy.deepcopy(tokenizer)
    tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


class SimCSEStageObjective(Objective):
    def __init__(self, lm: torch.nn.Module, tokenizer: Any, scale: float, max_length: int, pool: str, encoder_of):
        super().__init__()
        self.lm = lm
        self.tokenizer = encode_tokenizer(tokenizer)
        self.scale, self.max_length, self.pool = float(scale), int(max_length), pool
        self._encoder_of = encoder_of

    def result(self):
        return self._encoder_of(self.lm)

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        texts = [t.strip() for t in items]
        tok = self.tokenizer(texts, return_tensors="pt", padding=True, truncation=True, max_length=self.max_length)
        if self.pool == "text":
            pool_mask = text_mask(self.tokenizer, texts, tok["attention_mask"], self.max_length)
        else:  # the reference's training pooling: an all-zero embed_mask, so the whole padded row
            pool_mask = torch.ones_like(tok["attention_mask"])
        n = int(tok["attention_mask"].sum())
        return {
            "input_ids": tok["input_ids"],
            "attention_mask": tok["attention_mask"],
            "pool_mask": pool_mask,
            "n_tokens": 2 * n,
        }

    def embed(self, input_ids, attention_mask, pool_mask) -> torch.Tensor:
        hidden = self.lm.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return mean_pool(hidden, pool_mask)

    def forward(self, input_ids, attention_mask, pool_mask) -> torch.Tensor:
        q = self.embed(input_ids, attention_mask, pool_mask)  # two passes, as the reference's compute_loss
        d = self.embed(input_ids, attention_mask, pool_mask)
        return simcse_loss(q, d, self.scale)


# ---- the model: body + head, LoRA ----------------------------------------------------------------
class TiedHead(torch.nn.Module):
    """The output projection of a model whose head is its input embedding (``tie_word_embeddings``):
    a bare model (``AutoModel``) has no head module to load. The embedding is held outside the module
    tree (the body owns it), so it is saved and moved once."""

    def __init__(self, embedding: torch.nn.Embedding):
        super().__init__()
        self._embedding = [embedding]

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self._embedding[0].weight)


class DecoderLM(torch.nn.Module):
    """A decoder's transformer (``model``: peft-wrapped while a stage trains) and its LM ``head``:
    ``LlamaBiForMNTP``'s two parts, the adapter on the inner model only (as the reference's
    ``model.model = initialize_peft(model.model)``)."""

    def __init__(self, model: torch.nn.Module, head: torch.nn.Module):
        super().__init__()
        self.model, self.head = model, head

    @property
    def body(self) -> torch.nn.Module:
        """The plain transformer (under the peft wrapper while an adapter is on)."""
        from peft import PeftModel

        return self.model.get_base_model() if isinstance(self.model, PeftModel) else self.model


def load_lm(name: str, dtype: torch.dtype = torch.float32) -> tuple[DecoderLM, Any]:
    """Stage 1: the decoder ``name`` with bidirectional attention, and its LM head (the checkpoint's, or
    the tied input embedding of a bare model), its weights in ``dtype``."""
    model, tokenizer = load_decoder(name, attention="bidirectional", lm_head=True, dtype=dtype)
    head = model.get_output_embeddings()
    if head is not None:
        return DecoderLM(model.model, head), tokenizer
    if not getattr(model.config, "tie_word_embeddings", False):
        raise ConfigError(f"llm2vec: model {name!r} has no LM head to train MNTP with (and no tied embedding).")
    return DecoderLM(model, TiedHead(model.get_input_embeddings())), tokenizer


def add_lora(lm: DecoderLM, c: LLM2VecConfig) -> DecoderLM:
    """``initialize_peft`` on the inner model (never the head): the adapter's A drawn from torch's RNG,
    B zero, every other weight frozen."""
    from peft import LoraConfig, get_peft_model

    modules = [m.strip() for m in c.lora_modules.split(",") if m.strip()]
    config = LoraConfig(
        r=c.lora_r, lora_alpha=c.lora_alpha, target_modules=modules, lora_dropout=c.lora_dropout, bias="none"
    )
    for p in lm.parameters():
        p.requires_grad_(False)
    lm.model = get_peft_model(lm.model, config)
    return lm


def merge_lora(lm: DecoderLM) -> DecoderLM:
    """The adapter folded into the weights (``merge_and_unload``): a plain model again."""
    from peft import PeftModel

    if isinstance(lm.model, PeftModel):
        lm.model = lm.model.merge_and_unload()
    return lm


def set_gradient_checkpointing(lm: DecoderLM, on: bool) -> None:
    """Activation checkpointing of every decoder layer of ``lm``'s transformer, on or off. On: transformers'
    own switch with ``use_reentrant=False`` (torch's non-reentrant checkpoint: it needs no input that
    requires grad, restores the RNG state for the recomputation, so dropout draws the same masks, and runs
    under autocast); transformers also hooks the input embedding's output to require grad (its
    ``enable_input_require_grads``, the peft recipe for frozen weights), harmless here. Off: both undone, so
    an encoder reads the plain model (the layers only checkpoint in training mode anyway)."""
    body = lm.body
    if on:
        kwargs = {"use_reentrant": False}
        if hasattr(body, "activation_checkpointing_enable"):  # the new name (the old one warns where both exist)
            body.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            body.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        return
    if hasattr(body, "activation_checkpointing_disable"):
        body.activation_checkpointing_disable()
    else:
        body.gradient_checkpointing_disable()
    body.disable_input_require_grads()


def set_attention_dropout(lm: DecoderLM, p: float) -> None:
    """``from_pretrained(..., attention_dropout=p)``: the config's value and each attention module's copy."""
    lm.body.config.attention_dropout = p
    for m in lm.modules():
        if isinstance(getattr(m, "attention_dropout", None), float):
            m.attention_dropout = p


# ---- the encoder ---------------------------------------------------------------------------------
class LLM2VecEncoder(DecoderEncoder):
    """A bidirectional decoder read as ``LLM2Vec.encode`` reads a text without instruction: left padding,
    the mean over the text's own tokens (``embed_mask``: the tokenizer's added tokens, a BOS, left out).
    Saved as a decoder folder plus ``benchbench_encoder.json`` naming the registered loader ``llm2vec``,
    so ``--model PATH`` reloads it with this pooling."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, max_seq_length: int = ENCODE_MAX_LENGTH, name: str = ""):
        super().__init__(
            model,
            encode_tokenizer(tokenizer),
            pooling="mean",
            max_seq_length=max_seq_length,
            name=name,
            attention="bidirectional",
            padding_side="left",
        )

    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        prepared = self._fit(texts)
        tok = dict(self.tokenizer(prepared, padding=True, return_tensors="pt"))
        tok["embed_mask"] = text_mask(self.tokenizer, prepared, tok["attention_mask"], self.seq_length)
        return tok

    def forward(self, input_ids, attention_mask, embed_mask=None, **_ignored) -> dict[str, torch.Tensor]:
        tokens = self.token_states(input_ids, attention_mask)
        mask = attention_mask if embed_mask is None else embed_mask
        return {
            "token_embeddings": tokens,
            "sentence_embedding": mean_pool(tokens, mask),
            "attention_mask": attention_mask,
        }

    def readout(self) -> dict[str, Any]:
        return {**super().readout(), "mean_over": "text tokens (LLM2Vec embed_mask)"}

    def save(self, path) -> Path:
        path = super().save(path)
        (path / "benchbench_encoder.json").write_text(json.dumps({"loader": "llm2vec"}))
        return path


def load_llm2vec_encoder(_encoder: Any, path: str | Path) -> LLM2VecEncoder:
    model, tokenizer = load_decoder(str(path), attention="bidirectional")
    saved = json.loads((Path(path) / "benchbench_decoder.json").read_text(encoding="utf-8"))
    return LLM2VecEncoder(model, tokenizer, max_seq_length=int(saved.get("max_seq_length") or ENCODE_MAX_LENGTH))


# ---- the method ----------------------------------------------------------------------------------
class LLM2Vec(Method):
    name = "llm2vec"
    Config = LLM2VecConfig
    default_model = "smollm2-135m-instruct"
    description = "LLM2Vec: bidirectional attention, MNTP then unsupervised SimCSE with LoRA, mean pooling"

    def loss_chance(self, objective) -> float:
        """SimCSE: InfoNCE over the batch's b candidates, ln b; MNTP: ln V over the vocabulary."""
        if isinstance(objective, SimCSEStageObjective):
            return math.log(self._setting("simcse", "batch_size"))
        return math.log(len(objective.tokenizer))

    def _setting(self, stage: str, key: str):
        value = getattr(self.config, key)
        return PUBLISHED[stage][key] if value is None else value

    def _check(self) -> list[str]:
        c = self.config
        if c.stage not in STAGES:
            raise ConfigError(f"llm2vec: option 'stage' must be one of {STAGES} (got {c.stage!r}).")
        if not 0 < c.mask_ratio < 1:
            raise ConfigError(f"llm2vec: option 'mask_ratio' must be in (0, 1) (got {c.mask_ratio}).")
        if c.lora_r < 1:
            raise ConfigError(f"llm2vec: option 'lora_r' must be >= 1 (got {c.lora_r}).")
        if not 0 <= c.simcse_dropout < 1 or not 0 <= c.lora_dropout < 1:
            raise ConfigError("llm2vec: options 'simcse_dropout' and 'lora_dropout' must be in [0, 1).")
        if c.loss_scale <= 0:
            raise ConfigError(f"llm2vec: option 'loss_scale' must be > 0 (got {c.loss_scale}).")
        if c.simcse_train_pool not in TRAIN_POOLS:
            raise ConfigError(
                f"llm2vec: option 'simcse_train_pool' must be one of {TRAIN_POOLS} (got {c.simcse_train_pool!r})."
            )
        if c.pooling != "mean":
            raise ConfigError(
                f"llm2vec: option 'pooling' must be 'mean' (LLM2Vec's unsupervised recipe; got {c.pooling!r})."
            )
        if c.weights_dtype not in WEIGHTS_DTYPES:
            raise ConfigError(
                f"llm2vec: option 'weights_dtype' must be one of {tuple(WEIGHTS_DTYPES)} (got {c.weights_dtype!r})."
            )
        return c.stage.split("+")

    def _precision(self, ctx: TrainContext) -> None:
        """bf16 weights are the reference's GPU setting. On a CPU they are allowed, and said: the run's numbers
        are its own (another result key than the fp32 run's), and its speed depends on the CPU's bf16 units
        (emulated without them). Non-default precision options are written into the record's accounting."""
        c = self.config
        if c.weights_dtype != "float32":
            device = str(ctx.device or ("cuda" if torch.cuda.is_available() else "cpu"))
            if device.startswith("cpu"):
                log.warning(
                    "llm2vec: weights_dtype=%r on the CPU: allowed, but its numbers are a run of their own (not "
                    "comparable with float32 runs) and it is slow on CPUs without bf16 units; it is the "
                    "reference's setting for a GPU.",
                    c.weights_dtype,
                )
            ctx.accounting["weights_dtype"] = c.weights_dtype
        if c.gradient_checkpointing:
            ctx.accounting["gradient_checkpointing"] = True

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        stages = self._check()
        if not is_decoder_name(str(ctx.model)):
            raise ConfigError(
                f"llm2vec: base model {ctx.model!r} is not a decoder-only LLM: LLM2Vec turns a causal decoder "
                f"(Llama, Qwen2) bidirectional and trains it with masked NEXT-token prediction through its LM head. "
                f"Pass a decoder, e.g. --model smollm2-135m-instruct (or tiny-llama in tests)."
            )
        self._precision(ctx)
        seed_everything(ctx.seed)
        lm, tokenizer = load_lm(ctx.model, WEIGHTS_DTYPES[c.weights_dtype])  # stage 1: bidirectional attention
        label = str(ctx.model)

        def encoder_of(model: DecoderLM) -> LLM2VecEncoder:  # what a learning-curve monitor scores: a merged copy
            merged = merge_lora(copy.deepcopy(model))
            if c.gradient_checkpointing:
                set_gradient_checkpointing(merged, False)
            return LLM2VecEncoder(merged.body, tokenizer, name=label)

        if c.steps == 0:  # the step-0 row: stage 1 alone (no adapter, no update) through the last stage's objective
            obj = fit(
                self,
                self._objective(stages[-1], lm, tokenizer, encoder_of),
                corpus,
                ctx,
                loop=self._loop(stages[-1]),
                make_optimizer=lambda m: adamw(m.parameters(), lr=0.0),
            )
            return LLM2VecEncoder(obj.lm.body, tokenizer, name=label)
        done: dict[str, dict] = {}
        own_dropout = float(getattr(lm.body.config, "attention_dropout", 0.0) or 0.0)  # MNTP keeps the model's own
        for i, stage in enumerate(stages):
            seed_everything(ctx.seed)  # each adapter drawn from the run's seed, however the stage before ended
            add_lora(lm, c)
            if c.gradient_checkpointing:
                set_gradient_checkpointing(lm, True)
            set_attention_dropout(lm, c.simcse_dropout if stage == "simcse" else own_dropout)
            obj = self._objective(stage, lm, tokenizer, encoder_of)
            lr = self._setting(stage, "lr")

            def make_optimizer(m, lr=lr):
                return adamw(m.parameters(), lr=lr)  # HF Trainer's AdamW, no weight decay; constant lr

            if i == len(stages) - 1:
                obj = fit(self, obj, corpus, ctx, loop=self._loop(stage), make_optimizer=make_optimizer)
                done[stage] = _stage_accounting(ctx.accounting)
            else:
                obj = self._earlier_stage(stage, obj, corpus, ctx, make_optimizer, done)
            lm = merge_lora(obj.lm)
            if c.gradient_checkpointing:
                set_gradient_checkpointing(lm, False)
            set_attention_dropout(lm, own_dropout)
        ctx.accounting["stages"] = done
        for k in ("seconds", "examples", "tokens"):  # the whole training's cost; ``steps`` stays per stage
            ctx.accounting[k] = sum(d.get(k) or 0 for d in done.values())
        return LLM2VecEncoder(lm.body, tokenizer, name=label)

    def _objective(self, stage: str, lm, tokenizer, encoder_of) -> Objective:
        c = self.config
        length = c.max_seq_length
        if stage == "mntp":
            return MNTPObjective(lm, tokenizer, c.mask_ratio, length, encoder_of)
        return SimCSEStageObjective(lm, tokenizer, c.loss_scale, length, c.simcse_train_pool, encoder_of)

    def _loop(self, stage: str) -> LoopConfig:
        c = self.config
        return LoopConfig.from_config(c, batch_size=self._setting(stage, "batch_size"))

    def _earlier_stage(
        self, stage: str, obj: Objective, corpus: list[str], ctx, make_optimizer, done: dict
    ) -> Objective:
        """A stage before the last: its own loop, checkpoints in ``checkpoints/<stage>/`` (kept to the end
        of the run when the runner defers clean-up, so a later stage's resume finds this one finished),
        no learning-curve monitor (the curve is the last stage's)."""
        phase = SimpleNamespace(
            device=ctx.device,
            seed=ctx.seed,
            progress=ctx.progress,
            task=ctx.task,
            accounting={},
            checkpoint_dir=Path(ctx.checkpoint_dir) / stage,
            defer_checkpoint_cleanup=bool(getattr(ctx, "defer_checkpoint_cleanup", False)),
        )
        trained = train_loop(
            obj,
            corpus,
            phase,
            self._loop(stage),
            make_optimizer=make_optimizer,
            fingerprint=f"{method_fingerprint(self, ctx, corpus)}-{stage}",
            desc=f"{self.name} {stage} {ctx.task or ''}".strip(),
        )
        done[stage] = _stage_accounting(phase.accounting)
        done[stage]["loss_chance"] = round(self.loss_chance(trained), 5)
        return trained


def _stage_accounting(a: dict) -> dict:
    keys = ("seconds", "steps", "examples", "tokens", "batch_size", "loss_curve", "resumed_from_steps", "loss_chance")
    return {k: a.get(k) for k in keys if k in a}


@hookimpl
def benchbench_register_methods(register):
    register(LLM2Vec.name, LLM2Vec)


@hookimpl
def benchbench_register_loaders(register):
    register("llm2vec", load_llm2vec_encoder)
