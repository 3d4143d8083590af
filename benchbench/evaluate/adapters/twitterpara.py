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
pairs or in the held-out pairs below. Training never reads labels (``sim.txt``).

The ``heldout`` split is benchbench's, not USEB's: a fixed draw of TURL *training* pairs (every pair
of :data:`HELDOUT_SOURCES` source tweets, labels from ``sim.txt``, 0/1), scored as AP of the cosine
against the label and Spearman. Why: a study's learning curve needs a labelled TwitterPara split that
is neither the test split (reading test during training would leak) nor text the method trains on;
TwitterPara has neither a dev split nor, before this, such a split. Its tweets are removed from the
training sentences above and from the in-domain supervised stage's pairs (``train/setups.py``), so
no setup ever trains on them (with USEB's own training file present, that file is used unedited, as
the paper's exact text, and the held-out tweets are not removed from it). Drawn by source tweet (TURL
pairs one source tweet with ~12 replies), not by pair, so no held-out tweet has a sibling pair in
training. It is never a stand-in for test and never USEB's number.
"""

from __future__ import annotations

import re

import numpy as np

from benchbench.core.errors import DataError
from benchbench.encode.encoding import Embedder
from benchbench.evaluate import metrics
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult
from benchbench.evaluate.adapters.ranking import pair_scores
from benchbench.evaluate.item_scores import pair_items
from benchbench.store.data import read_lines

Pairs = tuple[list[str], list[str], np.ndarray]  # s1, s2, integer labels

# The held-out split: every TURL train pair of this many source tweets, drawn by this seed (fixed: the
# split is part of the task definition, tasks/useb.toml's version covers it). 150 of 3,553 source tweets
# give ~1,800 pairs (~26% paraphrases): an AP with a standard error of about a point, cheap to score every
# few steps. Changing either is a new task version.
HELDOUT_SOURCES = 150
HELDOUT_SEED = 2017


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


_TURL_VOTES = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*\)")


def _turl_votes(field: str) -> int:
    """``(n,6)`` -> n, the annotators of 6 who said paraphrase: the published file's one label form. Matched,
    not ``ast.literal_eval``-ed: a dict or a string in that field is a bad row (DataError), not a KeyError."""
    m = _TURL_VOTES.fullmatch(field.strip())
    if not m:
        raise ValueError(f"not (n,6): {field[:40]!r}")
    return int(m.group(1))


def read_turl(path) -> Pairs:
    # 10 rows of the published file carry an extra empty field before the url
    return _read_tsv_pairs(path, (0, 1), lambda c: _turl_votes(c[2]), "'s1<TAB>s2<TAB>(n,6)<TAB>url'", 5)


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
        if split == "heldout":
            t = self._train_dir()
            return [f"{t}/a.toks", f"{t}/b.toks", f"{t}/sim.txt"]
        d = self._dir()
        return [f"{d}/Twitter_URL_Corpus_test.txt", f"{d}/test.data", f"{d}/test.label"]

    def _train_dir(self) -> str:
        return self.param("train_dir", f"{self._dir()}/train")

    def _test_sentences(self) -> set[str]:
        return {s.lower() for s1, s2, _ in self._load_test().values() for s in s1 + s2}

    def turl_train(self) -> Pairs:
        """TURL's training pairs (``a.toks``, ``b.toks``, 0/1 ``sim.txt``), stripped, minus pairs with a
        test tweet; a line-count mismatch between the three files is a DataError naming them."""
        t = self._train_dir()
        a, b, y = (read_lines(self.file(f"{t}/{n}")) for n in ("a.toks", "b.toks", "sim.txt"))
        if not len(a) == len(b) == len(y):
            raise DataError(
                f"{t}: a.toks, b.toks and sim.txt have {len(a)}, {len(b)} and {len(y)} lines; one pair per line in each."
            )
        test = self._test_sentences()
        s1, s2, lab = [], [], []
        for n, (x, z, v) in enumerate(zip(a, b, y), 1):
            x, z = x.strip(), z.strip()
            if not x or not z or x.lower() in test or z.lower() in test:
                continue
            if v.strip() not in ("0", "1"):
                raise DataError(f"{t}/sim.txt:{n}: expected a 0/1 label, got {v[:40]!r}.")
            s1.append(x), s2.append(z), lab.append(int(v))
        return s1, s2, np.asarray(lab, dtype=np.int64)

    def heldout(self) -> Pairs:
        """The held-out pairs: every TURL train pair whose source tweet is among :data:`HELDOUT_SOURCES`
        drawn (seed :data:`HELDOUT_SEED`) from the sorted distinct source tweets. A train set too small to
        spare them (under ten times as many sources: a test fixture) holds out a tenth; the task param
        ``heldout_sources`` sets the number exactly (at most half)."""
        s1, s2, y = self.turl_train()
        sources = sorted(set(s1))
        n = self._heldout_count(len(sources))
        rng = np.random.default_rng(HELDOUT_SEED)
        chosen = {sources[i] for i in rng.choice(len(sources), size=n, replace=False)} if n else set()
        keep = [i for i, x in enumerate(s1) if x in chosen]
        return [s1[i] for i in keep], [s2[i] for i in keep], y[keep]

    def _heldout_count(self, sources: int) -> int:
        asked = self.spec.params.get("heldout_sources")
        if asked is None:
            return min(HELDOUT_SOURCES, sources // 10)
        if not 0 < int(asked) <= sources // 2:
            raise DataError(
                f"{self._train_dir()}: the heldout split of task {self.name!r} takes {asked} source tweets, but "
                f"TURL train has {sources} (at most half may be held out); check the train files or heldout_sources."
            )
        return int(asked)

    def heldout_sentences(self) -> set[str]:
        """The held-out pairs' tweets, lower-cased: no training text or supervised pair may contain one."""
        a, b, _ = self.heldout()
        return {s.lower() for s in a + b}

    def load(self, split: str) -> dict[str, Pairs]:
        self.check_split(split)
        if split != "heldout":
            return self._load_test()
        held = self.heldout()
        if not held[0]:
            raise DataError(
                f"{self._train_dir()}: TURL train is too small to hold out pairs (fewer than 10 source tweets)."
            )
        return {"heldout": held}

    def _load_test(self) -> dict[str, Pairs]:
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
            if name == "heldout":  # TURL train labels are already 0/1 (n >= 4 of 6 is 1; n = 3 was dropped)
                y = np.where(y == 1, 6, 0)  # onto the 0-6 annotator scale the AP rule (> 3 positive) reads
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
            notes=["benchbench's held-out TURL train pairs (learning curves), not USEB's TwitterPara score"]
            if split == "heldout"
            else [],
            details={
                "similarity": how,
                "aggregation": "held-out TURL train pairs" if split == "heldout" else "mean of TURL and PIT-2015",
                "ap_labels": "label 3 dropped, > 3 paraphrase",
                "spearman_gold": "label x 20, all pairs",
            },
            items=pair_items(per_pair, "paraphrase_ap"),
        )

    def train_pairs(self) -> list[tuple[str, str]] | None:
        """Trans-Encoder (transductive): the test pairs of TURL and PIT, labels never read."""
        return list(dict.fromkeys((x, y) for s1, s2, _ in self._load_test().values() for x, y in zip(s1, s2)))

    # ---- unsupervised training sentences ------------------------------------------------------
    def own_sentences(self) -> list[str]:
        useb_train = self.param("useb_train", "useb/data-train/twitter/unsupervised/train.txt")
        if self.data.exists(useb_train):  # the paper's exact training text, never edited (see the module note)
            lines = read_lines(self.file(useb_train))
            return list(dict.fromkeys(ln.strip() for ln in lines if ln.strip()))
        d = self._train_dir()
        test = self._test_sentences() | self.heldout_sentences()
        out: dict[str, None] = {}
        for name in ("a.toks", "b.toks"):
            for ln in read_lines(self.file(f"{d}/{name}")):
                s = ln.strip()
                if s and s.lower() not in test:
                    out.setdefault(s)
        return list(out)
