"""DenoSent (Wang et al., AAAI 2024, "DenoSent: A Denoising Objective for Self-Supervised Sentence
Representation Learning"): an intra-sentence denoising objective added to an inter-sentence contrast.

Each training sentence x comes with a discretely noised copy x+ (a back-translation, made once before
training). Both go through the encoder in one forward pass inside the template ``"[X]" means [MASK].``;
the [MASK] hidden state, through a training-only linear projector, is the sentence vector z.

* contrast: InfoNCE between z(x) and z(x+), in-batch negatives, cosine / 0.05;
* denoising: a randomly initialised Transformer decoder (16 layers, ONE attention head, no causal mask)
  whose memory is the single vector z(x) reconstructs x+ token by token from x+'s own embedding-layer
  output, detached and put through dropout 0.825 (the continuous noise: most of the decoder's input is
  zeroed), through the encoder's masked-LM head (tied to the word embeddings); token cross-entropy, pads
  ignored;
* loss = 5 * contrast + 7 * denoising (the reference run's weights; the paper's eq. 6 writes 1 and 1).

The saved encoder is the bare [MASK] vector of the template (no projector, decoder or head).

| item | paper | reference code (xinghaow99/DenoSent, commit 35d05f5, ``model.py`` ``DenoSentModel.forward``, ``train.py`` ``map_fn``, README's command) | benchbench |
|---|---|---|---|
| discrete noise | back-translation en->zh->en with OPUS-MT (Tiedemann and Thottingal 2020); an LLM rewrite as an alternative (Table 3: 78.98 vs 79.33) | not in the code: the pairs come ready-made from the hub dataset ``Singhoo/denosent_data`` (``sent0``, ``sent1``; read here as original and its back-translation) | regenerated from the task's own sentences by the registered ``backtranslate`` augmenter: Apertium (rule-based, offline) en->es->en, the one round trip this machine has (no OPUS-MT, no en-zh pair); ``augmenter`` names any other, ``none`` = x+ is x (the "w/o discrete noise" ablation) |
| what the decoder rebuilds | "recover the noisy input to its original" (eq. 3-4) | ``labels = positive_input_ids``: x+ from x+'s own embeddings (``hidden_states[0]``, detached, dropout) with z(x) as memory | same as the code |
| continuous noise | "substantial dropout on the embedded sentences"; 0.825 | ``nn.Dropout(0.825)`` on ``hidden_states[0][B:2B].detach()`` (BERT's embedding output, its own dropout 0.1 included) | same (``noise_dropout``) |
| decoder | Transformer decoder, single-head, 16 layers, no causal mask, memory of length 1 | ``nn.TransformerDecoder(TransformerDecoderLayer(d, nhead=1, batch_first=True, dropout=0.1), 16)``: post-norm, ReLU, feed-forward 2048; ``tgt_key_padding_mask`` = pads of x+, no memory mask; Linear weights N(0, 0.02) and zero bias, LayerNorm 1/0, attention in-projections left at torch's init (identical copies across layers) | same module and init (``decoder_layers``, ``decoder_heads``, ``decoder_ffn``) |
| output head | - | ``BertForMaskedLM.cls`` of the start (pretrained, tied to the word embeddings); logits over every position, CE ``ignore_index=pad`` | the start's masked-LM head when its checkpoint has one (record: ``train.pretrained_mlm_head``), else a fresh one, tied to the encoder's word embeddings; logits only where a label is not a pad (the same loss) |
| contrast | InfoNCE, s+ the discrete-noise view, in-batch negatives, tau 0.03 | ``cos(proj(h), proj(h+)) / 0.05`` (README's ``--contrastive_temp 0.05``), CE over the batch | ``temperature`` 0.05 |
| weights | l = l_contrastive + l_denoising | ``--contrastive_weight 5 --generative_weight 7`` | 5 and 7 (``contrastive_weight``, ``generative_weight``; 0 leaves a term out: the paper's one-objective ablations) |
| pooling | [MASK] of ``"[X]" means [MASK].`` | same; ``last_hidden_state[input_ids == mask_token_id]``, then ``sent_embedding_projector`` (Linear d->d, no activation) for the contrast and as the decoder's memory; evaluation reads the [MASK] state WITHOUT the projector | same; the [MASK] position is computed from the template (a literal [MASK] in a sentence cannot move it) |
| truncation | 32 tokens | each sentence cut at 32 tokens WITH [CLS]/[SEP], decoded (``skip_special_tokens``: an [UNK] disappears) and put in the template; padded to 32 + 8 | the sentence cut at ``max_seq_length`` - 2 = 30 word pieces (training only; an [UNK] stays); padded to the batch's longest; at encoding the start's length, the sentence cut so the template fits |
| optimiser / schedule | AdamW, lr 5e-5 | HF Trainer: AdamW (wd 0), lr 4e-5, ``constant_with_warmup`` 500 steps (lr 0 at the first step), clip 1.0, batch 64, ``--max_steps 5000`` | same (``lr``, ``warmup_steps``, ``max_grad_norm``, ``batch_size``, ``steps``) |
| data | SimCSE's 1M Wikipedia sentences | 90% of the dataset's pairs (``train_test_split(0.1)``) | the task's own sentences |
| checkpoint selection | best STS-B dev | every 50 steps on STS-B dev + SICK-R dev (mean), ``--load_best_model_at_end`` | NOT implemented: the last step (fixed budget, as every method here) |
| base model | bert-base-uncased | bert-base-uncased | offline: all-MiniLM-L6-v2 (no masked-LM head in its checkpoint: the head starts fresh) or a tiny random BERT |

bench/fidelity_denosent.py runs the reference's own ``map_fn`` and ``DenoSentModel.forward`` (read from its
repository) against this file: on 200 STS-B sentences and their back-translations the 400 input rows are
identical, and over 3 AdamW steps (tiny BERT, dropout on) the loss differs by <= 7.6e-6 (of ~80), the
gradients by <= 1.1e-6 of the largest; tests/plugins/test_denosent.py holds a verbatim copy of both.
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
from benchbench_plugins._prompt import Template, pad_rows, sentence_ids
from benchbench_plugins.promptbert import PROMPT_FILE, PromptEncoder
from torch import nn

from benchbench import (
    ConfigError,
    LoopConfig,
    Method,
    Objective,
    TrainContext,
    TransformerEncoder,
    adamw,
    fit,
    get_registry,
    hookimpl,
    load_pretrained_head,
    resolve_steps,
    seed_everything,
)

LOADER = "denosent-prompt"
NO_NOISE = "none"


@dataclass
class DenoSentConfig:
    steps: int | None = 5000  # the README's --max_steps; None: `epochs` passes over the corpus
    epochs: float = 1.0
    batch_size: int = 64
    lr: float = 4e-5
    warmup_steps: int = 500  # constant_with_warmup: lr rises linearly from 0 over these steps, then stays
    template: str = '"[X]" means [MASK].'
    temperature: float = 0.05
    contrastive_weight: float = 5.0
    generative_weight: float = 7.0
    decoder_layers: int = 16
    decoder_heads: int = 1
    decoder_ffn: int = 2048  # torch's TransformerDecoderLayer default, which the reference keeps
    decoder_dropout: float = 0.1
    noise_dropout: float = 0.825  # the continuous noise on the decoder's input embeddings
    augmenter: str = "backtranslate"  # the discrete noise (a registered augmenter); "none": x+ = x
    max_seq_length: int | None = 32  # training: a sentence's tokens with [CLS] and [SEP] (the reference's max_length)
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # HF Trainer's default clipping; 0 = off
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


class DenoSentEncoder(PromptEncoder):
    """The [MASK] vector of the template, as the reference's ``encode``: no final period is added (PromptBERT's
    evaluation adds one), no template denoising. Saved with its own loader so ``--model PATH`` reloads it so."""

    def __init__(self, base: TransformerEncoder, template: str):
        parsed = Template.parse(template, base.tokenizer, "denosent")  # errors name this method
        super().__init__(base, template, denoise=False)
        self.template = parsed

    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        t = self.template
        sents = sentence_ids(self.tokenizer, list(texts), max(0, self.max_seq_length - t.overhead))
        ids, mask = pad_rows([t.wrap(s) for s in sents], self.tokenizer.pad_token_id)
        n = torch.tensor([len(s) for s in sents], dtype=torch.long)
        return {"input_ids": ids, "attention_mask": mask, "mask_pos": n + t.mask_index(0), "n_sentence": n}

    def prompt_config(self) -> dict:
        return {"template": self.template.text, "denoise": False, "final_period": False}

    @property
    def fingerprint(self) -> str:
        h = hashlib.blake2b(json.dumps(self.prompt_config(), sort_keys=True).encode(), digest_size=8)
        return f"{TransformerEncoder.fingerprint.fget(self)}-denosent-{h.hexdigest()}"

    def save(self, path) -> Path:
        path = super().save(path)
        (path / "benchbench_wrapper.json").write_text(json.dumps({"loader": LOADER}))
        return path


def load_denosent_encoder(base: TransformerEncoder, path: str | Path) -> DenoSentEncoder:
    return DenoSentEncoder(base, json.loads((Path(path) / PROMPT_FILE).read_text())["template"])


def build_decoder(d: int, heads: int, layers: int, ffn: int, dropout: float, init_std: float) -> nn.TransformerDecoder:
    """The reference's decoder and its ``_init_weights``: every Linear (the attention output projections
    included) N(0, init_std) with zero bias, every LayerNorm 1/0; the attention in-projections keep
    torch's init, the same values in every layer (``TransformerDecoder`` deep-copies one layer)."""
    layer = nn.TransformerDecoderLayer(d_model=d, nhead=heads, dim_feedforward=ffn, dropout=dropout, batch_first=True)
    decoder = nn.TransformerDecoder(layer, num_layers=layers)
    for m in decoder.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=init_std)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    return decoder


def mlm_head(encoder: TransformerEncoder, pretrained: nn.Module | None = None) -> nn.Module:
    """The masked-LM head of the encoder's family (BERT: ``cls``), the checkpoint's when given, its output
    projection tied to the ENCODER's word embeddings (as in ``BertForMaskedLM``, where the reference takes it)."""
    from transformers import AutoModelForMaskedLM

    model = pretrained if pretrained is not None else AutoModelForMaskedLM.from_config(encoder.model.config)
    heads = [m for n, m in model.named_children() if n != model.base_model_prefix]
    if len(heads) != 1:
        raise ConfigError(f"denosent: cannot find the masked-LM head of {type(model).__name__}.")
    model.get_output_embeddings().weight = encoder.model.get_input_embeddings().weight
    return heads.pop().to(encoder.device)


class DenoSentObjective(Objective):
    def __init__(self, encoder: DenoSentEncoder, c: DenoSentConfig, head: nn.Module, noise=None):
        super().__init__()
        self.encoder, self.head, self.noise = encoder, head, noise
        self.temperature, self.cw, self.gw = (
            float(c.temperature),
            float(c.contrastive_weight),
            float(c.generative_weight),
        )
        std = float(getattr(encoder.model.config, "initializer_range", 0.02))
        self.projector = nn.Linear(encoder.dim, encoder.dim)
        nn.init.normal_(self.projector.weight, std=std)
        nn.init.zeros_(self.projector.bias)
        self.projector.to(encoder.device)
        self.decoder = build_decoder(
            encoder.dim, c.decoder_heads, c.decoder_layers, c.decoder_ffn, c.decoder_dropout, std
        ).to(encoder.device)
        self.noise_dropout = nn.Dropout(c.noise_dropout)
        self.limit = None if not c.max_seq_length else max(0, int(c.max_seq_length) - 2)
        self.pad_id = encoder.tokenizer.pad_token_id

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        """Rows: the B sentences, then their B noised copies, each in the template, one padded tensor."""
        items = list(items)
        noisy = items if self.noise is None else list(self.noise(items, rng))
        t = self.encoder.template
        sents = sentence_ids(self.encoder.tokenizer, items + noisy, self.limit)
        ids, mask = pad_rows([t.wrap(s) for s in sents], self.pad_id)
        pos = torch.tensor([t.mask_index(len(s)) for s in sents], dtype=torch.long)
        return {"input_ids": ids, "attention_mask": mask, "mask_pos": pos, "n_tokens": int(mask.sum())}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, mask_pos: torch.Tensor) -> torch.Tensor:
        out = self.encoder.model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        h = out.last_hidden_state[torch.arange(len(input_ids), device=input_ids.device), mask_pos]
        z = self.projector(h)
        n = len(input_ids) // 2
        loss = z.new_zeros((), dtype=torch.float32)
        if self.gw:  # first, as the reference: the same dropout draws follow the encoder's
            loss = loss + self.gw * self.denoising(out.hidden_states[0][n:], input_ids[n:], z[:n])
        if self.cw:
            loss = loss + self.cw * contrastive_loss(z[:n], z[n:], self.temperature)
        return loss

    def denoising(self, embedded: torch.Tensor, labels: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        """Token cross-entropy of rebuilding ``labels`` from their own embeddings (detached, dropped out)
        with the one vector ``memory`` per sentence to attend to; pads neither attended nor scored."""
        pad = labels == self.pad_id
        tgt = self.noise_dropout(embedded.detach())
        states = self.decoder(tgt=tgt, memory=memory[:, None], tgt_key_padding_mask=pad)
        logits = self.head(states[~pad])  # the vocabulary projection only where a label is scored
        return F.cross_entropy(logits.float(), labels[~pad])


def contrastive_loss(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """In-batch InfoNCE, the positive of row i being column i: cos(z1_i, z2_j) / temperature."""
    sim = F.cosine_similarity(z1.float()[:, None], z2.float()[None], dim=-1) / temperature
    return F.cross_entropy(sim, torch.arange(len(z1), device=sim.device))


def constant_with_warmup(optimizer: torch.optim.Optimizer, warmup: int) -> torch.optim.lr_scheduler.LambdaLR:
    """transformers' ``get_constant_schedule_with_warmup``: s / warmup below ``warmup`` (0 at the first
    step), then 1 (its ``max(1.0, warmup)`` guard is never needed: s < warmup means warmup >= 1)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: s / warmup if s < warmup else 1.0)


class DenoSent(Method):
    name = "denosent"
    Config = DenoSentConfig
    description = "DenoSent: back-translation + embedding-dropout denoising decoder on the [MASK] vector, with contrast"

    def _check(self, dim: int) -> None:
        c = self.config
        if c.temperature <= 0:
            raise ConfigError(f"denosent: option 'temperature' must be > 0 (got {c.temperature}).")
        if c.contrastive_weight < 0 or c.generative_weight < 0 or not (c.contrastive_weight or c.generative_weight):
            raise ConfigError(
                "denosent: options 'contrastive_weight' and 'generative_weight' must be >= 0 and not both 0 "
                f"(got {c.contrastive_weight}, {c.generative_weight})."
            )
        if not 0.0 <= c.noise_dropout < 1.0:
            raise ConfigError(f"denosent: option 'noise_dropout' must be in [0, 1) (got {c.noise_dropout}).")
        if c.decoder_heads < 1 or dim % c.decoder_heads:
            raise ConfigError(
                f"denosent: option 'decoder_heads' ({c.decoder_heads}) must divide the model's hidden size {dim}."
            )
        if c.decoder_layers < 1:
            raise ConfigError(f"denosent: option 'decoder_layers' must be >= 1 (got {c.decoder_layers}).")
        if c.warmup_steps < 0:
            raise ConfigError(f"denosent: option 'warmup_steps' must be >= 0 (got {c.warmup_steps}).")

    def loss_chance(self, objective) -> float:
        """contrastive_weight * ln b (InfoNCE over the batch) + generative_weight * ln V (token CE over the
        vocabulary: an upper reference, as TSDAE's)."""
        c = self.config
        vocab = len(objective.encoder.tokenizer)
        return c.contrastive_weight * math.log(c.batch_size) + c.generative_weight * math.log(vocab)

    def _noise(self, corpus: list[str], steps: int, ctx: TrainContext):
        """The discrete-noise function, its views made now for the sentences the budget draws (cached)."""
        c = self.config
        if c.augmenter == NO_NOISE:
            return None
        if ctx.registry is None:  # a bare TrainContext (notebooks, tests): the installed plugins' augmenters
            ctx.registry = get_registry()
        aug = ctx.augmenter(c.augmenter)
        if hasattr(aug, "prepare"):
            aug.prepare(ctx)
        need = [corpus[i] for i in ctx.budget_items(len(corpus), steps, c.batch_size, c.grad_accum)]
        if hasattr(aug, "apply"):
            aug.apply(need, 0)
        ctx.accounting.update(discrete_noise=c.augmenter, preprocessed_sentences=len(need))
        return aug

    def train(self, corpus: list[str], ctx: TrainContext) -> DenoSentEncoder:
        c = self.config
        seed_everything(ctx.seed)
        encoder = DenoSentEncoder(ctx.load_encoder(), c.template)
        self._check(encoder.dim)
        steps = resolve_steps(c.steps, len(corpus), c.batch_size * c.grad_accum, c.epochs)
        noise = self._noise(list(corpus), steps, ctx)
        pretrained, note = load_pretrained_head(ctx.model, "AutoModelForMaskedLM")
        ctx.accounting["pretrained_mlm_head"] = note
        obj = DenoSentObjective(encoder, c, mlm_head(encoder, pretrained), noise)
        obj = fit(
            self,
            obj,
            corpus,
            ctx,
            loop=LoopConfig.from_config(c, steps=steps),
            make_optimizer=lambda m: adamw(m.parameters(), lr=c.lr, weight_decay=0.0),
            make_scheduler=lambda o: constant_with_warmup(o, c.warmup_steps),
        )
        return obj.encoder


@hookimpl
def benchbench_register_methods(register):
    register(DenoSent.name, DenoSent)


@hookimpl
def benchbench_register_loaders(register):
    register(LOADER, load_denosent_encoder)


__all__ = [
    "DenoSent",
    "DenoSentConfig",
    "DenoSentEncoder",
    "DenoSentObjective",
    "build_decoder",
    "constant_with_warmup",
    "contrastive_loss",
    "mlm_head",
]
