"""Training setups of the TSDAE paper (sections 4-6, Appendix B-D) as stage pipelines.

A setup is an ordered list of stages applied to ONE encoder; each stage is ``(kind, data)``:

* ``target``: the method's own (unsupervised) training on the task's corpus (the runner's usual
  path: ``Method.train``; for a method that does not train, the base encoder as it is);
* ``general``: supervised training on general labelled data -- MNRL (sentence-transformers
  ``MultipleNegativesRankingLoss``) on NLI entailment pairs, then ``CosineSimilarityLoss`` (MSE on
  the cosine) on STS-B train. Offline here: SNLI dev/test, XNLI-en dev/test, SICK train entailment
  pairs (MNRL); STS-B train (MSE). The full SNLI/MultiNLI train sets are not offline;
* ``in-domain``: supervised training on the TASK's labelled train pairs (MNRL on relevant pairs, or
  MSE on scores), never its evaluation pairs. Offline only TwitterPara has them (the TURL train set,
  ``useb/twitterpara/train``); AskUbuntu/CQADupStack/SciDocs have no labelled train here: ConfigError.

Setups (``--setup``):

=====================  =====================================================
``unsupervised``       target
``da-general-target``  general -> target   (domain adaptation, Table 3)
``da-target-general``  target -> general
``pretrain-supervised`` target -> in-domain (N labelled pairs, Figure 2)
``supervised``         in-domain (SBERT-sup., the upper bound; the base encoder)
=====================  =====================================================

Sizes are part of the setup string, hence of the result key (``ResultKey.setup``), so curves need
no new key field: ``unsupervised@corpus=1024`` (the target corpus subsampled to 1024 sentences by the
seed, Figure 3) and ``pretrain-supervised@labelled=500`` / ``supervised@labelled=500`` (N labelled
pairs, subsampled by the seed). ``setup_string`` builds them; ``parse_setup`` reads them.

Why not ``SentenceTransformer.fit``: the harness's encoder is ``models.TransformerEncoder`` (its own
pooling/normalisation, saved in sentence-transformers format), not a ``SentenceTransformer``; the
sentence-transformers LOSSES are used unchanged through a thin view (``_STView``) and the small
loop below only batches, steps AdamW and early-stops on dev.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchbench.core.errors import ConfigError
from benchbench.store.data import read_lines
from benchbench.store.files import MARKER, is_complete, mark_complete, pinned_folder
from benchbench.store.space import naming_full_disk, tensor_bytes

log = logging.getLogger(__name__)

PIPELINES: dict[str, tuple[str, ...]] = {
    "unsupervised": ("target",),
    "da-general-target": ("general", "target"),
    "da-target-general": ("target", "general"),
    "pretrain-supervised": ("target", "in-domain"),
    "supervised": ("in-domain",),
}
SETUPS = tuple(PIPELINES)
NO_LABELLED_TRAIN = ("askubuntu", "cqadupstack", "scidocs")


@dataclass(frozen=True)
class Setup:
    name: str
    corpus_size: int | None = None  # subsample the target corpus to this many sentences (by seed)
    labelled: int | None = None  # in-domain labelled pairs (by seed); None: all

    @property
    def stages(self) -> tuple[str, ...]:
        return PIPELINES[self.name]

    def __str__(self) -> str:
        return setup_string(self.name, self.corpus_size, self.labelled)


def setup_string(name: str, corpus_size: int | None = None, labelled: int | None = None) -> str:
    """The key's setup field: ``name[@corpus=N][@labelled=M]`` (sizes only when set)."""
    s = name
    if corpus_size is not None:
        s += f"@corpus={int(corpus_size)}"
    if labelled is not None:
        s += f"@labelled={int(labelled)}"
    return s


def parse_setup(text: str) -> Setup:
    """Read ``--setup`` (with optional ``@corpus=N`` / ``@labelled=M``); a ConfigError names what is wrong."""
    name, *parts = text.strip().split("@")
    if name not in PIPELINES:
        raise ConfigError(
            f"--setup {text!r}: unknown setup {name!r}; choose one of {SETUPS} "
            f"(optionally with @corpus=N or @labelled=N)."
        )
    kw: dict[str, int] = {}
    for p in parts:
        k, _, v = p.partition("=")
        if k not in ("corpus", "labelled") or not v.isdigit() or int(v) < 1:
            raise ConfigError(f"--setup {text!r}: {p!r} is not corpus=N or labelled=N with N >= 1.")
        kw[{"corpus": "corpus_size", "labelled": "labelled"}[k]] = int(v)
    if "labelled" in kw and "in-domain" not in PIPELINES[name]:
        raise ConfigError(
            f"--setup {text!r}: @labelled applies to setups with an in-domain supervised stage "
            f"(pretrain-supervised, supervised)."
        )
    if "corpus_size" in kw and "target" not in PIPELINES[name]:
        raise ConfigError(f"--setup {text!r}: @corpus applies to setups with an unsupervised target stage.")
    return Setup(name, **kw)


def parse_sizes(text: str | None) -> list[int | None]:
    """``--corpus-sizes 128,1024`` / ``--labelled-sizes 500,1000`` -> [128, 1024]; empty -> [None]."""
    if not text:
        return [None]
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise ConfigError(f"sizes {text!r}: expected comma-separated integers, e.g. 128,1024,8192.") from e
    if any(n < 1 for n in out):
        raise ConfigError(f"sizes {text!r}: every size must be >= 1.")
    return out


def subsample(items: Sequence[Any], n: int | None, seed: int) -> list[Any]:
    """``n`` items drawn without replacement by ``seed`` (order kept); all when ``n`` is None or too big."""
    items = list(items)
    if n is None or n >= len(items):
        return items
    idx = np.sort(np.random.default_rng(seed).choice(len(items), size=n, replace=False))
    return [items[i] for i in idx]


def subsample_corpus(corpus: Any, setup: Setup | None, seed: int) -> Any:
    """The target corpus cut to ``setup.corpus_size`` sentences (a new ``corpora.Corpus``, its own hash,
    hence its own run folder)."""
    if setup is None or setup.corpus_size is None:
        return corpus
    from dataclasses import replace

    from benchbench.train.corpora import sha256_of_lines

    sents = subsample(corpus.sentences, setup.corpus_size, seed)
    if len(sents) < setup.corpus_size:
        log.warning("corpus %s has %d sentences < @corpus=%d: all used", corpus.name, len(sents), setup.corpus_size)
    return replace(
        corpus,
        sentences=sents,
        sha256=sha256_of_lines(sents),
        info={
            **corpus.info,
            "subsampled_to": len(sents),
            "subsample_seed": seed,
            "full_sentences": len(corpus.sentences),
        },
        pairs=corpus.pairs,
    )


# ---- labelled data -----------------------------------------------------------------------------------


@dataclass
class Labelled:
    """Labelled training data of one supervised stage: ``pairs`` for MNRL (anchor, positive) and/or
    ``scored`` (a, b, score in [0, 1]) for the cosine-MSE loss; ``dev`` (a, b, score) for early stopping."""

    name: str
    sources: list[str]
    pairs: list[tuple[str, str]] = field(default_factory=list)
    scored: list[tuple[str, str, float]] = field(default_factory=list)
    dev: list[tuple[str, str, float]] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sources": self.sources,
            "mnrl_pairs": len(self.pairs),
            "mse_pairs": len(self.scored),
            "dev_pairs": len(self.dev),
        }


def entailment_pairs(data: Any) -> tuple[list[tuple[str, str]], list[str]]:
    """NLI (premise, entailed hypothesis) pairs for MNRL, and the files used: SNLI dev/test and
    XNLI-en dev/test through ``benchbench.train.nli.entailment_pairs`` (the one NLI reader), plus SICK
    train's ENTAILMENT pairs (SICK is read here: ``nli.py`` covers NLI corpora only)."""
    from benchbench.train import nli

    pairs = list(nli.entailment_pairs(data))
    used = [f"nli/snli/{{s1,s2,labels}}.{s}" for s in nli.SNLI_SPLITS] + list(nli.XNLI_FILES)
    rel = "sts/SICK/SICK_train.txt"  # pair_ID, A, B, relatedness, entailment label
    if data.exists(rel):
        for ln in read_lines(data.locate(rel))[1:]:
            c = ln.split("\t")
            if len(c) >= 5 and c[4].strip() == "ENTAILMENT":
                pairs.append((c[1].strip(), c[2].strip()))
        used.append(rel + " (ENTAILMENT pairs)")
    return list(dict.fromkeys(pairs)), used


def _stsb(data: Any, split: str) -> list[tuple[str, str, float]]:
    rel = f"sts/STSBenchmark/sts-{split}.csv"
    if not data.exists(rel):
        return []
    out = []
    for ln in read_lines(data.locate(rel)):
        c = ln.split("\t")
        if len(c) >= 7:
            out.append((c[5].strip(), c[6].strip(), float(c[4]) / 5.0))
    return out


def general_data(data: Any) -> Labelled:
    """The general supervised stage's data: NLI entailment pairs (MNRL) + STS-B train (MSE), dev = STS-B dev."""
    pairs, used = entailment_pairs(data)
    scored = _stsb(data, "train")
    if not pairs and not scored:
        raise ConfigError(
            "the general supervised stage needs NLI or STS-B data under the data dir "
            "(nli/snli, nli/xnli_en, sts/STSBenchmark/sts-train.csv); none found."
        )
    return Labelled(
        "general:nli+stsb",
        used + (["sts/STSBenchmark/sts-train.csv"] if scored else []),
        pairs=pairs,
        scored=scored,
        dev=_stsb(data, "dev"),
    )


def eval_pairs(adapter: Any) -> set[frozenset[str]]:
    """The task's evaluation pairs (unordered, lower-cased) where the adapter exposes them."""
    try:
        tp = adapter.train_pairs()  # TwitterPara: its test pairs (labels unread)
    except Exception:
        tp = None
    return {frozenset((a.strip().lower(), b.strip().lower())) for a, b in (tp or [])}


def in_domain_data(adapter: Any, labelled: int | None, seed: int) -> Labelled:
    """The task's labelled TRAIN pairs (never its evaluation pairs), cut to ``labelled`` pairs by seed;
    10% held out (by seed) as dev for early stopping (the task has no labelled dev offline)."""
    kind = getattr(adapter.spec, "kind", "")
    if kind == "twitterpara":
        d = adapter.param("train_dir", f"{adapter._dir()}/train")
        a, b, y = (read_lines(adapter.file(f"{d}/{n}")) for n in ("a.toks", "b.toks", "sim.txt"))
        test = eval_pairs(adapter)
        held = adapter.heldout_sentences()  # the heldout split's tweets: never trained on, in any setup
        rows = [
            (x.strip(), z.strip(), float(s))
            for x, z, s in zip(a, b, y, strict=True)
            if x.strip()
            and z.strip()
            and frozenset((x.strip().lower(), z.strip().lower())) not in test
            and x.strip().lower() not in held
            and z.strip().lower() not in held
        ]
        rng = np.random.default_rng(seed + 7919)
        perm = rng.permutation(len(rows))
        n_dev = max(1, len(rows) // 10)
        dev = [rows[i] for i in perm[:n_dev]]
        train = subsample([rows[i] for i in sorted(perm[n_dev:])], labelled, seed)
        return Labelled(
            f"in-domain:{adapter.name}",
            [f"{d}/a.toks", f"{d}/b.toks", f"{d}/sim.txt (TURL train, 0/1)"],
            scored=train,
            dev=dev[:2000],
        )
    if any(k in (kind or adapter.name) for k in NO_LABELLED_TRAIN):
        raise ConfigError(
            f"Task {adapter.name!r}: no labelled in-domain train set is available offline "
            f"(USEB's supervised train data for AskUbuntu/CQADupStack/SciDocs is not under the data dir); "
            f"the in-domain supervised stage (setups supervised, pretrain-supervised) cannot run."
        )
    raise ConfigError(
        f"Task {adapter.name!r} (kind {kind!r}) has no labelled in-domain train reader; "
        f"setups with an in-domain stage support: twitterpara."
    )


# ---- the supervised stage ---------------------------------------------------------------------------


@dataclass
class SupervisedConfig:
    """Appendix B: batch 64, cosine similarity, lr 2e-5, early stopping on dev. ``steps`` caps
    each loss's steps (CPU budgets); ``eval_every`` steps the dev score is checked."""

    batch_size: int = 64
    lr: float = 2e-5
    steps: int = 200
    eval_every: int = 50
    scale: float = 20.0  # MNRL similarity scale (sentence-transformers default)


class _STView:
    """Presents a ``TransformerEncoder`` as the ``model(features) -> {"sentence_embedding": ...}``
    callable sentence-transformers losses expect."""

    def __new__(cls, encoder: Any):
        import torch

        class View(torch.nn.Module):
            def __init__(self, enc):
                super().__init__()
                self.enc = enc

            def forward(self, features):
                return self.enc(**features)

        return View(encoder)


def _dev_spearman(encoder: Any, dev: list[tuple[str, str, float]]) -> float:
    from scipy.stats import spearmanr

    if not dev:
        return float("nan")
    ea = np.concatenate([encoder.encode([a for a, _, _ in dev[i : i + 64]]) for i in range(0, len(dev), 64)])
    eb = np.concatenate([encoder.encode([b for _, b, _ in dev[i : i + 64]]) for i in range(0, len(dev), 64)])
    cos = (ea * eb).sum(1) / (np.linalg.norm(ea, axis=1) * np.linalg.norm(eb, axis=1) + 1e-12)
    return float(spearmanr(cos, [s for _, _, s in dev]).statistic)


def train_supervised(encoder: Any, data: Labelled, cfg: SupervisedConfig, seed: int) -> tuple[Any, dict[str, Any]]:
    """MNRL on ``data.pairs`` then cosine-MSE on ``data.scored`` (sentence-transformers losses),
    keeping the best dev state (early stopping). Returns the encoder and accounting."""
    import copy

    import torch

    try:
        from sentence_transformers.sentence_transformer import losses
    except ImportError:  # sentence-transformers < 5.2
        from sentence_transformers import losses

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    view = _STView(encoder)
    info: dict[str, Any] = {"data": data.describe(), "config": cfg.__dict__.copy(), "steps": {}}
    best = (_dev_spearman(encoder, data.dev), copy.deepcopy(encoder.state_dict()), 0)
    total = 0
    for name, items, loss in (
        ("mnrl", data.pairs, losses.MultipleNegativesRankingLoss(view, scale=cfg.scale)),
        ("mse", data.scored, losses.CosineSimilarityLoss(view)),
    ):
        if not items:
            continue
        opt = torch.optim.AdamW(encoder.parameters(), lr=cfg.lr)
        encoder.train()
        steps = 0
        order = rng.permutation(len(items))
        pos = 0
        while steps < cfg.steps:
            if pos + cfg.batch_size > len(order):
                order, pos = rng.permutation(len(items)), 0
            batch = [items[i] for i in order[pos : pos + cfg.batch_size]]
            pos += cfg.batch_size
            feats = [dict(encoder.tokenize([r[0] for r in batch])), dict(encoder.tokenize([r[1] for r in batch]))]
            feats = [{k: v.to(encoder.device) for k, v in f.items()} for f in feats]
            labels = torch.tensor([r[2] for r in batch], dtype=torch.float32) if name == "mse" else None
            value = loss(feats, labels)
            opt.zero_grad()
            value.backward()
            opt.step()
            steps += 1
            total += 1
            if data.dev and (steps % cfg.eval_every == 0 or steps == cfg.steps):
                score = _dev_spearman(encoder, data.dev)
                if np.isnan(best[0]) or score > best[0]:
                    best = (score, copy.deepcopy(encoder.state_dict()), total)
        info["steps"][name] = steps
    if data.dev:
        encoder.load_state_dict(best[1])
        info["dev_spearman"] = best[0]
        info["best_step"] = best[2]
    encoder.eval()
    return encoder, info


# ---- the pipeline ------------------------------------------------------------------------------------


# ---- stage options (``--set supervised.steps=20``) -------------------------------------------------
# A dotted option names a supervised stage: ``supervised.X`` sets X for every supervised stage of the
# setup, ``general.X`` / ``in-domain.X`` for that stage only (they win over ``supervised.X``).
STAGE_PREFIXES = ("supervised", "general", "in-domain")
# the common budget flags; a method without such an option (sbert, plm-mean ...) gives them to the stages
BUDGET_OPTIONS = ("steps", "batch_size", "lr")


def split_stage_options(
    overrides: dict[str, Any], method_fields: set[str], setup: Setup
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(the method's options, {stage prefix: options}) from ``--set``/``--steps`` overrides. A budget
    flag the method does not have goes to the supervised stages when the setup has one (``--setup
    supervised --steps 20`` with sbert caps the stage); a dotted option for a stage the setup lacks is
    a ConfigError naming the setup's stages."""
    method: dict[str, Any] = {}
    stages: dict[str, dict[str, Any]] = {}
    supervised_kinds = [k for k in setup.stages if k != "target"]
    for key, value in overrides.items():
        head, dot, rest = key.partition(".")
        if not dot:
            if (
                key.replace("-", "_") in BUDGET_OPTIONS
                and key.replace("-", "_") not in method_fields
                and supervised_kinds
            ):
                stages.setdefault("supervised", {}).setdefault(key.replace("-", "_"), value)
            else:
                method[key] = value
            continue
        if head not in STAGE_PREFIXES or not rest:
            raise ConfigError(
                f"--set {key}: a dotted option names a training stage: supervised.OPTION (every supervised "
                f"stage), general.OPTION or in-domain.OPTION; {head!r} is none of these."
            )
        if (head == "supervised" and not supervised_kinds) or (head != "supervised" and head not in supervised_kinds):
            raise ConfigError(
                f"--set {key}: --setup {setup} has no {head if head != 'supervised' else 'supervised'} stage "
                f"(its stages: {', '.join(setup.stages)}); stage options apply to "
                f"{', '.join(s for s in SETUPS if len(PIPELINES[s]) > 1 or s == 'supervised')}."
            )
        stages.setdefault(head, {})[rest] = value
    return method, stages


def stage_configs(setup: Setup, stage_options: dict[str, dict[str, Any]]) -> dict[str, SupervisedConfig]:
    """One ``SupervisedConfig`` per supervised stage of ``setup``: the defaults, then ``supervised.*``,
    then the stage's own options. An unknown option or a bad value is a ConfigError naming the stage."""
    from benchbench.core.methods import build_options

    out = {}
    for kind in setup.stages:
        if kind == "target":
            continue
        merged = {**stage_options.get("supervised", {}), **stage_options.get(kind, {})}
        cfg = build_options(SupervisedConfig, merged, f"The {kind} stage", f"the {kind} stage")
        for name in ("batch_size", "steps", "eval_every"):
            if getattr(cfg, name) < 1:
                raise ConfigError(f"option {name!r} of the {kind} stage must be >= 1 (got {getattr(cfg, name)}).")
        if cfg.lr <= 0:
            raise ConfigError(f"option 'lr' of the {kind} stage must be > 0 (got {cfg.lr}).")
        out[kind] = cfg
    return out


def stage_configs_hash(configs: dict[str, SupervisedConfig]) -> str:
    """'' when every stage runs with the defaults (so records from before stage options keep their
    keys), else a short hash of the stages' options, folded into the result key's config hash."""
    changed = {k: c.__dict__ for k, c in configs.items() if c != SupervisedConfig()}
    if not changed:
        return ""
    return hashlib.sha256(json.dumps(changed, sort_keys=True).encode()).hexdigest()[:12]


def stage_data(kind: str, setup: Setup, adapter: Any, data: Any, seed: int) -> Labelled | None:
    """What a stage trains on (``None`` for the target stage: the method's own corpus)."""
    if kind == "general":
        return general_data(data)
    if kind == "in-domain":
        return in_domain_data(adapter, setup.labelled, seed)
    return None


def run_stages(
    setup: Setup,
    ctx: Any,
    adapter: Any,
    train_target: Callable[[], tuple[Any, dict | None]],
    load_base: Callable[[str], Any],
    stage_root: Path,
    cfg: SupervisedConfig | dict[str, SupervisedConfig] | None = None,
    supervised: Callable[..., tuple[Any, dict]] = train_supervised,
    root: Path | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Apply ``setup``'s stages in order. A supervised stage BEFORE the target saves its encoder under
    ``stage_root`` (reused when complete) and points ``ctx.model`` at it, so the method starts from it;
    a stage AFTER the target continues the encoder the target returned. ``train_target()`` is the
    runner's usual training (or the base encoder for a non-training method); ``load_base(model)``
    loads an encoder. ``cfg``: one config for every supervised stage, or one per stage kind
    (``stage_configs``). ``root`` (default ``stage_root``): the output folder a stage's encoder folder is
    made in through ``store.files`` (no linked folder between them). Returns (encoder, train info with
    a ``stages`` list)."""
    configs = cfg if isinstance(cfg, dict) else {}
    default = cfg if isinstance(cfg, SupervisedConfig) else SupervisedConfig()
    encoder: Any = None
    info: dict[str, Any] = {}
    stages: list[dict[str, Any]] = []
    for i, kind in enumerate(setup.stages):
        if kind == "target":
            encoder, tinfo = train_target()
            info.update(tinfo or {})
            stages.append({"stage": i, "kind": "target", "corpus": (tinfo or {}).get("corpus")})
            continue
        labelled = stage_data(kind, setup, adapter, ctx.data, ctx.seed)
        assert labelled is not None
        stage_cfg = configs.get(kind, default)
        if encoder is None:  # a first stage: from the base model
            h = hashlib.sha256(
                json.dumps(
                    [ctx.model, kind, labelled.describe(), stage_cfg.__dict__, ctx.seed], sort_keys=True, default=str
                ).encode()
            ).hexdigest()[:12]
            out = Path(stage_root) / f"stage-{kind}-{h}"
            if is_complete(out):
                sinfo = json.loads((out / MARKER).read_text())
                encoder = load_base(str(out))
            else:
                encoder, sinfo = supervised(load_base(ctx.model), labelled, stage_cfg, ctx.seed)
                if hasattr(encoder, "save"):
                    with (
                        naming_full_disk(out, f"saving the {kind} stage's encoder", lambda e=encoder: tensor_bytes(e)),
                        pinned_folder(out, stage_root if root is None else root) as folder,
                    ):
                        encoder.save(folder)
                    mark_complete(out, json.dumps(sinfo, default=str), root=stage_root if root is None else root)
            if hasattr(encoder, "save"):
                ctx.model = str(out)  # the target stage (if any) starts here
        else:
            encoder, sinfo = supervised(encoder, labelled, stage_cfg, ctx.seed)
        stages.append({"stage": i, "kind": kind, **sinfo})
    info["stages"] = stages
    info["setup"] = str(setup)
    return encoder, info


# ---- equivalent labelling work (Appendix D, Table 10) ------------------------------------------------


def equivalent_labelling_work(
    score_at: Callable[[int], float], target: float, lo: int = 1, hi: int = 65536, tolerance: int = 1
) -> tuple[int | None, dict[int, float]]:
    """The smallest number of labelled pairs ``n`` in [lo, hi] whose supervised score reaches ``target``
    (the unsupervised method's score), by binary search on ``score_at(n)`` (assumed non-decreasing in
    n, as the paper assumes). Stops when the bracket is ``tolerance`` wide. Returns (n, or None when
    even ``hi`` falls short; every evaluated point {n: score}) -- each point is a real supervised run,
    so the search costs about log2((hi - lo) / tolerance) runs."""
    if lo < 1 or hi < lo or tolerance < 1:
        raise ConfigError(
            f"equivalent_labelling_work: need 1 <= lo <= hi and tolerance >= 1 (got {lo}, {hi}, {tolerance})."
        )
    seen: dict[int, float] = {}

    def f(n: int) -> float:
        if n not in seen:
            seen[n] = float(score_at(n))
        return seen[n]

    if f(hi) < target:
        return None, seen
    if f(lo) >= target:
        return lo, seen
    a, b = lo, hi  # invariant: f(a) < target <= f(b)
    while b - a > tolerance:
        m = (a + b) // 2
        if f(m) >= target:
            b = m
        else:
            a = m
    return b, seen
