"""ESimCSE: Enhanced Sample Building for unsupervised SimCSE (Wu et al., COLING 2022).

Unsupervised SimCSE (dropout positives, in-batch negatives) changed on both sides of the loss:

* the positive: the second view is the sentence with some of its subword tokens REPEATED in place
  ("word repetition"), so that the two views of a positive pair no longer have the same length; both
  views keep dropout on, as in SimCSE;
* more negatives: a FIFO queue of sentence vectors from earlier batches, encoded by a momentum encoder
  theta_m <- lambda * theta_m + (1 - lambda) * theta_e (lambda = 0.995) with dropout off; it holds the
  newest 160 vectors (2.5 x the batch of 64, the paper's best ratio).

With h_i the original sentence's vector and h_i+ its repeated view's (both through the training-only
MLP on [CLS]), the loss of sentence i is cross-entropy over cosine / 0.05 against the batch's
repeated views and the queue:
    -log e^{cos(h_i, h_i+)/t} / (sum_j e^{cos(h_i, h_j+)/t} + sum_{m in queue} e^{cos(h_i, h_m)/t}).

One training forward does what the reference's ``cl_forward`` and ``CLTrainer.compute_loss`` do, in
their order: encode both views in one pass; loss against the queue as it stood; EMA update of the
momentum encoder from the online encoder's current weights (per micro-batch, before the backward);
encode the ORIGINAL sentences with the momentum encoder (eval mode) and the online MLP (no gradient);
enqueue them, dropping the oldest. The queue and the momentum encoder are buffers/submodules of the
objective, so checkpoints hold them and a resumed run continues the same queue.

| item | paper | reference code (caskcsg/sentemb ``ESimCSE/``, commit 5eeec55) | benchbench |
|---|---|---|---|
| repetition rule | dup_len uniform in [0, max(2, int(dup_rate * N))], positions uniform | ``--dup_type bpe``: on the token ids after truncation (N counts [CLS]/[SEP]); dup_len = ``randrange(min(10, int(dup_rate*N)))`` (upper bound excluded, so at most 9, and none when int(dup_rate*N) = 0); positions ``sample(range(1, N-1))``: never [CLS]/[SEP]; each chosen token doubled in place | the reference code's rule (``repetition_positions``, ``repeat_at``; equal ids for equal draws: bench/fidelity_esimcse.py) |
| when the repetition is drawn | - | once per sentence at preprocessing (``datasets.map``; one epoch) | per micro-batch from the loop's seeded rng (same distribution; one epoch sees each sentence once) |
| dup_rate / momentum / temperature | 0.32 / 0.995 / 0.05 | 0.32 / 0.995 / 0.05 (``run.sh``, bert-base-uncased) | same |
| queue size | 2.5 x batch size best | ``--neg_size 160`` with batch 64 | ``queue_size`` 160 (absolute, as ``--neg_size``) |
| EMA | theta_m <- lambda theta_m + (1-lambda) theta_e | parameters only, inside the forward before the backward, every micro-batch | same (training mode only; buffers of BERT are integer) |
| momentum encoder start | not stated (MoCo: a copy of the encoder) | a fresh ``BertModel(config)``: ``from_pretrained`` has no weights for ``momentum_model``, so it starts RANDOM and nears the online encoder only through the EMA (0.995^1000 = 0.7% left after 1000 steps) | a copy of the start encoder (MoCo's start; bench/fidelity_esimcse.py shows the reference's random start) |
| keys | momentum encoder | momentum encoder, eval mode, ORIGINAL sentence, [CLS] then the ONLINE MLP without gradient; enqueued after the loss (negatives from the next step on) | same |
| pooling / MLP | [CLS] | ``--pooler_type cls --mlp_only_train``; evaluation ``cls_before_pooler`` | ``pooling="cls"``, ``mlp=True`` at training only; the saved encoder is the bare [CLS] |
| batch / lr / max length / epochs | 64 / 3e-5 / 32 / 1 on 1M Wikipedia sentences | same; HF Trainer: AdamW without weight decay, linear decay, no warm-up, clip 1.0, fp16 | same on the task's own sentences (corpus "task"); max length 32 for training only (the saved encoder keeps the start's); bf16 autocast on CUDA |
| checkpoint selection | STS-B dev, every 125 steps | ``--load_best_model_at_end`` | NOT implemented: the last step (fixed budget, as every method here) |
| dropout | 0.1 | ``--dropout 0.1`` (hidden and attention) | the start model's (0.1 for BERT, all-MiniLM-L6-v2 and tiny-bert) |
| several GPUs | - | keys are not gathered across GPUs | same (one queue per process) |
| base model | bert-base-uncased | bert-base-uncased | offline: all-MiniLM-L6-v2 (already sentence-tuned) or a tiny random BERT; no plain BERT is available offline |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

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

MAX_REPEATS = 10  # the reference's cap: randrange(min(10, int(dup_rate * N))), so at most 9 repeated tokens


@dataclass
class ESimCSEConfig:
    steps: int | None = None  # None: one epoch over the corpus
    epochs: float = 1.0
    batch_size: int = 64
    lr: float = 3e-5
    temperature: float = 0.05
    dup_rate: float = 0.32  # maximal share of a sentence's tokens that are repeated
    momentum: float = 0.995  # lambda of the momentum encoder's EMA
    queue_size: int = 160  # 2.5 x batch 64 (the reference's --neg_size); 0 = no queue, no momentum encoder
    max_seq_length: int | None = 32  # training truncation only (the saved encoder keeps the start's)
    pooling: str = "cls"
    mlp: bool = True  # SimCSE's dense+tanh on [CLS] at training only (--mlp_only_train)
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # HF Trainer (the reference's trainer) clips the global norm at 1.0; 0 = off
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


def repetition_positions(n_tokens: int, dup_rate: float, rng: np.random.Generator) -> list[int]:
    """Which token positions to repeat in a sequence of ``n_tokens`` ids (with [CLS] and [SEP]): how
    many is uniform in 0 .. min(10, int(dup_rate * n)) - 1, where is uniform without replacement over
    the positions between [CLS] and [SEP]; sorted."""
    top = min(MAX_REPEATS, int(dup_rate * n_tokens))
    if top <= 0 or n_tokens < 3:
        return []
    k = min(int(rng.integers(top)), n_tokens - 2)
    return sorted(int(i) for i in rng.choice(np.arange(1, n_tokens - 1), size=k, replace=False))


def repeat_at(ids: list[int], positions: list[int]) -> list[int]:
    """``ids`` with the token at each of ``positions`` doubled in place (order kept)."""
    dup = set(positions)
    out: list[int] = []
    for i, t in enumerate(ids):
        if i in dup:
            out.append(t)
        out.append(t)
    return out


def make_mlp(encoder: TransformerEncoder) -> torch.nn.Sequential:
    """SimCSE's ``MLPLayer`` (dense + tanh), initialised as BERT initialises a linear layer."""
    lin = torch.nn.Linear(encoder.dim, encoder.dim)
    torch.nn.init.normal_(lin.weight, std=float(getattr(encoder.model.config, "initializer_range", 0.02)))
    torch.nn.init.zeros_(lin.bias)
    return torch.nn.Sequential(lin, torch.nn.Tanh()).to(encoder.device)


class ESimCSEObjective(Objective):
    def __init__(
        self,
        encoder: TransformerEncoder,
        temperature: float,
        dup_rate: float,
        momentum: float,
        queue_size: int,
        mlp: bool = True,
    ):
        super().__init__()
        self.encoder = encoder
        self.temperature, self.dup_rate, self.momentum = float(temperature), float(dup_rate), float(momentum)
        self.mlp = make_mlp(encoder) if mlp else torch.nn.Identity()
        self.momentum_encoder = encoder.clone() if queue_size > 0 else None
        if self.momentum_encoder is not None:
            for p in self.momentum_encoder.parameters():
                p.requires_grad_(False)
        # oldest first; the newest ``queue_len`` rows (at the end) are the live ones
        self.register_buffer("queue", torch.zeros(int(queue_size), encoder.dim))
        self.register_buffer("queue_len", torch.zeros((), dtype=torch.long))

    def result(self) -> TransformerEncoder:
        """The encoder ``ESimCSE.train`` would return now (what a learning-curve monitor scores): a copy
        (it encodes at the start's max length, the training cut being training-only), without the
        training-only MLP."""
        return self.encoder.clone()

    # ---- the two views --------------------------------------------------------------------------
    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        tok = self.encoder.tokenizer
        ids = tok([s.strip() for s in items], truncation=True, max_length=self.encoder.seq_length)["input_ids"]
        repeated = [repeat_at(x, repetition_positions(len(x), self.dup_rate, rng)) for x in ids]
        both = tok.pad({"input_ids": ids + repeated}, return_tensors="pt")  # one pass, one padded length
        return {
            "input_ids": both["input_ids"],
            "attention_mask": both["attention_mask"],
            "n_tokens": int(both["attention_mask"].sum()),
        }

    # ---- the queue ------------------------------------------------------------------------------
    def negatives(self) -> torch.Tensor:
        """The queued momentum-encoder vectors, oldest first."""
        return self.queue[self.queue.shape[0] - int(self.queue_len) :]

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor) -> None:
        """Append ``keys`` (newest last) and keep the ``queue_size`` newest."""
        size = self.queue.shape[0]
        if size == 0:
            return
        kept = torch.cat([self.negatives(), keys.detach().to(self.queue.dtype)])[-size:]
        self.queue[size - len(kept) :] = kept
        self.queue_len.fill_(len(kept))

    @torch.no_grad()
    def momentum_update(self) -> None:
        """theta_m <- m * theta_m + (1 - m) * theta_e, parameters only (the reference's update)."""
        m = self.momentum
        for pm, pe in zip(self.momentum_encoder.parameters(), self.encoder.parameters()):
            pm.mul_(m).add_(pe.detach(), alpha=1.0 - m)

    @torch.no_grad()
    def keys(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Momentum-encoder vectors of the original sentences: dropout off, then the online MLP."""
        was = self.momentum_encoder.training
        self.momentum_encoder.eval()
        try:
            pooled = self.momentum_encoder(input_ids=input_ids, attention_mask=attention_mask)["sentence_embedding"]
            return self.mlp(pooled).float()
        finally:
            self.momentum_encoder.train(was)

    # ---- the loss -------------------------------------------------------------------------------
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        n = input_ids.shape[0] // 2
        z = self.mlp(self.encoder(input_ids=input_ids, attention_mask=attention_mask)["sentence_embedding"])
        # a copy: the enqueue below overwrites the buffer the backward would otherwise read
        loss = esimcse_loss(z[:n], z[n:], self.negatives().clone(), self.temperature)
        if self.training and self.momentum_encoder is not None:
            self.momentum_update()
            mask = attention_mask[:n]
            width = int(mask.any(0).nonzero().max()) + 1  # the originals' own padded length (repeats are longer)
            self.enqueue(self.keys(input_ids[:n, :width], mask[:, :width]))
        return loss


def esimcse_loss(z1: torch.Tensor, z2: torch.Tensor, queue: torch.Tensor, temperature: float) -> torch.Tensor:
    """Cross-entropy of each original (row) over [the repeated views of the batch | the queue]; the
    positive of row i is column i."""
    z1 = z1.float()
    logits = F.cosine_similarity(z1[:, None], z2.float()[None], dim=-1)
    if len(queue):
        logits = torch.cat([logits, F.cosine_similarity(z1[:, None], queue.detach().float()[None], dim=-1)], 1)
    return F.cross_entropy(logits / temperature, torch.arange(len(z1), device=logits.device))


class ESimCSE(Method):
    name = "esimcse"
    Config = ESimCSEConfig
    description = "ESimCSE: word-repetition positives, momentum-encoder queue of negatives, temperature 0.05"

    def loss_chance(self, objective) -> float:
        """InfoNCE over the b repeated views plus the queue once full: ln(b + queue_size). The queue fills
        in its first queue_size / b steps, so the level rises from ln b to this while it fills (a loss
        that rises early, e.g. 3.7 -> 4.8 at b = 16 with 160 queued, is mostly that)."""
        return math.log(self.config.batch_size + self.config.queue_size)

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        if c.temperature <= 0:
            raise ConfigError(f"esimcse: option 'temperature' must be > 0 (got {c.temperature}).")
        if not 0.0 <= c.dup_rate <= 1.0:
            raise ConfigError(f"esimcse: option 'dup_rate' must be in [0, 1] (got {c.dup_rate}).")
        if not 0.0 <= c.momentum < 1.0:
            raise ConfigError(f"esimcse: option 'momentum' must be in [0, 1) (got {c.momentum}).")
        if c.queue_size < 0:
            raise ConfigError(f"esimcse: option 'queue_size' must be >= 0 (got {c.queue_size}).")
        seed_everything(ctx.seed)
        # max_seq_length: the reference's training truncation only (the saved encoder keeps the start's)
        encoder = ctx.load_encoder(pooling=c.pooling, train_max_seq_length=c.max_seq_length)
        obj = ESimCSEObjective(encoder, c.temperature, c.dup_rate, c.momentum, c.queue_size, mlp=c.mlp)
        steps = resolve_steps(c.steps, len(corpus), c.batch_size * c.grad_accum, c.epochs)
        obj = fit(
            self,
            obj,
            corpus,
            ctx,
            loop=LoopConfig.from_config(c, steps=steps),
            **trainer_defaults(c.lr, steps),
        )
        ctx.accounting["esimcse_queue_filled"] = int(obj.queue_len)
        encoder = obj.encoder
        return encoder


@hookimpl
def benchbench_register_methods(register):
    register(ESimCSE.name, ESimCSE)


__all__ = ["ESimCSE", "ESimCSEConfig", "ESimCSEObjective", "esimcse_loss", "repeat_at", "repetition_positions"]
