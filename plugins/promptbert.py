"""PromptBERT, unsupervised (Jiang et al., EMNLP 2022, "PromptBERT: Improving BERT Sentence Embeddings
with Prompts"; official code github.com/kongds/Prompt-BERT, ``run.sh unsup-bert``).

A sentence is put into a template whose one [MASK] follows it, ``This sentence of "[X]" means [MASK].``,
and its vector is the last hidden state at the [MASK] position. Training contrasts each sentence under
TWO templates (the positive pair; the other sentences of the batch are the negatives), InfoNCE at
temperature 0.05, after TEMPLATE DENOISING: from each [MASK] vector the [MASK] vector of the template
alone is subtracted, the template run with the sentence removed but with the position ids it has
around an n-token sentence (the suffix starts at position 1 + len(prefix) + n), so the subtracted
vector carries the same positional bias. As in the official ``cl_forward``, the template-alone vectors
are computed in the same training forward (dropout on, gradients flowing), a linear+tanh layer follows
at training only (``--mlp_only_train``), and the saved encoder reads the [MASK] vector of the first
template without denoising (the official unsupervised evaluation passes no ``--mask_embedding_sentence_delta``).

| item | paper | reference code (kongds/Prompt-BERT, ``run.sh unsup-bert``) | benchbench |
|---|---|---|---|
| representation | prompt-based sentence embeddings (abstract); the [MASK] hidden state | ``--mask_embedding_sentence``: ``last_hidden[input_ids == mask_token_id]`` | same; the [MASK] position is computed per sentence from the template (a literal "[MASK]" in a sentence cannot move it) |
| templates (BERT) | different templates as the positive pair (the unsupervised objective) | ``This sentence of "[X]" means[MASK].`` (view 1 and evaluation) and ``This sentence : "[X]" means[MASK].`` (view 2) | same two, ``template`` / ``template2`` |
| template denoising | the unsupervised objective "by the technology of template denoising" (abstract) | ``get_delta``: template without the sentence, 50 rows, row n shifts positions after the prefix by n; ``pooler -= delta[n]``; train mode, gradients on; the shift starts after template 1's prefix for BOTH templates | same, 50 rows (more when a sentence is longer); each template shifts after its OWN prefix (identical for the default templates, whose prefixes have equal length) |
| denoising at test time | not checked | not used (``eargs`` lack ``--mask_embedding_sentence_delta``) | ``denoise_eval=false`` (default); ``true`` subtracts it at encoding too |
| MLP | - | ``--mlp_only_train``: dense+tanh on the denoised vector, BERT init, dropped at test | same (``mlp=true``) |
| loss / temperature | contrastive (InfoNCE), SimCSE's setting | ``cos_sim / 0.05``, cross-entropy over the batch | same |
| batch / lr / epochs | not checked (SimCSE's wiki1m setting) | 256 / 1e-5 / 1 epoch of wiki1m (``run.sh``), linear decay, no warm-up, AdamW wd 0, fp16 | same budget on the task's own sentences; bf16 autocast on CUDA (the loop's) |
| truncation | not checked | the SENTENCE is cut to 32 tokens, the template is added around it | same (``max_seq_length`` counts sentence tokens); at encoding the sentence is cut so that the whole input fits the encoder's max length, keeping the template's end |
| final period at test | - | ``evaluation.py`` appends "." to a sentence not ending in ``.?"'`` | same (encoding only, not training, as the reference) |
| checkpoint selection | not checked | every 125 steps on STS-B dev, best kept (``--load_best_model_at_end``) | NOT implemented: the last step is kept (fixed budget, as for the other methods) |
| gradient clipping | - | HF Trainer: global norm 1.0 | ``max_grad_norm`` 1.0 |
| base model | bert-base-uncased | same | offline: all-MiniLM-L6-v2 ([MASK] is in its vocabulary, but it was distilled and sentence-fine-tuned, never trained as a masked LM) or a tiny random BERT; no plain BERT is available offline, so the published numbers are not expected |
| RoBERTa | separate templates | separate template strings and ``.strip()`` | templates are options; ``[MASK]`` is replaced by the tokenizer's mask token; the sentence is tokenized on its own (no leading-space handling for byte-level BPE) |

The paper's full text could not be opened on this offline machine: its column holds what the abstract
and the official README state ("not checked" elsewhere); the code column is kongds/Prompt-BERT at
690ba6e. bench/fidelity_promptbert.py runs the official ``cl_forward``, ``sentemb_forward`` and
``get_delta`` against this file (equal to 0.0 on a tiny BERT, eval and train mode).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from benchbench_plugins._prompt import Template as PromptTemplate
from benchbench_plugins._prompt import make_mlp, pad_rows, sentence_ids

from benchbench import (
    ConfigError,
    LoopConfig,
    Method,
    Objective,
    TrainContext,
    TransformerEncoder,
    fit,
    hookimpl,
    resolve_steps,
    seed_everything,
    trainer_defaults,
)

DELTA_ROWS = 50  # the official get_delta(length=50): template-alone rows for sentence lengths 0..49
PROMPT_FILE = "promptbert_prompt.json"
LOADER = "promptbert-prompt"


@dataclass
class PromptBERTConfig:
    steps: int | None = None  # None: one epoch over the corpus
    epochs: float = 1.0
    batch_size: int = 256
    lr: float = 1e-5
    temperature: float = 0.05
    template: str = 'This sentence of "[X]" means [MASK].'  # view 1 and the saved encoder's
    template2: str = 'This sentence : "[X]" means [MASK].'  # view 2
    denoise: bool = True  # template denoising in training (--mask_embedding_sentence_delta)
    denoise_eval: bool = False  # subtract the template bias at encoding too (the unsupervised eval does not)
    mlp: bool = True  # dense+tanh on the training representation only (--mlp_only_train)
    max_seq_length: int | None = 32  # SENTENCE tokens in training; the template is added around them
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # HF Trainer's default clipping; 0 = off
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


@dataclass(frozen=True)
class Template(PromptTemplate):
    """The shared prompt template plus PromptBERT's template denoising (``bias``)."""

    def bias(self, model: torch.nn.Module, n: torch.Tensor, rows: int = 0) -> torch.Tensor:
        """Template denoising: for each sentence length in ``n``, the [MASK] vector of the template
        ALONE (``[CLS] prefix suffix [SEP]``) whose suffix positions are shifted by that length, as if
        the sentence were still there. One forward over ``max(rows, max(n) + 1)`` lengths (the
        official code runs 50), indexed by ``n``."""
        device = next(model.parameters()).device
        k = max(rows, int(n.max()) + 1 if n.numel() else 1)
        ids = torch.tensor(self.wrap([]), device=device).repeat(k, 1)
        pos = torch.arange(ids.shape[1], device=device).repeat(k, 1)
        pos[:, 1 + len(self.prefix) :] += torch.arange(k, device=device)[:, None]
        # The explicit all-ones mask is load-bearing: without one, transformers >= 5.x reads a jump in
        # ``position_ids`` as the start of a packed sequence and attends block-diagonally, so the prefix
        # would never reach the [MASK] (both templates' biases then coincide).
        hidden = model(input_ids=ids, position_ids=pos, attention_mask=torch.ones_like(ids)).last_hidden_state
        return hidden[:, self.mask_index(0)][n]


def add_period(s: str) -> str:
    """The official evaluation's ending rule: a sentence not ending in . ? " ' gets a period."""
    s = s.strip()
    return s + "." if s and s[-1] not in ".?\"'" else s


class PromptEncoder(TransformerEncoder):
    """Encodes with the prompt: the [MASK] vector of ``template`` around each sentence (minus the
    template bias when ``denoise``). Saved as a sentence-transformers folder plus ``promptbert_prompt.json``
    and a ``benchbench_wrapper.json`` naming the registered loader ``promptbert-prompt``, so ``--model PATH``
    reloads it WITH the prompt (plain sentence-transformers would pool [CLS] without it)."""

    def __init__(self, base: TransformerEncoder, template: str, denoise: bool = False):
        super().__init__(
            base.model,
            base.tokenizer,
            pooling=base.pooling,
            max_seq_length=base.max_seq_length,
            normalize=base.normalize,
            name=base.name,
            batch_size=base.batch_size,
        )
        self.template = Template.parse(template, base.tokenizer, "promptbert")
        self.denoise = denoise

    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """The templated inputs; the SENTENCE is cut so the whole input fits ``max_seq_length``, so a long
        sentence keeps the template's end (and its [MASK])."""
        t = self.template
        sents = sentence_ids(self.tokenizer, [add_period(s) for s in texts], max(0, self.max_seq_length - t.overhead))
        ids, mask = pad_rows([t.wrap(s) for s in sents], self.tokenizer.pad_token_id)
        n = torch.tensor([len(s) for s in sents], dtype=torch.long)
        return {"input_ids": ids, "attention_mask": mask, "mask_pos": n + t.mask_index(0), "n_sentence": n}

    def lengths(self, texts: list[str]) -> list[int]:
        return [self.template.overhead + len(s) for s in sentence_ids(self.tokenizer, texts, None)]

    def forward(self, input_ids, attention_mask, mask_pos=None, n_sentence=None, **_ignored) -> dict:
        tokens = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        h = tokens[torch.arange(len(tokens), device=tokens.device), mask_pos]
        if self.denoise:
            h = h - self.template.bias(self.model, n_sentence)
        return {"token_embeddings": tokens, "sentence_embedding": h, "attention_mask": attention_mask}

    def prompt_config(self) -> dict:
        return {"template": self.template.text, "denoise": self.denoise}

    @property
    def fingerprint(self) -> str:
        h = hashlib.blake2b(json.dumps(self.prompt_config(), sort_keys=True).encode(), digest_size=8)
        return f"{super().fingerprint}-prompt-{h.hexdigest()}"

    def save(self, path) -> Path:
        path = super().save(path)
        (path / PROMPT_FILE).write_text(json.dumps(self.prompt_config(), indent=2))
        (path / "benchbench_wrapper.json").write_text(json.dumps({"loader": LOADER}))
        return path


def load_prompt_encoder(base: TransformerEncoder, path: str | Path) -> PromptEncoder:
    cfg = json.loads((Path(path) / PROMPT_FILE).read_text())
    return PromptEncoder(base, cfg["template"], bool(cfg["denoise"]))


class PromptBERTObjective(Objective):
    """InfoNCE between the denoised [MASK] vectors of one sentence under two templates."""

    def __init__(self, encoder: PromptEncoder, c: PromptBERTConfig):
        super().__init__()
        self.encoder = encoder
        self.templates = (encoder.template, Template.parse(c.template2, encoder.tokenizer, "promptbert"))
        self.temperature, self.denoise = c.temperature, c.denoise
        # the reference cuts the SENTENCE to max_seq_length tokens; never past what the model can hold
        room = encoder.max_seq_length - max(t.overhead for t in self.templates)
        self.limit = min(c.max_seq_length, room) if c.max_seq_length else room
        self.mlp = make_mlp(encoder) if c.mlp else torch.nn.Identity()

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        """Rows interleaved as the official batch flattens (sentence i: view 1 at 2i, view 2 at 2i+1),
        one padded tensor; no period is added (the reference adds it at evaluation only)."""
        sents = sentence_ids(self.encoder.tokenizer, items, self.limit)
        t1, t2 = self.templates
        ids, mask = pad_rows([t.wrap(s) for s in sents for t in (t1, t2)], self.encoder.tokenizer.pad_token_id)
        n = torch.tensor([len(s) for s in sents], dtype=torch.long)
        pos = torch.stack([n + t1.mask_index(0), n + t2.mask_index(0)], 1).reshape(-1)
        return {"input_ids": ids, "attention_mask": mask, "mask_pos": pos, "n_sentence": n, "n_tokens": int(mask.sum())}

    def views(self, input_ids, attention_mask, mask_pos, n_sentence) -> tuple[torch.Tensor, torch.Tensor]:
        """The two training vectors of each sentence (before the MLP). The template-alone forwards come
        first, as in the official ``cl_forward`` (same dropout stream)."""
        model = self.encoder.model
        if self.denoise:
            d1, d2 = (t.bias(model, n_sentence, DELTA_ROWS) for t in self.templates)
        tokens = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        h = tokens[torch.arange(len(tokens), device=tokens.device), mask_pos].view(len(n_sentence), 2, -1)
        h1, h2 = h[:, 0], h[:, 1]
        if self.denoise:
            h1, h2 = h1 - d1, h2 - d2
        return h1, h2

    def forward(self, input_ids, attention_mask, mask_pos, n_sentence) -> torch.Tensor:
        h1, h2 = self.views(input_ids, attention_mask, mask_pos, n_sentence)
        z1, z2 = self.mlp(h1).float(), self.mlp(h2).float()
        sim = F.cosine_similarity(z1[:, None], z2[None], dim=-1) / self.temperature
        return F.cross_entropy(sim, torch.arange(len(z1), device=sim.device))


class PromptBERT(Method):
    name = "promptbert"
    Config = PromptBERTConfig
    description = "unsupervised PromptBERT: [MASK] of a prompt, two templates as positives, template denoising"

    def loss_chance(self, objective) -> float:
        """InfoNCE of the two templates' [MASK] vectors over the batch's b candidates: ln b."""
        return math.log(self.config.batch_size)

    def train(self, corpus: list[str], ctx: TrainContext) -> PromptEncoder:
        c = self.config
        if c.temperature <= 0:
            raise ConfigError(f"promptbert: option 'temperature' must be > 0 (got {c.temperature}).")
        if c.template == c.template2:
            raise ConfigError("promptbert: options 'template' and 'template2' must differ (the positive pair).")
        seed_everything(ctx.seed)
        encoder = PromptEncoder(ctx.load_encoder(), c.template, denoise=c.denoise_eval)
        obj = PromptBERTObjective(encoder, c)
        steps = resolve_steps(c.steps, len(corpus), c.batch_size * c.grad_accum, c.epochs)
        obj = fit(
            self,
            obj,
            corpus,
            ctx,
            loop=LoopConfig.from_config(c, steps=steps),
            **trainer_defaults(c.lr, steps),
        )
        return obj.encoder


@hookimpl
def benchbench_register_methods(register):
    register(PromptBERT.name, PromptBERT)


@hookimpl
def benchbench_register_loaders(register):
    register(LOADER, load_prompt_encoder)
