"""Tasks whose data is a Hugging Face dataset (id + pinned revision, read through ``datasets``), and
MTEB's catalogue as tasks (``mteb:STSBenchmark``): the metadata (dataset, revision, splits, main
score) comes from the installed ``mteb`` package, the rows through ``benchbench.store.hf``, and the
scores are computed the way ``mteb`` 2.x computes them, so that they equal mteb's own evaluator on
the same data and vectors (``bench/mteb_equality.py`` and ``tests/evaluate/test_hf_tasks.py`` check it):

* ``hf-sts``: Spearman/Pearson of the gold score against cosine, negative Manhattan and negative
  Euclidean distance (mteb's ``cosine_spearman`` ...), x100.
* ``hf-pairs``: average precision (scikit-learn) of the binary label against cosine, dot, and negative
  Manhattan/Euclidean distance, and their maximum ``max_ap`` (mteb's main score), x100.
* ``hf-retrieval``: a corpus, queries, qrels and, for reranking tasks, each query's candidate list
  (``top_ranked``); exact cosine search keeping the 1000 best per query (mteb's ``top_k``), scored by
  ``pytrec_eval`` as mteb does (``ndcg_at_10``, ``map_at_1000``, ...), x100.

A spec names its dataset in ``params``: ``dataset`` (the hub id), ``revision`` (a 40-hex commit),
``config``, ``columns`` (the adapter's input -> the dataset's column) and optionally ``fingerprint``
(the local copy's, checked; without it the copy's is still computed, recorded and compared on
reuse). An ``mteb:`` task follows MTEB's protocol wherever it differs from the literature's, and
says so in its notes (SICK-R: MTEB scores the whole SICK set, 9,927 pairs, not the SemEval-2014 test
split that benchbench's ``sickr`` scores).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from benchbench.core.errors import ConfigError, DataError
from benchbench.core.tasks import TaskSpec
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult
from benchbench.store.hf import HFData

K_VALUES = (1, 3, 5, 10, 20, 100, 1000)  # mteb's AbsTaskRetrieval.k_values; top_k is their max
# MTEB task types this module evaluates -> adapter kind
MTEB_KINDS = {
    "STS": "hf-sts",
    "PairClassification": "hf-pairs",
    "Reranking": "hf-retrieval",
    "Retrieval": "hf-retrieval",
}
# where mteb's protocol is not the literature's, said in the task's notes
MTEB_NOTES = {
    "SICK-R": "MTEB's SICK-R scores the whole SICK set (train + trial + test, 9,927 pairs); the literature's "
    "SICK-R (benchbench's sickr) scores the SemEval-2014 test split (4,927 pairs). This task follows MTEB.",
    "CQADupstackAndroidRetrieval": "MTEB's CQADupStack: title and body corpus, nDCG@10; USEB's (benchbench's "
    "cqadupstack) is title-only, MAP@100. This task follows MTEB.",
}


class HFTask(TaskAdapter):
    """Shared reading: the pinned dataset, a split with the adapter's input columns."""

    kind: ClassVar[str] = ""
    inputs: ClassVar[tuple[str, ...]] = ()
    task_prefix: ClassVar[str] = "mteb"  # the registry resolves ``mteb:NAME`` through ``prefixed_task``

    @classmethod
    def prefixed_task(cls, rest: str) -> TaskSpec:
        return mteb_spec(rest)

    def __init__(self, spec: TaskSpec, data):
        super().__init__(spec, data)
        for key in ("dataset", "revision"):
            if not self.param(key):
                raise ConfigError(
                    f"Task {self.name!r} (spec {spec.source or '?'}): params.{key} is required for kind {self.kind!r}."
                )
        self._hf: HFData | None = None
        # the record's ``data`` holds the used entries under ``params.root``: this dataset's fingerprint
        spec.params.setdefault("root", f"hf:{self.param('dataset')}@{self.param('revision')}")

    @property
    def hf(self) -> HFData:
        if self._hf is None:
            self._hf = HFData(
                self.data, self.name, self.param("dataset"), self.param("revision"), self.param("fingerprint")
            )
        return self._hf

    def missing_files(self, split: str) -> list[str]:
        h = self.hf
        return [] if h.folder is not None or h.data.allow_download else [f"hf/{h.dataset}/{h.revision}"]

    def column(self, name: str) -> str:
        return dict(self.param("columns", {})).get(name, name)

    def rows(self, split: str) -> Any:
        """The split, after mteb's own ``dataset_transform`` for an ``mteb:`` task (renames, filters)."""
        ds = self.hf.split(self.param("config"), split)
        mteb_name = self.param("mteb_task")
        if mteb_name:
            ds = _mteb_transform(mteb_name, split, ds)
        if len(ds) == 1 and isinstance(ds[0].get(self.column(self.inputs[0])), list):
            import datasets  # mteb v1 pair datasets hold the whole split in one row of lists

            ds = datasets.Dataset.from_dict(ds[0])
        cols = [self.column(c) for c in self.inputs]
        missing = [c for c in cols if c not in ds.column_names]
        if missing:
            raise DataError(
                f"Task {self.name!r} (spec {self.spec.source or '?'}): dataset {self.hf.dataset} split {split!r} has "
                f"no column(s) {missing} (it has {ds.column_names}); fix params.columns."
            )
        return ds

    def _where(self, split: str) -> str:
        """The copy (or hub dataset) and split a bad row is in, for errors a user can act on."""
        h = self.hf
        src = f"local copy {h.folder}" if h.folder is not None else f"dataset {h.dataset}@{h.revision}"
        config = self.param("config")
        return f"{src}{f' config {config!r}' if config else ''}, split {split!r}"

    def numbers(self, ds: Any, split: str, column: str) -> np.ndarray:
        """The column ``column`` (the adapter's name) as float64. A value that is not a finite number
        (NaN, null, text) is an error naming the copy, the split, the row and the value: a NaN gold score
        would otherwise surface as a NaN correlation, blamed on the encoder."""
        name = self.column(column)
        values = ds[name]
        bad = None
        try:
            arr = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            arr = None
            bad = next(i for i, v in enumerate(values) if not _is_number(v))
        if arr is not None and not np.isfinite(arr).all():
            bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        if bad is not None:
            raise DataError(
                f"Task {self.name!r}: {self._where(split)}, column {name!r}: row {bad} has the label "
                f"{values[bad]!r}, not a finite number. Fix or drop that row in the copy (and delete its "
                f"rows' stored results), or point the spec at a clean copy."
            )
        return arr  # type: ignore[return-value]


def _is_number(v: Any) -> bool:
    try:
        return bool(np.isfinite(float(v)))
    except (TypeError, ValueError):
        return False


def _mteb_transform(name: str, split: str, ds: Any) -> Any:
    import datasets
    import mteb

    task = mteb.get_task(name)
    task.dataset = datasets.DatasetDict({split: ds})
    task.dataset_transform()
    return task.dataset[split]


def _corr(gold: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    from scipy.stats import pearsonr, spearmanr

    return 100 * float(pearsonr(gold, pred)[0]), 100 * float(spearmanr(gold, pred)[0])


def _pair_vectors(model: Embedder, a: list[str], b: list[str]) -> tuple[np.ndarray, np.ndarray]:
    v = model.embed(list(a) + list(b), desc="pairs").astype(np.float32)
    return v[: len(a)], v[len(a) :]


def _distances(e1: np.ndarray, e2: np.ndarray) -> dict[str, np.ndarray]:
    """The scores mteb computes per pair (scikit-learn's paired distances, negated where lower is closer)."""
    from sklearn.metrics.pairwise import paired_cosine_distances, paired_euclidean_distances, paired_manhattan_distances

    return {
        "cosine": 1 - paired_cosine_distances(e1, e2),
        "manhattan": -paired_manhattan_distances(e1, e2),
        "euclidean": -paired_euclidean_distances(e1, e2),
        "dot": np.einsum("ij,ij->i", e1.astype(np.float64), e2.astype(np.float64)),
    }


class HFSTSAdapter(HFTask):
    """STS from a dataset: ``sentence1``, ``sentence2``, ``score`` columns."""

    kind = "hf-sts"
    inputs = ("sentence1", "sentence2", "score")

    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        self.check_split(split)
        ds = self.rows(split)
        a, b = ds[self.column("sentence1")], ds[self.column("sentence2")]
        gold = self.numbers(ds, split, "score")
        d = _distances(*_pair_vectors(model, a, b))
        scores = {}
        for name in ("cosine", "manhattan", "euclidean"):
            scores[f"{name}_pearson"], scores[f"{name}_spearman"] = _corr(gold, d[name])
        return TaskResult(self.spec.main_metric or "cosine_spearman", scores, notes=[f"{len(gold)} pairs"])

    def own_sentences(self) -> list[str]:
        ds = self.rows(self.spec.default_splits[0])
        return list(dict.fromkeys(ds[self.column("sentence1")] + ds[self.column("sentence2")]))

    def train_pairs(self) -> list[tuple[str, str]] | None:
        ds = self.rows(self.spec.default_splits[0])
        return list(zip(ds[self.column("sentence1")], ds[self.column("sentence2")], strict=True))


class HFPairsAdapter(HFTask):
    """Pair classification from a dataset: ``sentence1``, ``sentence2``, ``labels`` (0/1) columns."""

    kind = "hf-pairs"
    inputs = ("sentence1", "sentence2", "labels")

    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        from sklearn.metrics import average_precision_score

        self.check_split(split)
        ds = self.rows(split)
        a, b = ds[self.column("sentence1")], ds[self.column("sentence2")]
        raw = self.numbers(ds, split, "labels")
        wrong = np.flatnonzero((raw != 0) & (raw != 1))  # checked before any cast: int64(0.9) would be 0
        if len(wrong):
            i = int(wrong[0])
            raise DataError(
                f"Task {self.name!r}: {self._where(split)}, column {self.column('labels')!r}: labels must be 0 or "
                f"1; row {i} has {ds[self.column('labels')][i]!r} ({len(wrong)} such rows). A graded score "
                f"belongs in an hf-sts task; else fix the copy's labels."
            )
        labels = raw.astype(np.int64)
        d = _distances(*_pair_vectors(model, a, b))
        scores = {f"{n}_ap": 100 * float(average_precision_score(labels, s)) for n, s in d.items()}
        scores["max_ap"] = max(scores.values())
        return TaskResult(self.spec.main_metric or "max_ap", scores, notes=[f"{len(labels)} pairs"])

    def own_sentences(self) -> list[str]:
        ds = self.rows(self.spec.default_splits[0])
        return list(dict.fromkeys(ds[self.column("sentence1")] + ds[self.column("sentence2")]))


class HFRetrievalAdapter(HFTask):
    """Retrieval and reranking from a dataset with configs ``corpus`` (id, title, text), ``queries``
    (id, text), ``default`` (qrels: query-id, corpus-id, score) and, for reranking, ``top_ranked``
    (query-id, corpus-ids): MTEB 2's layout."""

    kind = "hf-retrieval"
    inputs = ()

    def rows(self, split: str) -> Any:  # not a single table
        raise NotImplementedError

    def _load(self, split: str) -> tuple[dict, dict, dict, dict | None]:
        h = self.hf
        configs = h.configs()
        corpus_ds = h.split("corpus", split, ["id", "text"])
        queries_ds = h.split("queries", split, ["id", "text"])
        qrels_ds = h.split("default" if "default" in configs else "qrels", split, ["query-id", "corpus-id", "score"])
        titles = corpus_ds["title"] if "title" in corpus_ds.column_names else [""] * len(corpus_ds)
        # mteb's _corpus_to_dict: "title text", stripped; the text alone when there is no title
        corpus = {
            str(i): ((t + " " + x).strip() if t else x.strip())
            for i, t, x in zip(corpus_ds["id"], titles, corpus_ds["text"], strict=True)
        }
        queries = {str(i): x for i, x in zip(queries_ds["id"], queries_ds["text"], strict=True)}
        qrels: dict[str, dict[str, int]] = {}
        for q, c, s in zip(qrels_ds["query-id"], qrels_ds["corpus-id"], qrels_ds["score"], strict=True):
            qrels.setdefault(str(q), {})[str(c)] = int(s)
        top = None
        if "top_ranked" in configs:
            tr = h.split("top_ranked", split, ["query-id", "corpus-ids"])
            top = {str(q): [str(c) for c in cs] for q, cs in zip(tr["query-id"], tr["corpus-ids"], strict=True)}
        return corpus, queries, qrels, top

    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        self.check_split(split)
        corpus, queries, qrels, top = self._load(split)
        results = search(model, corpus, queries, top, max(K_VALUES))
        scores = trec_scores(qrels, results, K_VALUES)
        note = f"{len(queries)} queries, {len(corpus)} documents" + (", reranking top_ranked lists" if top else "")
        return TaskResult(self.spec.main_metric or "ndcg_at_10", scores, notes=[note])

    def own_sentences(self) -> list[str]:
        corpus, queries, _, _ = self._load(self.spec.default_splits[0])
        return list(dict.fromkeys([*queries.values(), *corpus.values()]))


def search(model: Embedder, corpus: dict, queries: dict, top: dict | None, k: int) -> dict[str, dict[str, float]]:
    """Each query's best ``k`` documents by cosine (of its ``top`` candidates when given), as mteb's
    ``SearchEncoderWrapper`` keeps them: ``{query id: {doc id: score}}``."""
    ids = list(corpus)
    pos = {d: i for i, d in enumerate(ids)}
    dv = model.embed([corpus[d] for d in ids], desc="corpus").astype(np.float32)
    dv /= np.maximum(np.linalg.norm(dv, axis=1, keepdims=True), 1e-12)
    qids = [q for q in queries if top is None or q in top]
    qv = model.embed([queries[q] for q in qids], desc="queries").astype(np.float32)
    qv /= np.maximum(np.linalg.norm(qv, axis=1, keepdims=True), 1e-12)
    out: dict[str, dict[str, float]] = {}
    for start in range(0, len(qids), 256):
        block = qv[start : start + 256]
        if top is None:
            sims = block @ dv.T
            kk = min(k, sims.shape[1])
            best = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
            for r, q in enumerate(qids[start : start + 256]):
                out[q] = {ids[j]: float(sims[r, j]) for j in best[r]}
        else:
            for r, q in enumerate(qids[start : start + 256]):
                cand = [d for d in top[q] if d in pos]
                sims = dv[[pos[d] for d in cand]] @ block[r]
                order = np.argsort(-sims, kind="stable")[:k]
                out[q] = {cand[j]: float(sims[j]) for j in order}
    return out


def trec_scores(qrels: dict, results: dict, k_values=K_VALUES) -> dict[str, float]:
    """nDCG, MAP, recall and precision at each k, averaged over the queries ``pytrec_eval`` scores (the
    evaluator mteb uses, and the TREC reference), x100."""
    import pytrec_eval

    ks = ",".join(str(k) for k in k_values)
    measures = {f"map_cut.{ks}", f"ndcg_cut.{ks}", f"recall.{ks}", f"P.{ks}"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(results)
    if not per_query:
        raise DataError("No query of the task has both a relevance judgement and a result: nothing to score.")
    names = {"map_cut": "map_at", "ndcg_cut": "ndcg_at", "recall": "recall_at", "P": "precision_at"}
    scores = {}
    for trec, ours in names.items():
        for k in k_values:
            vals = [s[f"{trec}_{k}"] for s in per_query.values()]
            scores[f"{ours}_{k}"] = 100 * float(sum(vals) / len(vals))
    return scores


def mteb_eligible(metadata: Any) -> bool:
    """Whether ``mteb:<name>`` resolves for an MTEB task of this metadata: a type benchbench scores the
    way mteb does (``MTEB_KINDS``), evaluated in English only (a multilingual task's subsets are other
    languages). ``mteb_spec`` refuses every other task; ``mteb_tasks`` lists these."""
    return (
        metadata.type in MTEB_KINDS
        and not metadata.is_multilingual
        and any(lang.startswith("eng") for lang in metadata.eval_langs)
    )


def mteb_tasks() -> tuple[str, list[tuple[str, str, list[str], str]]]:
    """(the installed mteb's version, ``(name, type, splits, main score)`` of every task that runs as
    ``mteb:<name>``), by type then name. Aggregate tasks (CQADupstackRetrieval: the mean of twelve others)
    are left out: they have no dataset of their own. A ConfigError saying how to install mteb when it is
    not installed."""
    try:
        import mteb
    except ImportError as e:
        raise ConfigError(
            "Listing MTEB's tasks needs the mteb package, which is not installed: pip install 'benchbench[hf]'."
        ) from e
    found = mteb.get_tasks(task_types=list(MTEB_KINDS), languages=["eng"], exclude_superseded=False)
    rows = {
        t.metadata.name: (t.metadata.name, t.metadata.type, list(t.metadata.eval_splits), t.metadata.main_score)
        for t in found
        if mteb_eligible(t.metadata) and not getattr(t, "is_aggregate", False)
    }
    return mteb.__version__, sorted(rows.values(), key=lambda r: (r[1], r[0]))


def mteb_spec(name: str) -> TaskSpec:
    """The task ``mteb:<name>`` from the installed mteb's metadata (English STS, pair classification,
    reranking and retrieval tasks)."""
    try:
        import mteb
    except ImportError as e:
        raise ConfigError(f"Task 'mteb:{name}' needs the mteb package: pip install 'benchbench[hf]'.") from e
    try:
        task = mteb.get_task(name)
    except Exception as e:  # mteb raises KeyError/ValueError with its own did-you-mean
        raise ConfigError(f"Task 'mteb:{name}': the installed mteb {mteb.__version__} has no such task ({e}).") from e
    m = task.metadata
    kind = MTEB_KINDS.get(m.type)
    if not mteb_eligible(m):
        raise ConfigError(
            f"Task 'mteb:{name}' is an MTEB {m.type} task in {m.eval_langs}; benchbench evaluates MTEB's English "
            f"{', '.join(MTEB_KINDS)} tasks."
        )
    columns = {}
    if kind == "hf-sts":
        columns = {"sentence1": task.column_names[0], "sentence2": task.column_names[1]}
    elif kind == "hf-pairs":
        columns = {
            "sentence1": task.input1_column_name,
            "sentence2": task.input2_column_name,
            "labels": task.label_column_name,
        }
    notes = [f"MTEB {mteb.__version__} task {name} ({m.type}); main score {m.main_score}"]
    notes += [MTEB_NOTES[name]] if name in MTEB_NOTES else []
    return TaskSpec(
        name=f"mteb:{name}",
        kind=kind,
        description=f"MTEB {name}: {m.description.splitlines()[0][:120] if m.description else ''}",
        splits=list(m.eval_splits),
        default_splits=list(m.eval_splits),
        main_metric=m.main_score,
        params={"dataset": m.dataset["path"], "revision": m.dataset["revision"], "columns": columns, "mteb_task": name},
        notes=notes,
        source=f"mteb {mteb.__version__}",
    )
