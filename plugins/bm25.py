"""BM25 (Robertson et al. 1994): the lexical baseline of TSDAE's Table 2, with no vectors at all.

The scoring function and its statistics are rank-bm25's ``BM25Okapi`` (IDF with the epsilon floor
for terms in more than half the documents, k1, b, document-length normalisation). rank-bm25 scores
one query at a time in Python over every document, which takes hours on a 48K-title forum, so the
same per-(term, document) weights are laid out once as a scipy sparse matrix and a block of queries
is scored with one sparse product. ``tests/plugins/test_bm25.py`` checks the scores equal
``BM25Okapi.get_scores``.

The encoder implements the USEB adapters' optional vectorless protocol (see
``benchbench/evaluate/adapters/ranking.py``): ``score_pairs(a, b)`` for re-ranking and pair scoring, with the
IDF taken from the texts of that call (every query and candidate of the split), and
``search(queries, corpus, k)`` for retrieval, with the IDF taken from the corpus searched. Text is
lower-cased and split into ``\\w+`` tokens (Elasticsearch's standard analyser, no stop words, as
the paper's Elasticsearch BM25).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass

import numpy as np

from benchbench import Method, PluginError, TrainContext, hookimpl

_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@dataclass
class BM25Config:
    k1: float = 1.5  # rank-bm25 BM25Okapi defaults
    b: float = 0.75
    epsilon: float = 0.25
    query_block: int = 128  # queries scored per sparse product in search(): bounds memory to block x corpus


class BM25Index:
    """rank-bm25 statistics over ``docs`` as a sparse (documents x vocabulary) weight matrix."""

    def __init__(self, docs: list[str], config: BM25Config):
        from rank_bm25 import BM25Okapi
        from scipy import sparse

        tokens = [tokenize(d) for d in docs]
        if not docs or not any(tokens):
            self.vocab: dict[str, int] = {}
            self.weights = sparse.csr_matrix((len(docs), 0), dtype=np.float32)
            return
        bm = BM25Okapi(tokens, k1=config.k1, b=config.b, epsilon=config.epsilon)
        self.vocab = {t: i for i, t in enumerate(bm.idf)}
        rows, cols, vals = [], [], []
        for r, (freqs, dl) in enumerate(zip(bm.doc_freqs, bm.doc_len)):
            norm = config.k1 * (1 - config.b + config.b * dl / bm.avgdl)
            for term, tf in freqs.items():
                rows.append(r)
                cols.append(self.vocab[term])
                vals.append(bm.idf[term] * tf * (config.k1 + 1) / (tf + norm))
        self.weights = sparse.csr_matrix((vals, (rows, cols)), shape=(len(docs), len(self.vocab)), dtype=np.float64)

    def query_matrix(self, queries: list[str]):
        """Term counts of each query (a repeated query term counts again, as in rank-bm25)."""
        from scipy import sparse

        rows, cols = [], []
        for r, q in enumerate(queries):
            for t in tokenize(q):
                j = self.vocab.get(t)
                if j is not None:
                    rows.append(r)
                    cols.append(j)
        return sparse.csr_matrix(
            (np.ones(len(rows)), (rows, cols)), shape=(len(queries), len(self.vocab)), dtype=np.float64
        )

    def scores(self, queries: list[str]) -> np.ndarray:
        """(queries x documents) BM25 scores, dense."""
        return np.asarray((self.query_matrix(queries) @ self.weights.T).todense())


class BM25Scorer:
    """A vectorless encoder: ``score_pairs`` and ``search``, no ``encode``."""

    def __init__(self, config: BM25Config):
        self.config = config
        payload = repr(sorted(asdict(config).items())).encode()
        self.fingerprint = "bm25-" + hashlib.sha256(payload).hexdigest()[:12]

    def encode(self, texts: list[str]) -> np.ndarray:
        raise PluginError(
            "Method 'bm25' has no sentence vectors: it runs on tasks whose adapters accept "
            "score_pairs()/search() (askubuntu, cqadupstack, twitterpara, scidocs)."
        )

    def score_pairs(self, a: list[str], b: list[str]) -> np.ndarray:
        """BM25 of each a[i] (query) against b[i] (document); IDF over every distinct text given."""
        if len(a) != len(b):
            raise ValueError(f"score_pairs: {len(a)} queries but {len(b)} documents")
        docs = list(dict.fromkeys(list(a) + list(b)))
        row = {t: i for i, t in enumerate(docs)}
        index = BM25Index(docs, self.config)
        if not index.vocab:
            return np.zeros(len(a))
        q = index.query_matrix(list(a))
        w = index.weights[[row[t] for t in b]]
        return np.asarray(q.multiply(w).sum(1)).ravel()

    def search(self, queries: list[str], corpus: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k corpus rows per query by BM25 over ``corpus``, best first (ties: lower row first)."""
        kk = min(k, len(corpus))
        out_s = np.zeros((len(queries), kk), dtype=np.float32)
        out_i = np.zeros((len(queries), kk), dtype=np.int64)
        if kk == 0:
            return out_s, out_i
        index = BM25Index(corpus, self.config)
        bs = max(1, int(self.config.query_block))
        for s in range(0, len(queries), bs):
            sc = index.scores(queries[s : s + bs]) if index.vocab else np.zeros((len(queries[s : s + bs]), len(corpus)))
            part = (
                np.argpartition(-sc, kk - 1, axis=1)[:, :kk]
                if kk < sc.shape[1]
                else np.tile(np.arange(sc.shape[1]), (len(sc), 1))
            )
            top = np.take_along_axis(sc, part, 1)
            order = np.lexsort((part, -top), axis=1)  # score descending, then row ascending
            out_i[s : s + bs] = np.take_along_axis(part, order, 1)
            out_s[s : s + bs] = np.take_along_axis(top, order, 1)
        return out_s, out_i


class BM25(Method):
    name = "bm25"
    Config = BM25Config
    trains = False
    default_model = None
    fixed_model = "-"  # no base model: --model is ignored
    description = "BM25 (rank-bm25 Okapi) lexical scorer: re-ranking, retrieval and pair scoring; no vectors"

    def train(self, corpus: list[str], ctx: TrainContext) -> BM25Scorer:
        return BM25Scorer(self.config)


@hookimpl
def benchbench_register_methods(register):
    register(BM25.name, BM25)
