"""USEB TwitterPara: paraphrase identification on tweets, TURL (Lan et al. 2017) and PIT-2015.

USEB's conventions (useb/evaluators/twitterpara.py), kept exactly:

* TURL ``Twitter_URL_Corpus_test.txt``: ``s1 <TAB> s2 <TAB> (n,6) <TAB> url`` (some rows carry an
  extra empty field before the url); the label is n, the number of the 6 annotators who said
  "paraphrase". PIT ``test.data``: columns 3 and 4 are the tweets, column 5 the expert label 0..5.
* AP (scikit-learn ``average_precision_score``) of the cosine against "is paraphrase": label 3
  (debatable) DROPPED, label > 3 positive, < 3 negative.
* Spearman of the cosine against label x 20 over ALL pairs (label 3 included).
* ``ap`` (the main score) and ``spearman`` are the means of the two datasets' values.
* Texts are stripped of surrounding whitespace (USEB strips every text before encoding).

There is NO dev split (the data has none; USEB's evaluator silently evaluates on test when asked for
"valid"). Here the spec lists only ``test``: an explicit dev request is a ConfigError, and a suite
run reports the task as having no dev split; it is never replaced by test.

Training sentences (``own_sentences``): USEB's own ``data-train/twitter/unsupervised/train.txt``
when present; otherwise the distinct tweets of the TURL *training* set (``train/a.toks`` and
``train/b.toks``, castorini's lower-cased copy), minus any sentence that also occurs in the test
pairs. Labels (``sim.txt``) are never read.
"""

from __future__ import annotations

import ast

import numpy as np

from benchbench.core.errors import DataError
from benchbench.encode.encoding import Embedder
from benchbench.evaluate import metrics
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult
from benchbench.evaluate.adapters.ranking import pair_scores
from benchbench.evaluate.item_scores import pair_items
from benchbench.store.data import read_lines

Pairs = tuple[list[str], list[str], np.ndarray]  # s1, s2, integer labels


def _read_tsv_pairs(path, columns: tuple[int, int], label, expected: str, most: int) -> Pairs:
    """Rows of TAB-separated ``path`` -> (s1, s2, labels); ``label(cols)`` parses one row's label. A row
    with more than ``most`` fields is an error: a stray TAB would shift the columns read."""
    a, b, y = [], [], []
    for n, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        cols = line.strip().split("\t")
        if len(cols) > most:
            raise DataError(
                f"{path}:{n}: {len(cols)} TAB fields, at most {most} expected: {expected}, got {line[:100]!r}"
            )
        try:
            y.append(int(label(cols)))
            a.append(cols[columns[0]].strip())
            b.append(cols[columns[1]].strip())
        except (IndexError, ValueError, SyntaxError, TypeError, RecursionError, MemoryError) as e:
            raise DataError(f"{path}:{n}: expected {expected}, got {line[:100]!r}") from e
    return a, b, np.asarray(y, dtype=np.int64)


def read_turl(path) -> Pairs:
    # "(n,6)": n of 6 annotators said paraphrase
    # 10 rows of the published file carry an extra empty field before the url
    return _read_tsv_pairs(path, (0, 1), lambda c: ast.literal_eval(c[2])[0], "'s1<TAB>s2<TAB>(n,6)<TAB>url'", 5)


def read_pit(path) -> Pairs:
    # expert label 0..5 (test.data of SemEval-PIT2015)
    return _read_tsv_pairs(
        path,
        (2, 3),
        lambda c: int(c[4]),
        "PIT test.data columns (topic id, topic, s1, s2, label 0-5, s1 tags, s2 tags)",
        7,
    )


class TwitterParaAdapter(TaskAdapter):
    kind = "twitterpara"

    def _dir(self) -> str:
        return self.param("dir", "useb/twitterpara")

    def files_for(self, split: str) -> list[str]:
        d = self._dir()
        return [f"{d}/Twitter_URL_Corpus_test.txt", f"{d}/test.data", f"{d}/test.label"]

    def load(self, split: str) -> dict[str, Pairs]:
        self.check_split(split)
        d = self._dir()
        self.file(f"{d}/test.label")  # part of the published layout (USEB requires it); the labels used are test.data's
        return {
            "turl": read_turl(self.file(f"{d}/Twitter_URL_Corpus_test.txt")),
            "pit": read_pit(self.file(f"{d}/test.data")),
        }

    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        data = self.load(split)
        a = [s for s1, _, _ in data.values() for s in s1]
        b = [s for _, s2, _ in data.values() for s in s2]
        scores, how = pair_scores(model, a, b, desc=self.name)
        subsets, per_pair, pos = {}, {}, 0
        for name, (s1, _, y) in data.items():
            pred = scores[pos : pos + len(s1)]
            pos += len(s1)
            per_pair[name] = (pred, y)
            subsets[name] = {
                "ap": 100 * metrics.paraphrase_ap(y, pred),
                "spearman": 100 * metrics.spearman(pred, y * 20),
                "n": len(y),
                "n_ap": int((y != 3).sum()),
            }
        result = {
            "ap": float(np.mean([s["ap"] for s in subsets.values()])),
            "spearman": float(np.mean([s["spearman"] for s in subsets.values()])),
        }
        for name, s in subsets.items():
            result[f"ap_{name}"] = s["ap"]
            result[f"spearman_{name}"] = s["spearman"]
        return TaskResult(
            main_metric=self.spec.main_metric,
            scores=result,
            subsets=subsets,
            notes=["TwitterPara has test only: no dev split exists (never replaced by test)"]
            if split != "test"
            else [],
            details={
                "similarity": how,
                "aggregation": "mean of TURL and PIT-2015",
                "ap_labels": "label 3 dropped, > 3 paraphrase",
                "spearman_gold": "label x 20, all pairs",
            },
            items=pair_items(per_pair, "paraphrase_ap"),
        )

    def train_pairs(self) -> list[tuple[str, str]] | None:
        """Trans-Encoder (transductive): the test pairs of TURL and PIT, labels never read."""
        return list(dict.fromkeys((x, y) for s1, s2, _ in self.load("test").values() for x, y in zip(s1, s2)))

    # ---- unsupervised training sentences ------------------------------------------------------
    def own_sentences(self) -> list[str]:
        useb_train = self.param("useb_train", "useb/data-train/twitter/unsupervised/train.txt")
        if self.data.exists(useb_train):
            lines = read_lines(self.file(useb_train))
            return list(dict.fromkeys(ln.strip() for ln in lines if ln.strip()))
        d = self.param("train_dir", f"{self._dir()}/train")
        test = {s.lower() for s1, s2, _ in self.load("test").values() for s in s1 + s2}
        out: dict[str, None] = {}
        for name in ("a.toks", "b.toks"):
            for ln in read_lines(self.file(f"{d}/{name}")):
                s = ln.strip()
                if s and s.lower() not in test:
                    out.setdefault(s)
        return list(out)
