"""InfoCSE: Information-aggregated Contrastive Learning of Sentence Embeddings (Wu et al., Findings of
EMNLP 2022).

Unsupervised SimCSE (two dropout views, in-batch negatives, temperature 0.05, a BatchNorm projection
MLP on [CLS] at training only) plus an auxiliary masked-LM task that can only be solved through the
[CLS] vector: the sentence is masked, a FROZEN copy of the start checkpoint's lower ``skip_from``
layers reads it, and its token states at positions 1.. are joined with the encoder's last-layer [CLS]
vector (of the UNMASKED sentence, before the MLP) at position 0; two new Transformer layers and an
LM head predict the masked tokens. The frozen states carry no gradient, so the only trained path from
the masked-token loss into the encoder is the [CLS] vector: it must aggregate what the lower layers'
token states lack (Condenser's head, conditioned on the sentence vector). The auxiliary network is
training only; the saved encoder is the bare [CLS].

loss = InfoNCE(MLP(cls_1), MLP(cls_2)) + ``mlm_weight`` x CE(masked tokens), ``mlm_weight`` 1e-5 in
both published run scripts. With Adam the two head layers and the LM head (reached by the masked-LM
loss alone) learn at their full rate whatever the weight; the weight scales only the encoder's share.

| item | paper | reference code (caskcsg/sentemb@5eeec55, ``InfoCSE/``: ``infocse/models_cls_mlm.py`` ``BertForCL`` + ``cl_forward``, ``train_cls_mlm.py``, ``Infocse-bert-base.sh``) | benchbench |
|---|---|---|---|
| paper text | not read: the paper is not among the offline papers (the shared papers folder); this column is left empty where only the paper could say | - | - |
| base model | BERT-base | ``--model_name_or_path Luyu/condenser`` (BERT-base further pre-trained with Condenser's head, not bert-base-uncased) | offline: all-MiniLM-L6-v2 or a tiny random BERT; no Condenser checkpoint offline, so the published numbers are not expected |
| frozen lower network | - | ``self.mlm = BertForMaskedLM(config with skip_from layers)`` loaded from the same checkpoint with ``strict=False`` (its embeddings and first ``skip_from`` layers), run under ``no_grad`` in eval mode (``--mlm_eval``), reading ``mlm_input_ids``; ``hidden_states[-1][:, 1:]``, detached | a copy of the start encoder's transformer cut to its first ``skip_from`` layers (the same weights), ``requires_grad`` off, eval mode (``frozen_eval``), under ``no_grad``; a ``skip_from`` above the model's layer count is refused (the reference would leave the missing layers random) |
| skip_from / head layers | - | ``--skip_from 6 --n_head_layers 2`` | half the start's layers (the paper's 6 of BERT-base's 12; 3 of all-MiniLM-L6-v2's 6; ``--set skip_from=N`` fixes it) / 2 |
| head layers' init | - | ``BertLayer(config)`` x 2, ``c_head.apply(bert._init_weights)`` (normal(0, 0.02) linears, zero biases, LayerNorm 1/0); Condenser's ``model.pt`` is loaded only from a LOCAL folder holding it, which the script's hub id is not | the model family's own layer class x ``n_head_layers``, BERT's init |
| [CLS] into the head | - | ``outputs.last_hidden_state[:, :1]`` of the unmasked sentence, each dropout view separately (both views' rows carry their own masking) | same (``token_embeddings[:, 0]``) |
| LM head | - | ``BertLMPredictionHead`` loaded from the checkpoint's ``cls.predictions`` (its decoder a copy of the word embeddings, untied, trained) | the checkpoint's masked-LM head copied (untied, trained) when it has one (``load_pretrained_head``); else random, and the record says so (``train.pretrained_lm_head``) |
| masking | - | ``mask_tokens``: Bernoulli(0.4) over non-special tokens; 80% [MASK], half the rest a random id from ``len(tokenizer)``, the rest kept; labels -100 elsewhere; every view's row masked independently | transformers' ``DataCollatorForLanguageModeling.torch_mask_tokens`` (the code the reference's ``mask_tokens`` copies), its generator seeded from the loop's per-batch rng |
| masked-LM loss | - | ``CrossEntropyLoss`` over every position's vocabulary logits, -100 ignored (a batch with no chosen token: NaN) | the vocabulary projection only at the chosen positions (the same mean); a batch with no chosen token adds 0 |
| weight / mask ratio | - | ``mlm_weight`` 1e-5, ``mlm_probability`` 0.4 (BERT-base script; 0.3 for BERT-large; the README's defaults 0.1 / 0.15 are not what ran) | 1e-5 / 0.4 |
| projection MLP | - | ``--batchnorm``: ``ProjectionMLP`` (Linear d->2d no bias, BN, ReLU, Linear 2d->d no bias, BN without affine) over both views' rows together; ``--mlp_only_train`` | DiffCSE's ``make_projection`` (the same module); training only |
| contrast | - | cosine / 0.05 between the views, in-batch negatives; rows (sentence, view) interleaved | same, the same row order |
| batch / lr / epochs / max length | - | 64 / 7e-6 / 2 / 32; HF Trainer AdamW without weight decay, linear decay, clip 1.0, fp16 | same on the task's own sentences; max length 32 for training only |
| checkpoint selection | - | STS-B dev every 125 steps, ``--load_best_model_at_end`` | NOT implemented: the last step (fixed budget, as every method here) |
| evaluation pooling | - | ``--pooler cls_before_pooler`` | bare [CLS] |

Equality with the reference's own ``BertForCL`` + ``cl_forward`` and its ``mask_tokens``
(bench/fidelity_infocse.py, two shims for transformers 5 stated there; tiny BERT, dropout 0.1, 3 SGD
steps, at weight 1e-5 / temperature 0.05 and at 1 / 1): loss difference 0, gradients within 4.5e-8,
weights within 7.5e-9 (tolerance 1e-5); masking: 0 of 25,600 rows differ.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from benchbench_plugins.diffcse import make_projection

from benchbench import (
    ConfigError,
    LoopConfig,
    Method,
    Objective,
    TrainContext,
    TransformerEncoder,
    fit,
    hookimpl,
    load_pretrained_head,
    resolve_steps,
    seed_everything,
    trainer_defaults,
)


@dataclass
class InfoCSEConfig:
    steps: int | None = None  # None: ``epochs`` over the corpus
    epochs: float = 2.0
    batch_size: int = 64
    lr: float = 7e-6
    temperature: float = 0.05
    mlm_weight: float = 1e-5  # weight of the masked-LM loss through [CLS]
    mlm_probability: float = 0.4  # share of non-special tokens chosen for the masked LM
    # the frozen network: the start checkpoint's first skip_from layers; None: half the start's layers (the
    # paper's 6 of BERT-base's 12; 3 of all-MiniLM-L6-v2's 6, 1 of tiny-bert's 2), resolved against the model
    skip_from: int | None = None
    n_head_layers: int = 2  # new Transformer layers reading [CLS] + the frozen token states
    frozen_eval: bool = True  # the frozen network without dropout (--mlm_eval)
    max_seq_length: int | None = 32  # training truncation only (the saved encoder keeps the start's)
    pooling: str = "cls"
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # HF Trainer (the reference's trainer) clips the global norm at 1.0; 0 = off
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


def bert_init(module: torch.nn.Module, std: float) -> None:
    """BERT's ``_init_weights`` on linears and LayerNorms (what the reference's ``c_head.apply`` does)."""
    for m in module.modules():
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.normal_(m.weight, std=std)
            if m.bias is not None:
                torch.nn.init.zeros_(m.bias)
        elif isinstance(m, torch.nn.LayerNorm):
            torch.nn.init.ones_(m.weight)
            torch.nn.init.zeros_(m.bias)


def half_the_layers(n_layers: int) -> int:
    """InfoCSE's default ``skip_from`` for a start of ``n_layers`` layers: the paper froze the lower 6 of
    BERT-base's 12, so the default is the same share of any start, and at least one layer."""
    return max(1, n_layers // 2)


def frozen_lower_layers(encoder: TransformerEncoder, skip_from: int) -> torch.nn.Module:
    """A copy of the encoder's transformer cut to its first ``skip_from`` layers, without gradient."""
    frozen = copy.deepcopy(encoder.model)
    frozen.encoder.layer = frozen.encoder.layer[:skip_from]
    frozen.config.num_hidden_layers = skip_from
    if hasattr(frozen, "pooler"):
        frozen.pooler = None  # unused: the head reads token states
    for p in frozen.parameters():
        p.requires_grad_(False)
    return frozen


def head_layers(encoder: TransformerEncoder, n: int) -> torch.nn.ModuleList:
    """``n`` new layers of the encoder's own layer class, BERT-initialised."""
    layer_cls = type(encoder.model.encoder.layer[0])
    layers = torch.nn.ModuleList(layer_cls(encoder.model.config) for _ in range(n))
    bert_init(layers, float(getattr(encoder.model.config, "initializer_range", 0.02)))
    return layers.to(encoder.device)


def lm_head_of(mlm_model: torch.nn.Module) -> torch.nn.Module:
    """A masked-LM model's head (the child that is not its base model), as an untied copy."""
    head = next(m for n, m in mlm_model.named_children() if n != mlm_model.base_model_prefix)
    return copy.deepcopy(head)


def random_lm_head(encoder: TransformerEncoder) -> torch.nn.Module:
    from transformers import AutoModelForMaskedLM

    return lm_head_of(AutoModelForMaskedLM.from_config(encoder.model.config))


class InfoCSEObjective(Objective):
    def __init__(
        self,
        encoder: TransformerEncoder,
        lm_head: torch.nn.Module | None = None,
        temperature: float = 0.05,
        mlm_weight: float = 1e-5,
        mlm_probability: float = 0.4,
        skip_from: int = 6,
        n_head_layers: int = 2,
        frozen_eval: bool = True,
        batchnorm: bool = True,
    ):
        super().__init__()
        from transformers import DataCollatorForLanguageModeling

        self.encoder = encoder
        self.temperature, self.mlm_weight, self.frozen_eval = float(temperature), float(mlm_weight), bool(frozen_eval)
        self.mlp = make_projection(encoder, batchnorm)
        self.frozen = frozen_lower_layers(encoder, skip_from).to(encoder.device)
        self.c_head = head_layers(encoder, n_head_layers)
        self.lm_head = (lm_head if lm_head is not None else random_lm_head(encoder)).to(encoder.device)
        self.masker = DataCollatorForLanguageModeling(encoder.tokenizer, mlm_probability=mlm_probability)
        self.special_ids = torch.tensor(sorted(set(encoder.tokenizer.all_special_ids)))
        self.eval_length = encoder.max_seq_length  # the max length the returned encoder evaluates with

    def result(self) -> TransformerEncoder:
        """The encoder ``InfoCSE.train`` would return now: a copy at the evaluation max length, bare [CLS]."""
        enc = self.encoder.clone()
        enc.max_seq_length = self.eval_length
        return enc

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        tok = self.encoder.tokenize(items)
        ids = tok["input_ids"].repeat_interleave(2, 0)  # rows (sentence i, view v) at 2i + v, as the reference
        self.masker.generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
        mlm_ids, labels = self.masker.torch_mask_tokens(ids.clone(), torch.isin(ids, self.special_ids))
        batch = {k: tok[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in tok}
        batch.update(mlm_input_ids=mlm_ids, mlm_labels=labels, n_tokens=2 * int(tok["attention_mask"].sum()))
        return batch

    def reconstruction_loss(
        self, cls: torch.Tensor, mlm_input_ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor, **kw
    ) -> torch.Tensor:
        """The masked tokens predicted by the head layers from [``cls``; the frozen network's token
        states 1.. of the masked sentence]: cross-entropy over the chosen tokens."""
        from transformers.masking_utils import create_bidirectional_mask

        if self.frozen_eval:
            self.frozen.eval()
        with torch.no_grad():
            skip = self.frozen(input_ids=mlm_input_ids, attention_mask=mask, **kw).last_hidden_state[:, 1:]
        h = torch.cat([cls[:, None], skip.to(cls.dtype)], 1)
        ext = create_bidirectional_mask(config=self.encoder.model.config, inputs_embeds=h, attention_mask=mask)
        for layer in self.c_head:
            h = layer(h, ext)
        chosen = labels != -100
        if not chosen.any():  # no token chosen in the whole batch (the reference: NaN)
            return h.sum() * 0.0
        return F.cross_entropy(self.lm_head(h[chosen]).float(), labels[chosen])

    def forward(self, input_ids, attention_mask, mlm_input_ids, mlm_labels, token_type_ids=None) -> torch.Tensor:
        n = input_ids.shape[0]
        kw = {} if token_type_ids is None else {"token_type_ids": token_type_ids.repeat_interleave(2, 0)}
        ids, mask = input_ids.repeat_interleave(2, 0), attention_mask.repeat_interleave(2, 0)
        out = self.encoder(input_ids=ids, attention_mask=mask, **kw)
        z = self.mlp(out["sentence_embedding"]).view(n, 2, -1).float()
        sim = F.cosine_similarity(z[:, 0][:, None], z[:, 1][None], dim=-1) / self.temperature
        loss = F.cross_entropy(sim, torch.arange(n, device=sim.device))
        rec = self.reconstruction_loss(out["token_embeddings"][:, 0], mlm_input_ids, mask, mlm_labels, **kw)
        return loss + self.mlm_weight * rec


class InfoCSE(Method):
    name = "infocse"
    Config = InfoCSEConfig
    description = "InfoCSE: SimCSE + masked-LM reconstruction through [CLS] over a frozen lower network (weight 1e-5)"

    def loss_chance(self, objective) -> float:
        """InfoNCE over the batch's b candidates (ln b) plus ``mlm_weight`` x a token cross-entropy over
        the vocabulary of V (ln V)."""
        vocab = len(objective.encoder.tokenizer)
        return math.log(self.config.batch_size) + self.config.mlm_weight * math.log(vocab)

    @classmethod
    def model_defaults(cls, config: InfoCSEConfig, shape) -> dict[str, int]:
        """``skip_from`` left at None: half the start's layers (``half_the_layers``)."""
        if config.skip_from is None and shape.layers:
            return {"skip_from": half_the_layers(shape.layers)}
        return {}

    def skip_from(self, n_layers: int) -> int:
        """The frozen network's depth on a start of ``n_layers`` layers: the option, or its default rule."""
        s = self.config.skip_from
        return half_the_layers(n_layers) if s is None else s

    def _check(self, n_layers: int) -> None:
        c = self.config
        skip_from = self.skip_from(n_layers)
        if c.temperature <= 0:
            raise ConfigError(f"infocse: option 'temperature' must be > 0 (got {c.temperature}).")
        if c.mlm_weight < 0:
            raise ConfigError(f"infocse: option 'mlm_weight' must be >= 0 (got {c.mlm_weight}).")
        if not 0.0 <= c.mlm_probability <= 1.0:
            raise ConfigError(f"infocse: option 'mlm_probability' must be in [0, 1] (got {c.mlm_probability}).")
        if c.n_head_layers < 1:
            raise ConfigError(f"infocse: option 'n_head_layers' must be >= 1 (got {c.n_head_layers}).")
        if not 1 <= skip_from <= n_layers:
            raise ConfigError(
                f"infocse: option 'skip_from' ({skip_from}) must be between 1 and the model's {n_layers} "
                f"layers: the frozen network is the start checkpoint's first skip_from layers (the paper's "
                f"BERT-base: 6 of 12). Pass e.g. --set skip_from={max(1, n_layers // 2)}."
            )

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        seed_everything(ctx.seed)
        # max_seq_length: the reference's training truncation only (the saved encoder keeps the start's)
        encoder = ctx.load_encoder(pooling=c.pooling, train_max_seq_length=c.max_seq_length)
        layers = getattr(getattr(encoder.model, "encoder", None), "layer", None)
        if layers is None:
            raise ConfigError(
                f"infocse: model {ctx.model!r} has no ``encoder.layer`` stack (BERT-like models only): "
                f"the frozen network and the head layers are built from it."
            )
        self._check(len(layers))
        skip_from = self.skip_from(len(layers))
        ctx.accounting["skip_from"] = skip_from  # the value that trained, when the option was left to its rule
        pretrained, note = load_pretrained_head(ctx.model, "AutoModelForMaskedLM")
        ctx.accounting["pretrained_lm_head"] = note
        lm_head = lm_head_of(pretrained) if pretrained is not None else None
        obj = InfoCSEObjective(
            encoder,
            lm_head,
            c.temperature,
            c.mlm_weight,
            c.mlm_probability,
            skip_from,
            c.n_head_layers,
            c.frozen_eval,
        )
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
    register(InfoCSE.name, InfoCSE)


__all__ = [
    "InfoCSE",
    "InfoCSEConfig",
    "InfoCSEObjective",
    "bert_init",
    "frozen_lower_layers",
    "half_the_layers",
    "head_layers",
    "lm_head_of",
    "random_lm_head",
]
