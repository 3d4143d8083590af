"""Quick-Thoughts (Logeswaran & Lee, ICLR 2018) and, on the same encoders, the skip-thought objective.

QT: two encoders f and g with SEPARATE parameters. A minibatch is a window of ``batch_size``
CONTIGUOUS sentences of ordered text; for each sentence s every other sentence c of the window is a
candidate, scored f(s)·g(c); the targets are s's true neighbours within the context (context size 3
= previous and next). Loss: softmax cross-entropy over the candidates against the target distribution
(uniform over the true neighbours, as the authors' S2V code normalises its multi-hot targets). Test
vector: [f(s); g(s)]. Adam, lr 5e-4, batch 400, 1 epoch (paper section 4.1).

Contiguity vs the shared loop: ``train_loop`` shuffles its ITEMS. Here an item is the START OFFSET of a
window (windows tile the corpus: 0, B, 2B, ...) and the loop's batch size is 1 window, so the loop
shuffles windows while each window stays a run of contiguous sentences.

Encoders (``encoder`` option): ``gru`` (single-layer GRU, final state), ``bigru`` (concatenated
final states of a forward and a backward GRU, each ``hidden/2`` wide so uni and bi have the same
size), ``bow`` (mean of word embeddings), ``transformer`` (``--model``, pooled). Word embeddings
from scratch (U[-0.1, 0.1], case-sensitive vocabulary of the ``vocab_size`` most frequent corpus tokens)
or GloVe 6B-50d (``embeddings=glove``, lower-cased lookup over GloVe's whole vocabulary, fixed unless
``tune_embeddings``). GRU weights Xavier-uniform, gate (reset and update) biases 1.

Named variants: ``combine-qt`` (a uni and a bi model trained separately, concatenated at test time)
and ``mc-qt`` (two bi models, one on fixed GloVe, one on tunable scratch embeddings, concatenated).

``skip-thought``: the same encoder, with two GRU decoders (previous / next sentence) conditioned on
the sentence vector through their initial state, teacher forcing and a full-vocabulary softmax
(Kiros et al. 2015; their decoders also feed the vector to every gate, ours only to the initial
state: stated simplification). The baseline of QT's efficiency experiment (Appendix, Figure 2).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from benchbench import (
    ConfigError,
    LoopConfig,
    Method,
    Objective,
    TrainContext,
    get_registry,
    hash_weights,
    hookimpl,
    load_encoder,
    method_fingerprint,
    seed_everything,
    train_loop,
)

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
_TOKEN = re.compile(r"\w+(?:'\w+)?|[^\w\s]")  # case kept: QT's vocabulary is case-sensitive


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text)


# ----------------------------------------------------------------------------------------------- vocabulary
class Vocab:
    """Word -> id with PAD=0, UNK=1, BOS=2, EOS=3. ``lower`` lower-cases lookups (GloVe 6B is uncased)."""

    def __init__(self, words: list[str], lower: bool = False):
        self.words = [PAD, UNK, BOS, EOS] + [w for w in words if w not in (PAD, UNK, BOS, EOS)]
        self.index = {w: i for i, w in enumerate(self.words)}
        self.lower = lower

    def __len__(self) -> int:
        return len(self.words)

    def ids(self, text: str, max_tokens: int) -> list[int]:
        return self.lookup(tokenize(text.lower() if self.lower else text)[:max_tokens])

    def lookup(self, tokens: list[str]) -> list[int]:
        """Ids of already tokenized words (lower-cased first when ``lower``)."""
        if self.lower:
            tokens = [t.lower() for t in tokens]
        return [self.index.get(t, 1) for t in tokens] or [1]  # an empty sentence is one UNK (GRUs need a step)

    @classmethod
    def from_corpus(cls, sentences, size: int, max_sentences: int | None = None) -> Vocab:
        """The ``size`` most frequent case-sensitive tokens of the corpus (streamed; ties by first seen)."""
        counts: Counter = Counter()
        n = len(sentences) if max_sentences is None else min(len(sentences), max_sentences)
        for i in range(n):
            counts.update(tokenize(sentences[i]))
        return cls([w for w, _ in counts.most_common(size)])


def glove_table() -> tuple[list[str], np.ndarray]:
    """GloVe 6B-50d words and vectors, through the ``glove-avg`` baseline (one loader for both)."""
    reg = get_registry()
    if "glove-avg" not in reg.methods:
        raise ConfigError("qt: embeddings='glove' needs the glove-avg baseline plugin (benchbench baselines).")
    glove = reg.methods["glove-avg"]().train([], None)
    words = [None] * len(glove.vocab)
    for w, i in glove.vocab.items():
        words[i] = w
    return words, np.asarray(glove.vectors, dtype=np.float32)


# ----------------------------------------------------------------------------------------------- encoders
@dataclass
class TowerSpec:
    """One encoder's architecture (saved with it, so it reloads exactly)."""

    kind: str = "gru"  # gru | bigru | bow | transformer
    hidden: int = 1200  # output size (bigru: hidden/2 a direction)
    emb_dim: int = 300
    embeddings: str = "scratch"  # scratch | glove
    tune_embeddings: bool = True
    max_tokens: int = 50
    model: str | None = None  # transformer: the base model
    pooling: str = "mean"


class RNNTower(nn.Module):
    """Word embeddings + a single-layer GRU (uni or bi) or a bag of words."""

    def __init__(self, spec: TowerSpec, vocab: Vocab, glove: np.ndarray | None = None):
        super().__init__()
        self.spec, self.vocab = spec, vocab
        if spec.embeddings == "glove":
            table = np.zeros((len(vocab), glove.shape[1]), dtype=np.float32)
            table[4:] = glove
            self.emb = nn.Embedding.from_pretrained(
                torch.from_numpy(table), freeze=not spec.tune_embeddings, padding_idx=0
            )
        else:
            self.emb = nn.Embedding(len(vocab), spec.emb_dim, padding_idx=0)
            nn.init.uniform_(self.emb.weight, -0.1, 0.1)
            with torch.no_grad():
                self.emb.weight[0].zero_()
        e = self.emb.embedding_dim
        if spec.kind in ("gru", "bigru"):
            bi = spec.kind == "bigru"
            if bi and spec.hidden % 2:
                raise ConfigError(f"qt: encoder 'bigru' needs an even hidden size (got {spec.hidden}).")
            self.rnn = nn.GRU(e, spec.hidden // 2 if bi else spec.hidden, batch_first=True, bidirectional=bi)
            init_gru(self.rnn)
        elif spec.kind != "bow":
            raise ConfigError(f"qt: unknown encoder {spec.kind!r}; expected gru, bigru, bow or transformer.")

    @property
    def dim(self) -> int:
        return self.emb.embedding_dim if self.spec.kind == "bow" else self.spec.hidden

    def features(self, texts: list[str]) -> dict[str, torch.Tensor]:
        seqs = [self.vocab.ids(t, self.spec.max_tokens) for t in texts]
        ids = torch.zeros(len(seqs), max(map(len, seqs)), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
        return {"ids": ids, "lengths": torch.tensor([len(s) for s in seqs])}

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        if self.spec.kind == "bow":
            return x.sum(1) / lengths.to(x.dtype).unsqueeze(1)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, h = self.rnn(packed)  # (directions, B, H): the final state of each direction
        return torch.cat(list(h), dim=-1)


def init_gru(rnn: nn.GRU) -> None:
    """Xavier-uniform weights (per gate block), gate biases 1: PyTorch orders the gates (reset, update,
    new); the reset and update biases start at 1, the candidate's and the recurrent biases at 0."""
    for name, p in rnn.named_parameters():
        h = rnn.hidden_size
        with torch.no_grad():
            if name.startswith("weight"):
                for k in range(3):
                    nn.init.xavier_uniform_(p[k * h : (k + 1) * h])
            elif name.startswith("bias_ih"):
                p.zero_()
                p[: 2 * h] = 1.0
            else:
                p.zero_()


class TransformerTower(nn.Module):
    """A pooled Transformer (benchbench TransformerEncoder) as f or g."""

    def __init__(self, spec: TowerSpec, encoder: Any):
        super().__init__()
        self.spec, self.enc = spec, encoder

    @property
    def dim(self) -> int:
        return int(self.enc.dim) if hasattr(self.enc, "dim") else int(self.enc.get_sentence_embedding_dimension())

    def features(self, texts: list[str]) -> dict[str, torch.Tensor]:
        return dict(self.enc.tokenize(texts))

    def forward(self, **feats) -> torch.Tensor:
        return self.enc(**feats)["sentence_embedding"]


def n_tokens(feats: dict[str, torch.Tensor]) -> int:
    if "lengths" in feats:
        return int(feats["lengths"].sum())
    return int(feats["attention_mask"].sum()) if "attention_mask" in feats else 0


# ----------------------------------------------------------------------------------------------- QT objective
def context_targets(sizes: list[int], context: int) -> torch.Tensor:
    """The target matrix of a batch made of windows of ``sizes`` contiguous sentences: row i has 1 at
    every sentence within ``(context - 1) // 2`` positions of i in the SAME window, 0 elsewhere
    (itself included)."""
    if context < 3 or context % 2 == 0:
        raise ConfigError(f"qt: context size must be odd and >= 3 (got {context}).")
    n, r = sum(sizes), (context - 1) // 2
    t = torch.zeros(n, n)
    start = 0
    for size in sizes:
        for i in range(start, start + size):
            for j in range(max(start, i - r), min(start + size, i + r + 1)):
                if j != i:
                    t[i, j] = 1.0
        start += size
    return t


def qt_loss(u: torch.Tensor, v: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Softmax over all candidates c != s of f(s)·g(c); cross-entropy against the neighbours,
    uniformly weighted. Sentences without a neighbour (a 1-sentence window) add nothing."""
    scores = u.float() @ v.float().T
    scores = scores.masked_fill(torch.eye(len(u), dtype=torch.bool, device=u.device), float("-inf"))
    logp = torch.log_softmax(scores, dim=-1).masked_fill(targets == 0, 0.0)
    k = targets.sum(-1)
    has = k > 0
    return -((logp * targets).sum(-1)[has] / k[has]).mean()


class QTObjective(Objective):
    def __init__(self, f: nn.Module, g: nn.Module, sentences, window: int, context: int):
        super().__init__()
        self.f, self.g = f, g  # separate parameters by construction (two modules)
        self.sentences, self.window, self.context = sentences, window, context

    def collate(self, items: list[int], rng: np.random.Generator) -> dict[str, Any]:
        texts, sizes = [], []
        for start in items:  # each item: one window of contiguous sentences
            chunk = self.sentences[int(start) : int(start) + self.window]
            texts += list(chunk)
            sizes.append(len(chunk))
        feats = self.f.features(texts)
        return {**feats, "targets": context_targets(sizes, self.context), "n_tokens": n_tokens(feats)}

    def forward(self, targets: torch.Tensor, **feats) -> torch.Tensor:
        return qt_loss(self.f(**feats), self.g(**feats), targets)

    def result(self) -> QTEncoder:
        return QTEncoder([(self.f, self.g)])


def window_starts(n: int, window: int) -> list[int]:
    """Start offsets of the windows tiling ``n`` sentences (the last partial one dropped unless it is
    the only one)."""
    if n < 2:
        raise ConfigError(f"qt: the ordered corpus has {n} sentence(s); QT needs at least 2.")
    return list(range(0, max(1, n - window + 1), window))


# ----------------------------------------------------------------------------------------------- skip-thought
class SkipThoughtObjective(Objective):
    """Encode s_i; decode s_{i-1} and s_{i+1} with separate GRU decoders (initial state = a linear map
    of the sentence vector), teacher-forced, softmax over the whole vocabulary. Items: sentence indices
    1..n-2 (every sentence with both neighbours).

    The decoders read the encoder's word embeddings and predict words of ``out_vocab``: by default the
    encoder's own vocabulary (built from the corpus, as skip-thoughts' shared 20K vocabulary). An
    encoder on GloVe has GloVe's 400K-word table as its vocabulary; a softmax over it would cost 20x
    the paper's, so the caller passes the corpus's most frequent words instead."""

    def __init__(self, f: RNNTower, sentences, max_tokens: int, out_vocab: Vocab | None = None):
        super().__init__()
        self.f, self.sentences, self.max_tokens = f, sentences, max_tokens
        self.out_vocab = out_vocab if out_vocab is not None else f.vocab
        e, h, v = f.emb.embedding_dim, f.dim, len(self.out_vocab)
        self.bridge = nn.Linear(h, 2 * h)
        self.dec_prev, self.dec_next = nn.GRU(e, h, batch_first=True), nn.GRU(e, h, batch_first=True)
        init_gru(self.dec_prev)
        init_gru(self.dec_next)
        self.out = nn.Linear(h, v)

    def _targets(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher forcing: input BOS w1..wn in the encoder's vocabulary, target w1..wn EOS in the output one."""
        toks = [tokenize(t)[: self.max_tokens] for t in texts]
        outs = [self.out_vocab.lookup(t) + [3] for t in toks]  # + EOS
        ins = [[2] + self.f.vocab.lookup(t) for t in toks]  # BOS +
        tgt = torch.zeros(len(outs), max(map(len, outs)), dtype=torch.long)
        inp = torch.zeros_like(tgt)
        for i, (o, n) in enumerate(zip(outs, ins)):
            tgt[i, : len(o)] = torch.tensor(o)
            inp[i, : len(n)] = torch.tensor(n)
        return inp, tgt

    def collate(self, items: list[int], rng: np.random.Generator) -> dict[str, Any]:
        mid = [self.sentences[int(i)] for i in items]
        feats = self.f.features(mid)
        pi, pt = self._targets([self.sentences[int(i) - 1] for i in items])
        ni, nt = self._targets([self.sentences[int(i) + 1] for i in items])
        return {
            **feats,
            "prev_in": pi,
            "prev_tgt": pt,
            "next_in": ni,
            "next_tgt": nt,
            "n_tokens": n_tokens(feats) + int((pt > 0).sum() + (nt > 0).sum()),
        }

    def _decode(self, dec: nn.GRU, h0: torch.Tensor, inp: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        y, _ = dec(self.f.emb(inp), h0.unsqueeze(0).contiguous())
        return F.cross_entropy(self.out(y).flatten(0, 1).float(), tgt.flatten(), ignore_index=0)

    def forward(self, prev_in, prev_tgt, next_in, next_tgt, **feats) -> torch.Tensor:
        hp, hn = torch.tanh(self.bridge(self.f(**feats))).chunk(2, dim=-1)
        return self._decode(self.dec_prev, hp, prev_in, prev_tgt) + self._decode(self.dec_next, hn, next_in, next_tgt)

    def result(self) -> QTEncoder:
        return QTEncoder([(self.f, None)])


# ----------------------------------------------------------------------------------------------- test-time encoder
class QTEncoder:
    """Test-time encoder: the concatenation, over its (f, g) pairs, of [f(s); g(s)] (g None: f(s) only).
    Saves as safetensors weights + JSON specs + vocabularies; reloads through ``load_encoder``."""

    batch_size = 256

    def __init__(self, pairs: list[tuple[nn.Module, nn.Module | None]]):
        self.pairs = pairs

    def towers(self) -> list[nn.Module]:
        return [t for pair in self.pairs for t in pair if t is not None]

    @property
    def dim(self) -> int:
        return sum(t.dim for t in self.towers())

    @property
    def fingerprint(self) -> str:
        """From the towers' bytes at every call: the towers are the method's own modules, which may
        still train after this wrapper is built (no memo can see every in-place write)."""
        h = hashlib.sha256(b"qt-encoder-v1")
        for t in self.towers():
            h.update(json.dumps(asdict(t.spec), sort_keys=True).encode())
            hash_weights(h, t.state_dict())
        return "qt-" + h.hexdigest()[:16]

    @torch.no_grad()
    def encode(self, texts: list[str]) -> np.ndarray:
        out = []
        for t in self.towers():
            t.eval()
        for a in range(0, len(texts), self.batch_size):
            chunk = list(texts[a : a + self.batch_size])
            parts = []
            for f, g in self.pairs:
                feats = f.features(chunk)
                parts.append(f(**feats))
                if g is not None:
                    parts.append(g(**feats))
            out.append(torch.cat(parts, dim=-1).float().cpu().numpy())
        if not out:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate(out)

    def save(self, path) -> None:
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        meta, tensors = [], {}
        for i, pair in enumerate(self.pairs):
            entry = []
            for role, t in zip("fg", pair):
                if t is None:
                    entry.append(None)
                    continue
                spec = asdict(t.spec)
                if isinstance(t, TransformerTower):
                    t.enc.save(str(path / f"p{i}{role}"))
                else:
                    for k, p in t.state_dict().items():
                        if not (k == "emb.weight" and t.spec.embeddings == "glove" and not t.spec.tune_embeddings):
                            tensors[f"p{i}.{role}.{k}"] = p.detach().cpu().contiguous()
                    if t.spec.embeddings != "glove":
                        (path / f"vocab-p{i}.json").write_text(json.dumps(t.vocab.words[4:], ensure_ascii=False))
                entry.append(spec)
            meta.append(entry)
        save_file(tensors, str(path / "weights.safetensors"))
        (path / "qt_config.json").write_text(json.dumps({"pairs": meta, "fingerprint": self.fingerprint}, indent=1))
        (path / "benchbench_encoder.json").write_text(json.dumps({"loader": "qt"}))

    @classmethod
    def load(cls, path) -> QTEncoder:
        from safetensors.torch import load_file

        path = Path(path)
        cfg = json.loads((path / "qt_config.json").read_text())
        tensors = load_file(str(path / "weights.safetensors"))
        pairs = []
        for i, entry in enumerate(cfg["pairs"]):
            made = []
            for role, spec in zip("fg", entry):
                if spec is None:
                    made.append(None)
                    continue
                spec = TowerSpec(**spec)
                if spec.kind == "transformer":
                    made.append(TransformerTower(spec, load_encoder(str(path / f"p{i}{role}"))))
                    continue
                tower = build_tower(
                    spec,
                    None,
                    vocab_words=None
                    if spec.embeddings == "glove"
                    else json.loads((path / f"vocab-p{i}.json").read_text()),
                )
                own = {k[len(f"p{i}.{role}.") :]: v for k, v in tensors.items() if k.startswith(f"p{i}.{role}.")}
                missing, unexpected = tower.load_state_dict(own, strict=False)
                if unexpected or [m for m in missing if m != "emb.weight"]:
                    raise ConfigError(
                        f"QT encoder {path}: weights do not match qt_config.json "
                        f"(missing {missing}, unexpected {unexpected})."
                    )
                made.append(tower.eval())
            pairs.append(tuple(made))
        enc = cls(pairs)
        if enc.fingerprint != cfg.get("fingerprint", enc.fingerprint):
            raise ConfigError(
                f"QT encoder {path}: reloaded weights have fingerprint {enc.fingerprint}, saved "
                f"{cfg['fingerprint']}: the folder is damaged; retrain (--retrain)."
            )
        return enc


def build_tower(
    spec: TowerSpec,
    ctx: TrainContext | None,
    sentences=None,
    vocab_size: int = 50_000,
    vocab_words: list[str] | None = None,
    seed: int = 0,
    vocab_sentences: int | None = None,
) -> nn.Module:
    """One encoder from its spec: a Transformer from ``--model``, else embeddings + GRU/BoW over a
    vocabulary (GloVe's, a saved one, or the corpus's most frequent tokens)."""
    if spec.kind == "transformer":
        if ctx is None:
            raise ConfigError("qt: a transformer tower is built from a TrainContext (--model).")
        return TransformerTower(spec, ctx.load_encoder(pooling=spec.pooling, max_seq_length=spec.max_tokens))
    glove = None
    if spec.embeddings == "glove":
        words, glove = glove_table()
        vocab = Vocab(words, lower=True)
        spec.emb_dim = glove.shape[1]
    elif spec.embeddings == "scratch":
        vocab = (
            Vocab(vocab_words) if vocab_words is not None else Vocab.from_corpus(sentences, vocab_size, vocab_sentences)
        )
    else:
        raise ConfigError(f"qt: embeddings must be 'scratch' or 'glove' (got {spec.embeddings!r}).")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return RNNTower(spec, vocab, glove)


# ----------------------------------------------------------------------------------------------- methods
@dataclass
class QTConfig:
    encoder: str = "gru"  # gru | bigru | bow | transformer
    hidden: int = 1200  # per encoder (f and g): uni-QT 2400 = [f; g] of 1200 each (paper Table 1)
    emb_dim: int = 300
    vocab_size: int = 50_000
    vocab_sentences: int | None = (
        None  # build the vocabulary from the first N sentences (None: all; BookCorpus: e.g. 5M)
    )
    embeddings: str = "scratch"  # scratch (U[-0.1, 0.1]) | glove (GloVe 6B-50d, offline)
    tune_embeddings: bool = True
    max_tokens: int = 50
    pooling: str = "mean"  # transformer towers
    batch_size: int = 400  # contiguous sentences a batch
    context: int = 3  # previous + next
    lr: float = 5e-4
    epochs: float = 1.0
    steps: int | None = None  # overrides epochs; 0 = the untrained encoder
    test_vector: str = "fg"  # fg: [f; g] (paper); f: f only (the efficiency experiment)
    # The paper states no clipping; its code (lajanugen/S2V src/train.py, flag clip_gradient_norm=5.0)
    # clips at 5.0, but through slim's create_train_op, i.e. EACH gradient tensor to norm 5.0, where
    # the loop here clips the GLOBAL norm to 5.0 (stricter when several tensors are large). 0 = off.
    max_grad_norm: float = 5.0
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


def _spec(c: QTConfig | SkipThoughtConfig, **over) -> TowerSpec:
    """The tower a QT or skip-thought config asks for (skip-thought has no Transformer towers: mean pooling)."""
    spec = TowerSpec(
        kind=c.encoder,
        hidden=c.hidden,
        emb_dim=c.emb_dim,
        embeddings=c.embeddings,
        tune_embeddings=c.tune_embeddings,
        max_tokens=c.max_tokens,
        pooling=getattr(c, "pooling", "mean"),
    )
    for k, v in over.items():
        setattr(spec, k, v)
    return spec


def gru_flops(spec: TowerSpec, emb_dim: int, tokens: float) -> float:
    """Forward multiply-adds x2 of a GRU over ``tokens`` steps (3 gates, input + recurrent)."""
    if spec.kind == "bow":
        return 2.0 * tokens * emb_dim
    h = spec.hidden // 2 if spec.kind == "bigru" else spec.hidden
    dirs = 2 if spec.kind == "bigru" else 1
    return dirs * tokens * 2.0 * 3 * (emb_dim * h + h * h)


def train_qt(method: Method, c: QTConfig, sentences, ctx: TrainContext, spec: TowerSpec, tag: str) -> QTEncoder:
    """Train one QT pair (f, g) on the ordered ``sentences``; fills ``ctx.accounting`` incl. ``flops``."""
    seed_everything(ctx.seed)
    if c.test_vector not in ("fg", "f"):
        raise ConfigError(f"{method.name}: test_vector must be 'fg' or 'f' (got {c.test_vector!r}).")
    f = build_tower(spec, ctx, sentences, c.vocab_size, seed=ctx.seed, vocab_sentences=c.vocab_sentences)
    g = (
        build_tower(spec, ctx, vocab_words=f.vocab.words[4:], seed=ctx.seed + 1)
        if spec.kind != "transformer"
        else TransformerTower(spec, f.enc.clone())
    )
    if spec.kind != "transformer" and spec.embeddings == "glove":
        g.vocab = f.vocab
    obj = QTObjective(f, g, sentences, c.batch_size, c.context)
    starts = window_starts(len(sentences), c.batch_size)
    steps = c.steps if c.steps is not None else max(1, round(c.epochs * len(starts)))
    if steps >= 0:  # 0: train_loop returns the towers as built, accounted as the step-0 row
        loop = LoopConfig.from_config(c, steps=steps, batch_size=1)  # an item is one window of batch_size
        obj = train_loop(
            obj,
            starts,
            ctx,
            loop,
            fingerprint=method_fingerprint(method, ctx, starts) + tag,
            make_optimizer=lambda m: torch.optim.Adam([p for p in m.parameters() if p.requires_grad], lr=c.lr),
            desc=f"{method.name}{tag}",
        )
        acc = ctx.accounting
        acc["sentences"] = acc.get("sentences", 0) + acc.get("examples", 0) * c.batch_size  # an item is a window
        if spec.kind != "transformer":  # 2 towers, training ~ 3x forward, plus the B x B score matrix
            e = f.emb.embedding_dim
            acc["flops"] = acc.get("flops", 0.0) + 3 * (
                2 * gru_flops(spec, e, acc.get("tokens", 0)) + 2.0 * acc.get("examples", 0) * c.batch_size * f.dim
            )
            acc["flops_estimate"] = "3 x forward GRU multiply-adds x2 of f and g + score matrix"
    return QTEncoder([(obj.f, obj.g if c.test_vector == "fg" else None)])


class QT(Method):
    name = "qt"
    Config = QTConfig
    corpus = "ordered"
    default_model = None  # GRU encoders need no base model; encoder=transformer uses --model
    description = "Quick-Thoughts: classify a sentence's neighbours among its contiguous batch, f(s)·g(c); [f; g]"

    def train(self, corpus, ctx: TrainContext):
        c = self.config
        if c.encoder == "transformer" and not ctx.model:
            raise ConfigError("qt: encoder=transformer needs --model.")
        return train_qt(self, c, corpus, ctx, _spec(c), "")


class CombineQT(QT):
    name = "combine-qt"
    description = "Quick-Thoughts uni + bi GRU models trained separately, concatenated at test time"

    def train(self, corpus, ctx: TrainContext):
        c = self.config
        uni = train_qt(self, c, corpus, ctx, _spec(c, kind="gru"), ":uni")
        first = dict(ctx.accounting)
        bi = train_qt(self, c, corpus, ctx, _spec(c, kind="bigru"), ":bi")
        _sum_accounting(ctx, first)
        return QTEncoder(uni.pairs + bi.pairs)


class MCQT(QT):
    name = "mc-qt"
    description = "MultiChannel-QT: bi-GRU QT on fixed GloVe + bi-GRU QT on tunable scratch embeddings, concatenated"

    def train(self, corpus, ctx: TrainContext):
        c = self.config
        fixed = train_qt(
            self, c, corpus, ctx, _spec(c, kind="bigru", embeddings="glove", tune_embeddings=False), ":glove"
        )
        first = dict(ctx.accounting)
        tuned = train_qt(
            self, c, corpus, ctx, _spec(c, kind="bigru", embeddings="scratch", tune_embeddings=True), ":scratch"
        )
        _sum_accounting(ctx, first)
        return QTEncoder(fixed.pairs + tuned.pairs)


def _sum_accounting(ctx: TrainContext, first: dict) -> None:
    """Two models trained one after the other: the record states the totals."""
    for k in ("seconds", "steps", "examples", "tokens"):  # "sentences" and "flops" already accumulate
        if k in first and k in ctx.accounting:
            ctx.accounting[k] = first[k] + ctx.accounting[k]
    ctx.accounting["flops"] = first.get("flops", 0.0) + (ctx.accounting.get("flops", 0.0) - first.get("flops", 0.0))


@dataclass
class SkipThoughtConfig:
    encoder: str = "gru"  # gru | bigru | bow
    hidden: int = 1200
    emb_dim: int = 300
    vocab_size: int = 20_000  # the decoders' output vocabulary (and the encoder's, with scratch embeddings)
    embeddings: str = "scratch"  # scratch (U[-0.1, 0.1]) | glove (GloVe 6B-50d, offline), as QT's towers
    tune_embeddings: bool = True
    max_tokens: int = 50
    batch_size: int = 400
    lr: float = 5e-4
    epochs: float = 1.0
    steps: int | None = None
    # as QT: the TensorFlow skip-thoughts code (tensorflow/models research/skip_thoughts, S2V's base)
    # clips each gradient tensor at 5.0 through slim; the loop clips the global norm at 5.0. 0 = off.
    max_grad_norm: float = 5.0
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


class SkipThought(Method):
    name = "skip-thought"
    Config = SkipThoughtConfig
    corpus = "ordered"
    default_model = None
    description = "skip-thought objective (decode previous and next sentence, vocabulary softmax) on QT's encoders"

    def train(self, corpus, ctx: TrainContext):
        c = self.config
        if c.encoder not in ("gru", "bigru", "bow"):
            raise ConfigError(f"skip-thought: encoder must be gru, bigru or bow (got {c.encoder!r}).")
        if len(corpus) < 3:
            raise ConfigError(f"skip-thought: the ordered corpus has {len(corpus)} sentences; it needs at least 3.")
        seed_everything(ctx.seed)
        spec = _spec(c)
        f = build_tower(spec, ctx, corpus, c.vocab_size, seed=ctx.seed)
        out_vocab = Vocab.from_corpus(corpus, c.vocab_size) if c.embeddings == "glove" else None
        obj = SkipThoughtObjective(f, corpus, c.max_tokens, out_vocab)
        items = list(range(1, len(corpus) - 1))
        steps = c.steps if c.steps is not None else max(1, round(c.epochs * len(items) / c.batch_size))
        if steps >= 0:  # 0: train_loop returns the encoder as built, accounted as the step-0 row
            loop = LoopConfig.from_config(c, steps=steps)
            obj = train_loop(
                obj,
                items,
                ctx,
                loop,
                fingerprint=method_fingerprint(self, ctx, items),
                make_optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=c.lr),
                desc=self.name,
            )
            acc, e, h, v = ctx.accounting, obj.f.emb.embedding_dim, obj.f.dim, len(obj.out_vocab)
            enc_tok = acc.get("tokens", 0) / 3  # rough: a third of the counted tokens are encoded, the rest decoded
            dec_tok = acc.get("tokens", 0) - enc_tok
            acc["flops"] = 3 * (
                gru_flops(spec, e, enc_tok)
                + gru_flops(TowerSpec(kind="gru", hidden=h), e, dec_tok)
                + 2.0 * dec_tok * h * v
            )
            acc["flops_estimate"] = "3 x forward: encoder GRU + decoder GRUs + vocabulary softmax"
        return obj.result()


@hookimpl
def benchbench_register_methods(register):
    for cls in (QT, CombineQT, MCQT, SkipThought):
        register(cls.name, cls)


@hookimpl
def benchbench_register_loaders(register):
    register("qt", lambda encoder, path: QTEncoder.load(path))  # a GRU folder: nothing to wrap
