"""RankCSE: Unsupervised Sentence Representation Learning via Learning to Rank (Liu et al., ACL 2023).

Unsupervised SimCSE (two dropout views, in-batch negatives, temperature 0.05, SimCSE's dense+tanh MLP on
[CLS] at training only) plus two listwise terms over the batch's similarity lists:

* ranking consistency: the two views' lists, ``softmax(cos(z1_i, z2_.)/tau)`` and ``softmax(cos(z2_i,
  z1_.)/tau)``, are pulled together (the paper: Jensen-Shannon divergence);
* ranking distillation: each sentence's list of similarities to the batch is taught the ranking of
  unsupervised TEACHERS, ``cos(t_i, t_j)/tau2`` (a weighted average of two teachers' lists: ``alpha``
  x the first + (1 - alpha) x the second), by ListNet (cross-entropy of the top-one distributions, the
  diagonal left out) or ListMLE (likelihood of the teacher's permutation).

loss = InfoNCE + ``beta`` x consistency + ``gamma`` x distillation.

Teachers: benchbench trains them itself. ``teachers`` names registered methods (default ``diffcse``
then ``simcse``, the reference script's DiffCSE and SimCSE checkpoints); each is trained, or reused when
stored, by ``benchbench.train_method``: on its own corpus for this task, with this run's seed and base
model, exactly where ``benchbench run --method NAME`` trains it under the same output folder, its
options from ``teacher_set`` (``diffcse.generator=DIR,simcse.steps=200``). The record's
``train.teachers`` lists each teacher's ``TrainedMethod.describe()`` (method, config hash, model, path
in the result store), and every table marks the row ``[D]`` naming them. A call without a task (the
conformance kit, a direct ``Method.train``) trains each teacher on the corpus it was given, into
``<output>/teachers/<name>``. The teachers' vectors are their saved encoders' own (what their records
evaluate), in eval mode, without gradient, on the batch's sentences cut at the training max length;
their similarity matrices are computed each step before the student's loss, as the reference does.

| item | paper | reference code (perceptiveshawty/RankCSE@17c5226, a community implementation: the authors' code is not public; ``rankcse/models.py`` ``cl_forward``, ``ListNet``, ``ListMLE``, ``Divergence``; ``rankcse/trainers.py`` (teacher scores); ``run_rankcse.sh``) | benchbench |
|---|---|---|---|
| paper text | read only as far as the abstract and introduction (no offline copy of the method section or tables): this column says "-" where only the paper could say | - | - |
| base model | BERT-base (and -large, RoBERTa) | ``bert-base-uncased`` | offline: all-MiniLM-L6-v2 or a tiny random BERT |
| teachers | SimCSE and DiffCSE (unsupervised) | ``voidism/diffcse-bert-base-uncased-sts`` (first, weight ``alpha_`` 0.33) and ``princeton-nlp/unsup-simcse-bert-large-uncased`` (second, 0.67): public checkpoints, the SimCSE one BERT-LARGE; read at ``cls_before_pooler`` | ``teachers = ["diffcse", "simcse"]`` trained by benchbench on the same task corpus, seed and base model (so no larger teacher); each read through its own saved encoder (SimCSE's default keeps its MLP: ``teacher_set=simcse.mlp=train_only`` reads its bare [CLS] as the reference's checkpoint is read); 1 or 2 teachers |
| teacher scores | - | per batch under ``no_grad``: the teacher encodes the student's own token ids (both views; its eval mode makes them one), ``cos(z1T, z2T) / tau2``; two teachers ``alpha_ x first + (1 - alpha_) x second``; cast to fp16 under ``--fp16`` | the same matrix from one pass over the batch's sentences, tokenised by the teacher's tokenizer at the training max length (32); float32 (the loop's bf16 autocast on a GPU) |
| student scores | - | ``cos_sim = cos(MLP(cls_1), MLP(cls_2)) / temp`` (``--pooler_type cls --mlp_only_train``), rows (sentence, view) interleaved in one pass | same; SimCSE's ``make_mlp``; the same row order |
| ListNet | a third temperature ``tau3 = tau2 / 2`` (the README says for ListNet, train.py's help for ListMLE) | ``ListNet.forward``: student ``cos_sim`` (temperature ``temp``), teacher at ``tau2``; the class builds a ``tau/2`` similarity it never uses; diagonal set to -inf on both, ``-(q x log p).nansum() / q.nansum()`` | the reference's formula; the diagonal left out explicitly (no NaN sums) |
| ListMLE | - | ``ListMLE.forward`` (allRank's): the list shuffled by ``torch.randperm`` (global RNG) for random tie-breaking, sorted by the teacher, ``sum log(cumsum exp) - pred`` (+1e-7), mean over rows; the diagonal kept; a teacher score equal to -1 treated as padding | the same formula; the shuffle drawn from the loop's per-batch rng (exact resume); no padding value (a teacher score of exactly -1 is a score) |
| consistency | JS divergence between the two views' lists | ``Divergence``: ``m = (0.5 (p + q)).log().clamp(min=1e-7)`` clamps every log-probability (all <= 0) to 1e-7, so the term computes ``0.5 (KL-form(1e-7, p) + KL-form(1e-7, q))`` = ``-(H(p) + H(q)) / 2 - 1e-7`` (mean over rows): an entropy minimisation, not a divergence; softmaxes clamped at 1e-7 | ``consistency = "js"`` (default): the Jensen-Shannon divergence the paper names (this code is not the authors', so it did not produce the paper's numbers, and its term contradicts the paper's text); ``"reference"``: that same function (the equality tests use it) |
| weights | ``beta``, ``gamma`` | ``--beta_ 1.0`` NEVER applied (``Divergence`` stores it unused), ``--gamma_ 1.0`` (train.py's default 0.10; README 1.0), ``--alpha_ 0.33`` | ``beta`` 1.0 applied (equal at its default), ``gamma`` 1.0, ``alpha`` 0.33 |
| distillation loss | ListNet and ListMLE both reported | ``--distillation_loss listmle`` in ``run_rankcse.sh`` (train.py's default: listnet) | ``distillation = "listmle"`` |
| tau2 / temp | - | 0.05 / 0.05 | same |
| batch / lr / epochs / max length | - | 128 / 3e-5 / 1 / 32; HF Trainer AdamW without weight decay, linear decay, clip 1.0, fp16 | same on the task's own sentences; max length 32 for training only |
| checkpoint selection | - | STS-B dev every 125 steps, ``--load_best_model_at_end`` | NOT implemented: the last step (fixed budget, as every method here) |
| evaluation pooling | - | ``--pooler cls_before_pooler`` | bare [CLS] |

Equality with the reference's own ``BertForCL`` + ``cl_forward`` (with ``ListNet``/``ListMLE``/``Divergence``)
fed a transcription of its trainer's teacher-score block (bench/fidelity_rankcse.py; tiny BERT, two tiny
teachers, dropout 0.1, 3 SGD steps x ListMLE/ListNet x two sets of temperatures and weights): teacher
matrix difference 0, loss within 1.9e-6, gradients 3.8e-6, weights 1.9e-7 (tolerance 1e-5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from benchbench_plugins.simcse import make_mlp

from benchbench import (
    ConfigError,
    LoopConfig,
    Method,
    Objective,
    TrainContext,
    TransformerEncoder,
    build_config,
    config_hash,
    fit,
    get_registry,
    hookimpl,
    is_complete,
    load_encoder,
    mark_complete,
    model_label_of,
    pinned_folder,
    resolve_steps,
    seed_everything,
    train_method,
    trainer_defaults,
)

EPS = 1e-7  # the reference's clamp of the softmaxes, its Divergence's and its ListMLE's epsilon


@dataclass
class RankCSEConfig:
    steps: int | None = None  # None: ``epochs`` over the corpus
    epochs: float = 1.0
    batch_size: int = 128
    lr: float = 3e-5
    temperature: float = 0.05  # the student's (and InfoNCE's) temperature
    tau2: float = 0.05  # the teachers' temperature
    distillation: str = "listmle"  # "listmle" (run_rankcse.sh) or "listnet"
    consistency: str = "js"  # "js": the paper's divergence; "reference": the community code's Divergence as it computes
    alpha: float = 0.33  # weight of the first teacher's list (the second's: 1 - alpha)
    beta: float = 1.0  # weight of the consistency term
    gamma: float = 1.0  # weight of the distillation term
    teachers: list[str] = field(default_factory=lambda: ["diffcse", "simcse"])  # registered methods, 1 or 2
    teacher_set: str = ""  # the teachers' options: "diffcse.generator=DIR,simcse.steps=200"
    max_seq_length: int | None = 32  # training truncation only (the saved encoder keeps the start's)
    pooling: str = "cls"
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # HF Trainer (the reference's trainer) clips the global norm at 1.0; 0 = off
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


def listnet(teacher: torch.Tensor, student: torch.Tensor) -> torch.Tensor:
    """The reference's ``ListNet``: cross-entropy of the teacher's top-one distribution against the
    student's, each row without its diagonal (a sentence is not ranked against its own other view)."""
    off = ~torch.eye(student.shape[0], dtype=torch.bool, device=student.device)
    p = F.log_softmax(student.masked_fill(~off, float("-inf")), dim=-1)
    q = F.softmax(teacher.masked_fill(~off, float("-inf")), dim=-1)
    return -(q * p)[off].sum() / q[off].sum()


def listmle(teacher: torch.Tensor, student: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """The reference's ``ListMLE`` (allRank's): minus the log-likelihood of the teacher's permutation
    under the student's scores (Plackett-Luce), mean over rows; ``perm`` shuffles the columns first, so
    the teacher's ties are broken at random."""
    pred, true = student[:, perm], teacher[:, perm]
    _, order = true.sort(descending=True, dim=-1)
    pred = torch.gather(pred, 1, order)
    pred = pred - pred.max(dim=1, keepdim=True).values
    tail = torch.cumsum(pred.exp().flip(dims=[1]), dim=1).flip(dims=[1])  # sum over the items ranked at or below
    return (torch.log(tail + EPS) - pred).sum(1).mean()


def consistency_loss(p: torch.Tensor, q: torch.Tensor, kind: str) -> torch.Tensor:
    """Between the two views' similarity distributions ``p`` and ``q`` (rows), mean over rows.
    ``"js"``: the Jensen-Shannon divergence. ``"reference"``: what the reference's ``Divergence``
    computes: its mixture's log is clamped at min 1e-7, above every log-probability, so the mixture is
    the constant 1e-7 and each KL term is ``sum p (log p - 1e-7)``."""
    n = p.shape[0]
    if kind == "js":
        m = (0.5 * (p + q)).log()
        return 0.5 * ((p * (p.log() - m)).sum() + (q * (q.log() - m)).sum()) / n
    return 0.5 * ((p * (p.log() - EPS)).sum() / n + (q * (q.log() - EPS)).sum() / n)


class RankCSEObjective(Objective):
    def __init__(
        self,
        encoder: TransformerEncoder,
        teachers: list[TransformerEncoder],
        weights: list[float],
        temperature: float = 0.05,
        tau2: float = 0.05,
        distillation: str = "listmle",
        consistency: str = "js",
        beta: float = 1.0,
        gamma: float = 1.0,
    ):
        super().__init__()
        self.encoder = encoder
        self.mlp = make_mlp(encoder)  # training only (--mlp_only_train)
        self.teachers = torch.nn.ModuleList(teachers).to(encoder.device)
        for p in self.teachers.parameters():
            p.requires_grad_(False)
        self.weights = [float(w) for w in weights]
        self.temperature, self.tau2 = float(temperature), float(tau2)
        self.distillation, self.consistency = distillation, consistency
        self.beta, self.gamma = float(beta), float(gamma)

    def result(self) -> TransformerEncoder:
        """The encoder ``RankCSE.train`` returns: a copy of the student, bare [CLS] (the MLP is training only)."""
        return self.encoder.clone()

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        tok = self.encoder.tokenize(items)
        batch = {k: tok[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in tok}
        length = self.encoder.seq_length  # the student's cut (training: its training max length)
        for k, t in enumerate(self.teachers):
            ttok = t.tokenizer(
                [s.strip() for s in items],
                padding=True,
                truncation="longest_first",
                max_length=length,
                return_tensors="pt",
            )
            batch.update({f"t{k}_{name}": v for name, v in ttok.items()})
        batch["perm"] = torch.from_numpy(rng.permutation(len(items)))  # ListMLE's random tie-breaking
        batch["n_tokens"] = 2 * int(tok["attention_mask"].sum())
        return batch

    @torch.no_grad()
    def teacher_scores(self, feats: dict[str, torch.Tensor]) -> torch.Tensor:
        """The teachers' similarity lists ``cos(t_i, t_j) / tau2``, weighted; eval mode (no dropout)."""
        total = None
        for k, (t, w) in enumerate(zip(self.teachers, self.weights, strict=True)):
            t.eval()
            own = {name[len(f"t{k}_") :]: v for name, v in feats.items() if name.startswith(f"t{k}_")}
            z = t(**own)["sentence_embedding"].float()
            s = F.cosine_similarity(z[:, None], z[None], dim=-1) / self.tau2
            total = s * w if total is None else total + s * w
        return total

    def forward(self, input_ids, attention_mask, perm, token_type_ids=None, **teacher_feats) -> torch.Tensor:
        n = input_ids.shape[0]
        kw = {} if token_type_ids is None else {"token_type_ids": token_type_ids.repeat_interleave(2, 0)}
        out = self.encoder(
            input_ids=input_ids.repeat_interleave(2, 0), attention_mask=attention_mask.repeat_interleave(2, 0), **kw
        )
        z = self.mlp(out["sentence_embedding"]).view(n, 2, -1).float()  # rows (sentence i, view v) at 2i + v
        z1, z2 = z[:, 0], z[:, 1]
        sim = F.cosine_similarity(z1[:, None], z2[None], dim=-1) / self.temperature
        loss = F.cross_entropy(sim, torch.arange(n, device=sim.device))
        teacher = self.teacher_scores(teacher_feats)
        kd = listnet(teacher, sim) if self.distillation == "listnet" else listmle(teacher, sim, perm)
        sim21 = F.cosine_similarity(z2[:, None], z1[None], dim=-1) / self.temperature
        p, q = sim.softmax(dim=-1).clamp(min=EPS), sim21.softmax(dim=-1).clamp(min=EPS)
        return loss + self.beta * consistency_loss(p, q, self.consistency) + self.gamma * kd


def parse_teacher_set(text: str, teachers: list[str]) -> dict[str, dict[str, str]]:
    """``"diffcse.generator=DIR,simcse.steps=2"`` -> ``{"diffcse": {"generator": "DIR"}, "simcse": {"steps": "2"}}``."""
    out: dict[str, dict[str, str]] = {t: {} for t in teachers}
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, eq, value = item.partition("=")
        name, dot, option = key.strip().partition(".")
        if not eq or not dot or not option:
            raise ConfigError(
                f"rankcse: option teacher_set={text!r}: expected METHOD.OPTION=VALUE,... (e.g. "
                f"simcse.steps=200,diffcse.generator=DIR); got {item!r}."
            )
        if name not in out:
            raise ConfigError(f"rankcse: option teacher_set names {name!r}, which is not a teacher {teachers}.")
        out[name][option] = value.strip()
    return out


class RankCSE(Method):
    name = "rankcse"
    Config = RankCSEConfig
    description = "RankCSE: SimCSE + ranking consistency + listwise distillation from teachers benchbench trains"

    def loss_chance(self, objective) -> float:
        """Every candidate alike: InfoNCE ln b; consistency ("reference") -ln b, ("js") 0; distillation:
        ListNet ln(b - 1) (b - 1 candidates), ListMLE ln(b!) (a uniform Plackett-Luce list of b)."""
        b, c = self.config.batch_size, self.config
        cons = -math.log(b) if c.consistency == "reference" else 0.0
        kd = math.log(b - 1) if c.distillation == "listnet" else math.lgamma(b + 1)
        return math.log(b) + c.beta * cons + c.gamma * kd

    def _check(self) -> list[float]:
        """The teachers' weights, after the options are checked."""
        c = self.config
        for option in ("temperature", "tau2"):
            if getattr(c, option) <= 0:
                raise ConfigError(f"rankcse: option {option!r} must be > 0 (got {getattr(c, option)}).")
        if c.distillation not in ("listnet", "listmle"):
            raise ConfigError(f"rankcse: option 'distillation' must be listnet or listmle (got {c.distillation!r}).")
        if c.consistency not in ("reference", "js"):
            raise ConfigError(f"rankcse: option 'consistency' must be reference or js (got {c.consistency!r}).")
        if not 0.0 <= c.alpha <= 1.0:
            raise ConfigError(f"rankcse: option 'alpha' must be in [0, 1] (got {c.alpha}).")
        if c.batch_size < 2:
            raise ConfigError(f"rankcse: option 'batch_size' must be >= 2: a list to rank (got {c.batch_size}).")
        if not 1 <= len(c.teachers) <= 2 or len(set(c.teachers)) != len(c.teachers) or "rankcse" in c.teachers:
            raise ConfigError(
                f"rankcse: option 'teachers' must name one or two distinct methods other than rankcse "
                f"(got {c.teachers}); e.g. --set teachers=diffcse,simcse or --set teachers=simcse."
            )
        return [1.0] if len(c.teachers) == 1 else [c.alpha, 1.0 - c.alpha]

    def _teachers(self, corpus: list[str], ctx: TrainContext) -> list[dict]:
        """Each teacher trained (or reused) by the harness: ``train_method`` under a task; without one,
        trained here on ``corpus`` into ``<output>/teachers/<name>`` (reused when complete)."""
        options = parse_teacher_set(self.config.teacher_set, self.config.teachers)
        out = []
        for name in self.config.teachers:
            if ctx.task:
                trained = train_method(name, ctx, options[name])
                out.append({**trained.describe(), "abs_path": str(trained.path)})
                continue
            if ctx.output_dir is None:
                raise ConfigError("rankcse: the teachers are trained into ctx.output_dir, which is None.")
            registry = ctx.registry or get_registry()
            cls = registry.method(name)
            cfg = build_config(cls, options[name])
            folder = Path(ctx.output_dir) / "teachers" / name
            enc_dir = folder / "encoder"
            reused = is_complete(enc_dir)
            if not reused:
                sub = TrainContext(
                    model=ctx.model,
                    seed=ctx.seed,
                    output_dir=folder,
                    device=ctx.device,
                    data=ctx.data,
                    registry=registry,
                    progress=ctx.progress,
                    logger=ctx.logger,
                )
                teacher = cls(cfg).train(corpus, sub)
                with pinned_folder(enc_dir, ctx.output_dir) as into:  # made in the run folder, never via a link
                    teacher.save(into)
                mark_complete(enc_dir, root=ctx.output_dir)
            out.append(
                {
                    "method": name,
                    "config_hash": config_hash(cfg),
                    "model": model_label_of(ctx.model) if ctx.model else "-",
                    "path": f"teachers/{name}/encoder",
                    "reused": reused,
                    "abs_path": str(enc_dir),
                }
            )
        return out

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        weights = self._check()
        steps = resolve_steps(c.steps, len(corpus), c.batch_size * c.grad_accum, c.epochs)
        # a step-0 row is the start through the student's pooling: no teacher is trained for it
        info = self._teachers(corpus, ctx) if steps > 0 else []
        ctx.accounting["teachers"] = [{k: v for k, v in t.items() if k != "abs_path"} for t in info]
        seed_everything(ctx.seed)  # after the teachers: the student's init does not depend on their training
        # max_seq_length: the reference's training truncation only (the saved encoder keeps the start's)
        encoder = ctx.load_encoder(pooling=c.pooling, train_max_seq_length=c.max_seq_length)
        teachers = [load_encoder(t["abs_path"]).to(encoder.device) for t in info]
        obj = RankCSEObjective(
            encoder, teachers, weights, c.temperature, c.tau2, c.distillation, c.consistency, c.beta, c.gamma
        )
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
    register(RankCSE.name, RankCSE)


__all__ = [
    "RankCSE",
    "RankCSEConfig",
    "RankCSEObjective",
    "consistency_loss",
    "listmle",
    "listnet",
    "parse_teacher_set",
]
