"""USEB CQADupStack: duplicate-question retrieval over each StackExchange forum's whole corpus.

Protocol (USEB, useb/evaluators/cqadupstack.py), kept exactly:

* Titles only. Each query retrieves from its forum's corpus with the split's queries removed (USEB
  pops every query of the split from the pool so a query never retrieves itself; in the BEIR layout
  the queries are not in the corpus to begin with).
* Cosine similarity (L2-normalised vectors, inner product).
* ``map@100``: per query, scikit-learn's average precision of the top 100 (relevance flags, scores),
  0 when none of the 100 is relevant: the denominator is the relevant documents retrieved in the top
  100 (see ``ranking.topk_average_precision``). Mean over the forum's queries.
* ``ndcg@10``: binary gains of the top 10 over the ideal DCG of min(10, |relevant in qrels|) ones.
* Forum scores are macro-averaged (``map@100`` = the main score, USEB's ``map@100_cqadupstack_avg``).

Search is exact (faiss's flat inner-product search) over corpus blocks of ``params.block`` titles
(default: as many as fit in ~24 MB of vectors), each embedded
and searched in turn with a running top-k heap: memory is one block of vectors plus queries x 100,
whatever the corpus size. An encoder with ``search(queries, corpus, k)`` (BM25) is used instead.

Layouts (the first complete one is used):

* ``useb``: USEB's ``data-eval/cqadupstack/corpus.json`` ({forum: {id: title}}) and
  ``retrieval_split.json`` ({"valid"|"test": {forum: {query id: [relevant ids]}}}); dev and test.
* ``beir``: ``<beir_dir>/<forum>/corpus.jsonl.gz`` ({"_id","title","text"}; the title is used),
  ``queries.jsonl.gz`` ({"_id","text"}) and ``qrels/test.tsv`` (header; query-id, corpus-id,
  score > 0 relevant). BEIR has the test split only, so the task then has no dev split. The offline
  copy has 11 of the 12 forums (no ``tex``): the result is marked partial and says so.

Training sentences (``own_sentences``): USEB's ``data-train/cqadupstack/unsupervised/train.txt`` when
present; otherwise ONE corpus for all forums (the paper trains a single model): the union of every
available forum's corpus titles, without any evaluation query (dev or test) of any forum.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import numpy as np

from benchbench.core.errors import DataError
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult
from benchbench.evaluate.adapters.ranking import normalized, pick_layout, search_topk, topk_average_precision
from benchbench.evaluate.item_scores import query_items
from benchbench.store.data import parse_score, read_bytes, read_lines, read_text

FORUMS = [
    "android",
    "english",
    "gaming",
    "gis",
    "mathematica",
    "physics",
    "programmers",
    "stats",
    "tex",
    "unix",
    "webmasters",
    "wordpress",
]
MAP_K, NDCG_K = 100, 10


@dataclasses.dataclass
class Forum:
    queries: dict[str, str]  # query id -> title
    pool: dict[str, str]  # document id -> title (the split's queries removed)
    qrels: dict[str, set[str]]  # query id -> relevant document ids


class CQADupStackAdapter(TaskAdapter):
    kind = "cqadupstack"

    def __init__(self, spec, data):
        super().__init__(spec, data)
        self.layout = pick_layout(self, self._layouts(), default="beir")
        if self.layout == "beir":  # BEIR publishes the test split only
            self.spec = dataclasses.replace(
                spec,
                splits=[s for s in spec.splits if s == "test"],
                default_splits=[s for s in spec.default_splits if s == "test"] or ["test"],
            )

    # ---- files --------------------------------------------------------------------------------
    def forums(self) -> list[str]:
        return list(self.param("forums", FORUMS))

    def _useb_files(self) -> list[str]:
        d = self.param("useb_dir", "useb/data-eval/cqadupstack")
        return [f"{d}/corpus.json", f"{d}/retrieval_split.json"]

    def _beir_files(self, forum: str, split: str = "test") -> list[str]:
        d = f"{self.param('beir_dir', 'beir/cqadupstack')}/{forum}"
        return [f"{d}/corpus.jsonl.gz", f"{d}/queries.jsonl.gz", f"{d}/qrels/{split}.tsv"]

    def _layouts(self) -> dict[str, list[str]]:
        return {"useb": self._useb_files(), "beir": [f for fo in self.forums() for f in self._beir_files(fo)]}

    def files_for(self, split: str) -> list[str]:
        if self.layout == "useb":
            return self._useb_files()
        return [f for fo in self.forums() for f in self._beir_files(fo, split)]

    def available_forums(self, split: str) -> list[str]:
        if self.layout == "useb":
            return [f for f in self.forums() if f in self._useb()[0]]
        return [f for f in self.forums() if all(self.data.exists(x) for x in self._beir_files(f, split))]

    def missing_files(self, split: str) -> list[str]:
        """Missing files only when NO forum can be evaluated; a missing forum makes the result partial
        (named in its notes) rather than hiding the forums that are there."""
        if self.layout == "beir" and self.available_forums(split):
            return []
        return super().missing_files(split)

    # ---- reading ------------------------------------------------------------------------------
    def _useb(self) -> tuple[dict[str, dict[str, str]], dict[str, Any]]:
        if not hasattr(self, "_useb_cache"):
            corpus_f, split_f = self._useb_files()
            corpus, splits = (_json_file(self.file(corpus_f)), _json_file(self.file(split_f)))
            self._useb_cache = (corpus, splits)
        return self._useb_cache

    def load_forum(self, forum: str, split: str) -> Forum:
        data = self._load_full_forum(forum, split)
        return self._lite(forum, split, data) if self.param("pool") else data

    def lite_pools(self) -> dict[str, Any]:
        """The published lite pools (``params.pool``, relative to the task spec, checked against
        ``params.pool_sha256``): {split: {forum: {"queries": [ids], "pool": [ids]}}}, built by
        ``bench/build_useb_lite.py``."""
        if not hasattr(self, "_pools"):
            import hashlib
            from pathlib import Path

            path = Path(self.spec.source).parent / self.param("pool")
            try:
                raw = path.read_bytes()
            except OSError as e:
                raise DataError(f"Task {self.name!r}: lite pool file {path} is unreadable: {e}") from e
            want = self.param("pool_sha256")
            got = hashlib.sha256(raw).hexdigest()
            if want and got != want:
                raise DataError(
                    f"Task {self.name!r}: lite pool file {path} has sha256 {got}, the spec pins {want}; "
                    "rebuild it with bench/build_useb_lite.py or restore the published file."
                )
            self._pools = json.loads(raw)["pools"]
        return self._pools

    def _lite(self, forum: str, split: str, data: Forum) -> Forum:
        """A fixed pool per forum (MTEB's "lite" retrieval tasks): the capped queries and the union of
        their relevant documents and of the top-k of several retrievers over the full forum."""
        pools = self.lite_pools().get(split, {})
        if forum not in pools:
            raise DataError(f"Task {self.name!r}: the lite pool file has no {split!r} pool for forum {forum!r}.")
        keep_q, keep_d = pools[forum]["queries"], pools[forum]["pool"]
        lost = [q for q in keep_q if q not in data.queries] + [d for d in keep_d if d not in data.pool]
        if lost:
            raise DataError(
                f"Task {self.name!r}: lite ids {lost[:5]} of forum {forum!r} are not in the data "
                "(a different copy of CQADupStack?)."
            )
        return Forum(
            {q: data.queries[q] for q in keep_q}, {d: data.pool[d] for d in keep_d}, {q: data.qrels[q] for q in keep_q}
        )

    def _load_full_forum(self, forum: str, split: str) -> Forum:
        if self.layout == "useb":
            corpus, splits = self._useb()
            key = {"dev": "valid"}.get(split, split)
            if key not in splits or forum not in splits[key]:
                raise DataError(f"{self._useb_files()[1]}: no {key!r} entry for forum {forum!r}.")
            qrels = {q: set(map(str, d)) for q, d in splits[key][forum].items()}
            texts = corpus[forum]
            missing = [q for q in qrels if q not in texts]
            if missing:
                raise DataError(f"{self._useb_files()[0]}: query ids {missing[:5]} of forum {forum!r} have no text.")
            queries = {q: texts[q] for q in qrels}
            pool = {d: t for d, t in texts.items() if d not in qrels}
            return Forum(queries, pool, qrels)
        corpus_f, queries_f, qrels_f = self._beir_files(forum, split)
        field = self.param("text_field", "title")
        pool = _jsonl_fields(self.file(corpus_f), field)
        all_queries = _jsonl_fields(self.file(queries_f), "text")
        qrels: dict[str, set[str]] = {}
        qrels_path = self.file(qrels_f)
        for n, line in enumerate(read_lines(qrels_path), 1):
            cols = line.split("\t")
            if n == 1 and cols[0] == "query-id":
                continue
            expected = f"expected 'query-id<TAB>corpus-id<TAB>score', got {line[:80]!r}"
            if len(cols) != 3:  # more is as wrong as fewer: the columns would not be the ones named
                raise DataError(f"{qrels_path}:{n}: {len(cols)} TAB fields, {expected}")
            try:
                relevant = parse_score(cols[2]) > 0
            except ValueError as e:
                raise DataError(f"{qrels_path}:{n}: {expected}") from e
            if relevant:
                qrels.setdefault(cols[0], set()).add(cols[1])
        unknown = [q for q in qrels if q not in all_queries]
        if unknown:
            raise DataError(f"{qrels_f}: query ids {unknown[:5]} are not in {queries_f}.")
        queries = {q: all_queries[q] for q in qrels}
        for q in queries:  # a query never retrieves itself
            pool.pop(q, None)
        return Forum(queries, pool, qrels)

    # ---- scoring ------------------------------------------------------------------------------
    def _retrieve(self, model: Embedder, forum: str, data: Forum) -> tuple[np.ndarray, np.ndarray, list[str]]:
        qids, dids = list(data.queries), list(data.pool)
        search = getattr(model.encoder, "search", None)
        if callable(search):
            scores, idx = search([data.queries[q] for q in qids], [data.pool[d] for d in dids], MAP_K)
            return np.asarray(scores), np.asarray(idx), dids
        qv = normalized(model.embed([data.queries[q] for q in qids], desc=f"{self.name}/{forum} queries"), inplace=True)
        # corpus rows per block: params.block, else ~24 MB of float32 vectors (16384 rows at d=384;
        # 4x larger blocks were no faster here and took 80 MB more)
        block = int(self.param("block", 0)) or max(4096, (24 << 20) // (4 * max(1, qv.shape[1])))

        # documents with the same title are searched once, then expanded: blocks without repeats come
        # back from embed() as they are, with no per-block gather
        rep = Repeats(list(data.pool.values()))
        uniq = rep.distinct

        def blocks():
            for start in range(0, len(uniq), block):
                # embed() returns a fresh array: normalised in place, no second corpus-sized copy
                yield normalized(
                    model.embed(uniq[start : start + block], desc=f"{self.name}/{forum} corpus"), inplace=True
                )

        scores, idx = rep.expand(*search_topk(qv, blocks(), MAP_K), MAP_K)
        return scores, idx, dids

    def score_forum(
        self, scores: np.ndarray, idx: np.ndarray, dids: list[str], qids: list[str], qrels: dict[str, set[str]]
    ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """The forum's scores, and each query's AP@100 and nDCG@10 (x100) for per-item files."""
        # hits as one membership test of (query row, corpus column) codes: no Python loop over the top 100s
        col = dict(zip(dids, range(len(dids))))
        n = len(dids)
        rel_codes = np.fromiter(
            (r * n + col[d] for r, q in enumerate(qids) for d in qrels[q] if d in col), dtype=np.int64
        )
        codes = np.arange(len(qids), dtype=np.int64)[:, None] * n + idx
        hits = (idx >= 0) & np.isin(codes, rel_codes)
        ap = topk_average_precision(hits[:, :MAP_K], scores[:, :MAP_K])
        disc = 1.0 / np.log2(np.arange(2, NDCG_K + 2))  # binary gains: DCG is a sum of discounts
        ideal = np.cumsum(disc)[np.minimum([len(qrels[q]) for q in qids], NDCG_K) - 1]
        h10 = np.zeros((len(qids), NDCG_K))
        h10[:, : min(NDCG_K, hits.shape[1])] = hits[:, :NDCG_K]
        ndcg = (h10 @ disc) / ideal
        scores_ = {
            "map@100": 100 * float(ap.mean()),
            "ndcg@10": 100 * float(np.mean(ndcg)),
            "n_queries": len(qids),
            "corpus": len(dids),
        }
        return scores_, {"map@100": 100 * ap, "ndcg@10": 100 * ndcg}

    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        self.check_split(split)
        forums = self.available_forums(split)
        if not forums:
            raise DataError(f"Task {self.name!r}: no forum's files are present ({self.missing_files(split)[:3]} ...).")
        subsets, timing, per_query = {}, {}, {}
        metric = self.spec.main_metric
        for forum in forums:
            t0 = time.perf_counter()
            data = self.load_forum(forum, split)
            scores, idx, dids = self._retrieve(model, forum, data)
            subsets[forum], per = self.score_forum(scores, idx, dids, list(data.queries), data.qrels)
            if metric in per:
                per_query[forum] = (list(data.queries), per[metric])
            timing[forum] = round(time.perf_counter() - t0, 2)
        result = {m: float(np.mean([s[m] for s in subsets.values()])) for m in ("map@100", "ndcg@10")}
        absent = [f for f in self.forums() if f not in forums]
        notes = []
        if self.layout == "beir":
            notes.append("CQADupStack read from the BEIR layout: titles only, BEIR's test split (no dev split)")
        if self.param("pool"):
            notes.append(
                "LITE: each forum's queries capped and its corpus cut to a fixed pool (relevant documents + "
                "the top-k of several retrievers); never comparable with, or averaged with, the full task"
            )
        if absent:
            notes.append(
                f"CQADupStack over {len(forums)} of {len(self.forums())} forums (missing: {', '.join(absent)}): "
                "not comparable with the full 12-forum average"
            )
        return TaskResult(
            main_metric=self.spec.main_metric,
            scores=result,
            subsets=subsets,
            notes=notes,
            partial=bool(absent),
            details={
                "layout": self.layout,
                "forums": forums,
                "missing_forums": absent,
                "lite": bool(self.param("pool")),
                "retrieval": "search()"
                if callable(getattr(model.encoder, "search", None))
                else "cosine, exact faiss flat inner-product search (faiss.knn)",
                "aggregation": "macro mean over forums",
                "map@100": "sklearn AP over the top 100 (USEB)",
                "seconds_per_forum": timing,
            },
            items=query_items(per_query, metric) if len(per_query) == len(forums) else None,
        )

    # ---- unsupervised training sentences ------------------------------------------------------
    def own_sentences(self) -> list[str]:
        useb_train = self.param("useb_train", "useb/data-train/cqadupstack/unsupervised/train.txt")
        if self.data.exists(useb_train):
            lines = read_lines(self.file(useb_train))
            return list(dict.fromkeys(ln.strip() for ln in lines if ln.strip()))
        out: dict[str, None] = {}
        if self.layout == "useb":
            corpus, splits = self._useb()
            held = {(f, q) for s in splits.values() for f, qr in s.items() for q in qr}
            for forum in self.available_forums("test"):
                for d, t in corpus[forum].items():
                    if (forum, d) not in held and t.strip():
                        out.setdefault(t.strip())
            return list(out)
        for forum in self.available_forums("test"):
            data = self._load_full_forum(forum, "test")  # lite or not: the same corpus as the full task
            for t in data.pool.values():
                if t.strip():
                    out.setdefault(t.strip())
        return list(out)


class Repeats:
    """Identical texts in a corpus (97 of the 11 CQADupStack forums' 389K titles): searched once,
    then expanded back to every document holding them. Repeats inside an embed() call cost a
    gather of the whole block; searched once they cost nothing, and the search does less work."""

    def __init__(self, texts: list[str]):
        last = dict(zip(texts, range(len(texts))))  # text -> its last position; keys in first-seen order
        self.distinct = list(last)
        self.n = len(texts)
        self.at = np.fromiter(last.values(), dtype=np.int64, count=len(last))  # distinct row -> a document
        self.groups: dict[int, list[int]] = {}  # a repeated text's last position -> all its positions
        if len(last) < len(texts):
            early = np.ones(len(texts), dtype=bool)
            early[self.at] = False
            for p in np.flatnonzero(early).tolist():
                self.groups.setdefault(last[texts[p]], []).append(p)
            for lp, ps in self.groups.items():  # later documents first: see expand()
                ps.append(lp)
                ps.reverse()

    def expand(self, scores: np.ndarray, idx: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """A top-k over ``distinct`` (rows of it) as the top-k over the documents: each repeated
        text's documents at its score, the later document first (the order faiss's exact search
        over the documents gives equal scores), rows cut back to k. So the result is the search
        over every document, scores and order (test), except which of a repeated text's documents
        stay when the cut at k splits them: here the earlier ones; in a search over documents it
        depends on the heap's history, as in useb's torch.topk."""
        docs = np.where(idx >= 0, self.at[np.maximum(idx, 0)], -1)
        if not self.groups:
            return scores, docs
        width = min(k, self.n)
        out_s = np.full((len(idx), width), -np.inf, dtype=scores.dtype)
        out_i = np.full((len(idx), width), -1, dtype=np.int64)
        n = min(width, idx.shape[1])
        out_s[:, :n], out_i[:, :n] = scores[:, :n], docs[:, :n]
        keys = np.fromiter(self.groups, dtype=np.int64, count=len(self.groups))
        for r in np.flatnonzero(np.isin(docs, keys).any(axis=1)).tolist():
            row_d, row_s = [], []
            for d, v in zip(docs[r].tolist(), scores[r].tolist()):
                if d < 0:
                    break
                members = self.groups.get(d, (d,))
                room = width - len(row_d)
                if room <= 0:
                    break
                if len(members) > room:  # cut at k: the earlier documents stay
                    members = members[len(members) - room :]
                row_d.extend(members)
                row_s.extend([v] * len(members))
            out_i[r, : len(row_d)] = row_d
            out_s[r, : len(row_s)] = row_s
        return out_s, out_i


def _jsonl_fields(path, field: str) -> dict[str, str]:
    """{str(_id): row[field] or ""} of a BEIR jsonl(.gz) file. pyarrow's multi-threaded reader
    parses only the two columns; a file it cannot read that way (ids written as numbers, a bad line)
    goes through the line-by-line reader, which also names the bad line."""
    import pyarrow as pa
    import pyarrow.json as pj

    def line_by_line() -> dict[str, str]:
        return {str(r["_id"]): r.get(field) or "" for r in _jsonl(path)}

    schema = pa.schema([("_id", pa.string()), (field, pa.string())])
    try:  # decompressed by read_bytes (ISA-L: faster than pyarrow's zlib stream), parsed by pyarrow
        table = pj.read_json(
            pa.BufferReader(read_bytes(path)),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError, DataError):
        return line_by_line()
    ids = table.column("_id")
    if ids.null_count:
        return line_by_line()  # the line reader names the row without "_id"
    texts = table.column(field)
    if texts.null_count:  # a row without the field (or null) reads as ""
        return {i: t or "" for i, t in zip(ids.to_pylist(), texts.to_pylist())}
    return dict(zip(ids.to_pylist(), texts.to_pylist()))


def _json_file(path) -> Any:
    """A JSON file; invalid JSON is a ``DataError`` naming the file and line."""
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from e
    except RecursionError as e:
        raise DataError(f"{path}: JSON nested too deeply to read") from e


def _jsonl(path) -> list[dict[str, Any]]:
    out = []
    for n, line in enumerate(read_lines(path), 1):
        if line.strip():
            try:
                row = json.loads(line)
                if not isinstance(row, dict) or "_id" not in row:
                    raise ValueError("expected a JSON object with an '_id'")
                out.append(row)
            except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
                raise DataError(f"{path}:{n}: invalid JSON line: {e}") from e
    return out
