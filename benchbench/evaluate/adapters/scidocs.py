"""USEB SciDocs: rank each query paper's candidate papers (Cohan et al. 2020): cite, co-cite,
co-read, co-view; up to 5 relevant among 30 candidates per query.

Protocol (USEB, useb/evaluators/scidocs.py), kept exactly:

* Titles only (a ``None`` title counts as empty). A query with an empty title is skipped; a
  candidate with an empty title is left out of the ranking (but stays in the qrels, so it still
  counts in the AP denominator).
* Cosine similarity between the query's and each candidate's title vectors.
* trec_eval ``map`` and ``ndcg`` per query (as pytrec_eval computes them; see
  ``ranking.trec_average_precision``/``trec_ndcg``: ties broken by document id, AP over all relevant
  judged documents), averaged over the evaluated queries of each sub-task; sub-tasks averaged
  (``map`` = USEB's ``map_scidocs_cosine_avg``, the main score).

Layouts (the first complete one is used):

* ``useb``: USEB's ``data-eval/scidocs/data.json``: {"corpus": {paper id: {"title": ...}},
  "valid"|"test": {sub-task: {query id: {paper id: relevance}}}}.
* ``allenai``: allenai/scidocs' released files: ``<dir>/{cite,cocite,coread,coview}/{val,test}.qrel``
  (``query-id 0 paper-id relevance``, space separated) and ``<dir>/paper_metadata_view_cite_read.json``
  ({paper id: {"paper_id", "title", "abstract", ...}}).

Training sentences (``own_sentences``): USEB's ``data-train/scidocs/unsupervised/train.txt`` when
present; otherwise the titles of every paper in the metadata except the dev/test queries and their
relevant (positive) candidates, so no gold pair is trained on.
"""

from __future__ import annotations

import json

import numpy as np

from benchbench.core.errors import DataError
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult
from benchbench.evaluate.adapters.ranking import pair_scores, pick_layout, trec_average_precision, trec_ndcg, trec_order
from benchbench.store.data import read_lines, read_text

SUBTASKS = ["cite", "cocite", "coread", "coview"]
Qrels = dict[str, dict[str, int]]  # query id -> {paper id: relevance}


def read_qrel(path) -> Qrels:
    out: Qrels = {}
    for n, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) != 4 or not cols[3].lstrip("-").isdigit():
            raise DataError(
                f"{path}:{n}: expected 'query-id 0 paper-id relevance' (integer relevance), got {line[:80]!r}"
            )
        out.setdefault(cols[0], {})[cols[2]] = int(cols[3])
    return out


class SciDocsAdapter(TaskAdapter):
    kind = "scidocs"

    def __init__(self, spec, data):
        super().__init__(spec, data)
        self.layout = pick_layout(
            self, {"useb": self._useb_files(), "allenai": self._allenai_files(None)}, default="allenai"
        )

    def subtasks(self) -> list[str]:
        return list(self.param("subtasks", SUBTASKS))

    def _useb_files(self) -> list[str]:
        return [f"{self.param('useb_dir', 'useb/data-eval/scidocs')}/data.json"]

    def _allenai_files(self, split: str | None) -> list[str]:
        d = self.param("dir", "scidocs")
        names = ["val", "test"] if split is None else [{"dev": "val"}.get(split, split)]
        return [f"{d}/paper_metadata_view_cite_read.json"] + [
            f"{d}/{t}/{s}.qrel" for t in self.subtasks() for s in names
        ]

    def files_for(self, split: str) -> list[str]:
        return self._useb_files() if self.layout == "useb" else self._allenai_files(split)

    # ---- reading ------------------------------------------------------------------------------
    def _json(self, rel: str):
        try:
            return json.loads(read_text(self.file(rel)))
        except json.JSONDecodeError as e:
            raise DataError(f"{self.file(rel)}:{e.lineno}: invalid JSON: {e.msg}") from e
        except RecursionError as e:
            raise DataError(f"{self.file(rel)}: JSON nested too deeply to read") from e

    def corpus(self) -> dict[str, str]:
        """paper id -> title ('' when missing or None)."""
        if not hasattr(self, "_corpus"):
            raw = (
                self._json(self._useb_files()[0])["corpus"]
                if self.layout == "useb"
                else self._json(self._allenai_files(None)[0])
            )
            self._corpus = {pid: ((meta or {}).get("title") or "") for pid, meta in raw.items()}
        return self._corpus

    def load(self, split: str) -> dict[str, Qrels]:
        self.check_split(split)
        if self.layout == "useb":
            key = {"dev": "valid"}.get(split, split)
            data = self._json(self._useb_files()[0])
            if key not in data:
                raise DataError(f"{self._useb_files()[0]}: no {key!r} entry (expected 'valid' and 'test').")
            return {
                t: {q: {d: int(r) for d, r in docs.items()} for q, docs in qr.items()} for t, qr in data[key].items()
            }
        d, s = self.param("dir", "scidocs"), {"dev": "val"}.get(split, split)
        return {t: read_qrel(self.file(f"{d}/{t}/{s}.qrel")) for t in self.subtasks()}

    # ---- scoring ------------------------------------------------------------------------------
    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        subtasks = self.load(split)
        titles = self.corpus()
        title = lambda pid: titles.get(pid, "")  # noqa: E731  (USEB tests the raw title, encodes it stripped)
        # one (query, candidate) list over all sub-tasks: one encoding pass, one scorer call
        plan: list[tuple[str, str, list[str]]] = []
        for t, qrels in subtasks.items():
            for q, docs in qrels.items():
                cands = [d for d in docs if title(d)]
                if title(q) and cands:
                    plan.append((t, q, cands))
        a = [title(q).strip() for _, q, cands in plan for _ in cands]
        b = [title(d).strip() for _, _, cands in plan for d in cands]
        scores, how = pair_scores(model, a, b, desc=self.name)
        per: dict[str, dict[str, list[float]]] = {t: {"map": [], "ndcg": []} for t in subtasks}
        pos = 0
        for t, q, cands in plan:
            s = scores[pos : pos + len(cands)]
            pos += len(cands)
            judged = subtasks[t][q]
            ranked = [judged[cands[i]] for i in trec_order(cands, s)]
            per[t]["map"].append(trec_average_precision(ranked, sum(1 for r in judged.values() if r >= 1)))
            per[t]["ndcg"].append(trec_ndcg(ranked, judged.values()))
        subsets = {
            t: {
                "map": 100 * float(np.mean(v["map"])) if v["map"] else 0.0,
                "ndcg": 100 * float(np.mean(v["ndcg"])) if v["ndcg"] else 0.0,
                "n_queries": len(v["map"]),
                "n_skipped": len(subtasks[t]) - len(v["map"]),
            }
            for t, v in per.items()
        }
        scores_out = {
            "map": float(np.mean([s["map"] for s in subsets.values()])),
            "ndcg": float(np.mean([s["ndcg"] for s in subsets.values()])),
        }
        for t, s in subsets.items():
            scores_out[f"map_{t}"] = s["map"]
        absent = [t for t in self.subtasks() if t not in subtasks]
        return TaskResult(
            main_metric=self.spec.main_metric,
            scores=scores_out,
            subsets=subsets,
            partial=bool(absent),
            notes=[f"SciDocs sub-tasks missing: {', '.join(absent)}"] if absent else [],
            details={
                "layout": self.layout,
                "similarity": how,
                "text": "titles only",
                "metric": "trec_eval map/ndcg per query, mean per sub-task, sub-tasks averaged",
            },
        )

    def own_sentences(self) -> list[str]:
        useb_train = self.param("useb_train", "useb/data-train/scidocs/unsupervised/train.txt")
        if self.data.exists(useb_train):
            lines = read_lines(self.file(useb_train))
            return list(dict.fromkeys(ln.strip() for ln in lines if ln.strip()))
        held = set()
        for split in ("dev", "test"):
            if split in self.spec.splits:
                for qrels in self.load(split).values():
                    for q, docs in qrels.items():
                        held.add(q)
                        held.update(d for d, r in docs.items() if r >= 1)
        return list(dict.fromkeys(t.strip() for p, t in self.corpus().items() if p not in held and t.strip()))
