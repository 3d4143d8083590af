"""SentEval transfer classification (Conneau & Kiela 2018): frozen sentence vectors, a logistic
regression on top, SentEval's own model selection per task.

Protocols (as facebookresearch/SentEval runs them; the classifier lives in ``_classifier.py``):
  MR, CR, SUBJ, MPQA   10-fold cross-validation, L2 strength chosen by an inner 10-fold search
                       per outer fold (``InnerKFoldClassifier``); accuracy is the mean over folds.
  TREC, MRPC           k-fold search of L2 on train, then a model fit on all of train scores test
                       (``KFoldClassifier``); MRPC also reports F1 of the positive class.
  SST-2, SICK-E        L2 chosen on the official dev split, scored on test (``SplitClassifier``).
Pair tasks (MRPC, SICK-E) use SentEval's features ``[|u-v|, u*v]``; ``params.pair_features =
"uv_abs_prod"`` gives InferSent's ``[u, v, |u-v|, u*v]`` instead (recorded in the result).

Sentences are SentEval's tokens joined by single spaces (``line.split()``), read with the encoding
SentEval uses (latin-1 for MR/CR/SUBJ/MPQA/TREC, UTF-8 otherwise), and rows are kept in SentEval's
length-sorted order, because the order decides which fold a sentence lands in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchbench.core.errors import ConfigError, DataError
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters import _classifier as clf
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult
from benchbench.store.data import read_lines

# file names inside each task's folder (SentEval's data layout)
TASK_FILES: dict[str, list[str]] = {
    "MR": ["rt-polarity.pos", "rt-polarity.neg"],
    "CR": ["custrev.pos", "custrev.neg"],
    "SUBJ": ["subj.objective", "subj.subjective"],
    "MPQA": ["mpqa.pos", "mpqa.neg"],
    "SST2": ["sentiment-train", "sentiment-dev", "sentiment-test"],
    "TREC": ["train_5500.label", "TREC_10.label"],
    "MRPC": ["msr_paraphrase_train.txt", "msr_paraphrase_test.txt"],
    "SICKEntailment": ["SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"],
}
TREC_CLASSES = {"ABBR": 0, "DESC": 1, "ENTY": 2, "HUM": 3, "LOC": 4, "NUM": 5}
SICK_CLASSES = {"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2}


@dataclass
class TransferData:
    """One SentEval task, ready for a classifier: texts in SentEval's row order and labels.

    ``single``: sentences of single-sentence tasks per part; ``pairs``: (A, B) per part for pair
    tasks. Parts: ``all`` (cross-validated tasks), ``train``/``test`` (k-fold tasks),
    ``train``/``dev``/``test`` (split tasks)."""

    task: str
    protocol: str  # "innerkfold" | "kfold" | "split"
    nclasses: int
    single: dict[str, list[str]] = field(default_factory=dict)
    pairs: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)
    labels: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def parts(self) -> list[str]:
        return list(self.labels)

    def texts(self) -> list[str]:
        out: list[str] = []
        for p in self.parts:
            if self.single:
                out += self.single[p]
            else:
                out += self.pairs[p][0] + self.pairs[p][1]
        return out


def _tok_lines(path: Path, encoding: str) -> list[list[str]]:
    return [ln.split() for ln in read_lines(path, encoding)]


def _join(tokens: list[str]) -> str:
    return " ".join(tokens)


def _sorted_single(samples: list[list[str]], labels: list[int]) -> tuple[list[str], np.ndarray]:
    # SentEval sorts (stable) by (number of tokens, label) before embedding and keeps that order
    order = sorted(zip(samples, labels), key=lambda z: (len(z[0]), z[1]))
    return [_join(x) for x, _ in order], np.array([y for _, y in order], dtype=np.int64)


def _sorted_pairs(a: list[list[str]], b: list[list[str]], y: list[int]) -> tuple[list[str], list[str], np.ndarray]:
    order = sorted(zip(a, b, y), key=lambda z: (len(z[0]), len(z[1]), z[2]))
    return (
        [_join(x) for x, _, _ in order],
        [_join(x) for _, x, _ in order],
        np.array([z for _, _, z in order], dtype=np.int64),
    )


def _int(text: str, path: Path, line: int) -> int:
    """A class label; anything else is a ``DataError`` naming file and line."""
    try:
        return int(text)
    except ValueError as e:
        raise DataError(f"{path}:{line}: label {text.strip()[:40]!r} is not an integer.") from e


def load_binary(pos: Path, neg: Path) -> tuple[list[str], np.ndarray]:
    """MR/CR/SUBJ/MPQA: one sentence per line; the first file is label 1 (SUBJ: objective = 1)."""
    p, n = _tok_lines(pos, "latin-1"), _tok_lines(neg, "latin-1")
    return _sorted_single(p + n, [1] * len(p) + [0] * len(n))


def load_sst(path: Path, nclasses: int = 2) -> tuple[list[str], np.ndarray]:
    xs, ys = [], []
    for i, ln in enumerate(read_lines(path)):
        if nclasses == 2:
            parts = ln.strip().split("\t")
            if len(parts) != 2:
                raise DataError(f"{path}:{i + 1}: expected 'sentence<TAB>label', got {ln[:80]!r}")
            xs.append(parts[0].split())
            ys.append(_int(parts[1], path, i + 1))
        else:
            lab, sep, sent = ln.strip().partition(" ")
            if not sep:
                raise DataError(f"{path}:{i + 1}: expected 'label sentence', got {ln[:80]!r}")
            xs.append(sent.split())
            ys.append(_int(lab, path, i + 1))
    return _sorted_single(xs, ys)


def load_trec(path: Path) -> tuple[list[str], np.ndarray]:
    xs, ys = [], []
    for i, ln in enumerate(read_lines(path, "latin-1")):
        if not ln.strip():
            continue
        target, _, sample = ln.strip().partition(":")
        if target not in TREC_CLASSES:
            raise DataError(f"{path}:{i + 1}: unknown TREC coarse label {target!r}")
        _, sep, question = sample.partition(" ")
        if not sep:
            raise DataError(f"{path}:{i + 1}: expected 'COARSE:fine question', got {ln[:80]!r}")
        xs.append(question.split())
        ys.append(TREC_CLASSES[target])
    return _sorted_single(xs, ys)


def load_mrpc(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    a, b, y = [], [], []
    lines = read_lines(path)
    for i, ln in enumerate(lines[1:], start=2):  # header (with a BOM)
        c = ln.strip().split("\t")
        if len(c) != 5:  # more is as wrong as fewer: a stray TAB would cut a sentence short
            raise DataError(
                f"{path}:{i}: {len(c)} TAB fields, expected 5 (Quality, #1 ID, #2 ID, #1 String, #2 String)"
            )
        a.append(c[3].split())
        b.append(c[4].split())
        y.append(_int(c[0], path, i))
    return _sorted_pairs(a, b, y)


def load_sick(path: Path, column: int = 4) -> tuple[list[str], list[str], list]:
    """SICK txt: header, then pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment.
    Returns the raw column (label name or score string) unsorted; callers sort as SentEval does."""
    a, b, y = [], [], []
    lines = read_lines(path)
    for i, ln in enumerate(lines[1:], start=2):
        c = ln.strip().split("\t")
        if len(c) != 5:  # more is as wrong as fewer: a stray TAB would shift the score column
            raise DataError(
                f"{path}:{i}: {len(c)} TAB fields, expected 5 (pair_ID, sentence_A, sentence_B, relatedness_score, "
                f"entailment_judgment)"
            )
        a.append(c[1].split())
        b.append(c[2].split())
        y.append(c[column])
    return a, b, y


def load_sick_entailment(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    a, b, y = load_sick(path, 4)
    bad = next((i for i, v in enumerate(y) if v not in SICK_CLASSES), None)
    if bad is not None:  # y[i] is line i + 2 (after the header)
        raise DataError(f"{path}:{bad + 2}: unknown entailment label {y[bad][:40]!r}")
    labels = [SICK_CLASSES[s] for s in y]
    return _sorted_pairs(a, b, labels)


def load_task(task: str, folder: Path | dict[str, Path]) -> TransferData:
    """Read one SentEval task. ``folder`` is the task's directory, or a mapping file name -> path."""
    files = TASK_FILES.get(task)
    if files is None:
        raise ConfigError(f"Unknown SentEval task {task!r}; known: {sorted(TASK_FILES)}")
    f = (lambda n: folder[n]) if isinstance(folder, dict) else (lambda n: Path(folder) / n)
    if task in ("MR", "CR", "SUBJ", "MPQA"):
        x, y = load_binary(f(files[0]), f(files[1]))
        return TransferData(task, "innerkfold", 2, single={"all": x}, labels={"all": y})
    if task == "SST2":
        d = TransferData(task, "split", 2)
        for part, name in zip(("train", "dev", "test"), files):
            d.single[part], d.labels[part] = load_sst(f(name), 2)
        return d
    if task == "TREC":
        d = TransferData(task, "kfold", 6)
        for part, name in zip(("train", "test"), files):
            d.single[part], d.labels[part] = load_trec(f(name))
        return d
    if task == "MRPC":
        d = TransferData(task, "kfold", 2)
        for part, name in zip(("train", "test"), files):
            a, b, y = load_mrpc(f(name))
            d.pairs[part], d.labels[part] = (a, b), y
        return d
    d = TransferData(task, "split", 3)  # SICKEntailment
    for part, name in zip(("train", "dev", "test"), files):
        a, b, y = load_sick_entailment(f(name))
        d.pairs[part], d.labels[part] = (a, b), y
    return d


def pair_features(u: np.ndarray, v: np.ndarray, kind: str = "abs_prod") -> np.ndarray:
    """SentEval's MRPC/SICK features ``[|u-v|, u*v]`` ("abs_prod"), or InferSent's
    ``[u, v, |u-v|, u*v]`` ("uv_abs_prod")."""
    if kind == "abs_prod":
        return np.concatenate([np.abs(u - v), u * v], axis=1)
    if kind == "uv_abs_prod":
        return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)
    raise ConfigError(f"Unknown pair_features {kind!r}; use 'abs_prod' (SentEval) or 'uv_abs_prod' (InferSent).")


def featurize(data: TransferData, vecs: np.ndarray, pair_kind: str = "abs_prod") -> dict[str, np.ndarray]:
    """Split the vectors of ``data.texts()`` (same order) back into one feature matrix per part."""
    out, pos = {}, 0
    for p in data.parts:
        n = len(data.labels[p])
        if data.single:
            out[p] = vecs[pos : pos + n]
            pos += n
        else:
            u, v = vecs[pos : pos + n], vecs[pos + n : pos + 2 * n]
            pos += 2 * n
            out[p] = pair_features(u, v, pair_kind)
    return out


def run_protocol(
    data: TransferData, feats: dict[str, np.ndarray], setting: str | clf.Setting = "default", device: str | None = None
) -> dict:
    """SentEval's numbers for one task: ``devacc``, ``acc`` (and ``f1`` for MRPC), x100, rounded as SentEval rounds."""
    s = clf.get_setting(setting) if isinstance(setting, str) else setting
    if data.protocol == "innerkfold":
        out = clf.inner_kfold(feats["all"], data.labels["all"], data.nclasses, s, device=device)
    elif data.protocol == "kfold":
        out = clf.kfold(
            feats["train"], data.labels["train"], feats["test"], data.labels["test"], data.nclasses, s, device=device
        )
        if data.task == "MRPC":
            from sklearn.metrics import f1_score

            out["f1"] = round(100 * float(f1_score(data.labels["test"], out.pop("yhat"))), 2)
    else:
        out = clf.split(
            feats["train"],
            data.labels["train"],
            feats["dev"],
            data.labels["dev"],
            feats["test"],
            data.labels["test"],
            data.nclasses,
            s,
            device=device,
        )
    out.pop("yhat", None)
    return out


class SentEvalAdapter(TaskAdapter):
    """params: ``task`` (SentEval name: MR, CR, SUBJ, MPQA, SST2, TREC, MRPC, SICKEntailment), ``dir``
    (the task folder under the data dir), ``setting`` ("default" | "prototyping"), ``pair_features``,
    ``classifier_overrides`` (fields of ``_classifier.Setting`` to change; the setting is then named
    "<setting>+custom" in the record, since its numbers are no longer SentEval's)."""

    kind = "senteval"

    def _task(self) -> str:
        t = self.param("task")
        if t not in TASK_FILES:
            raise ConfigError(
                f"Task {self.name!r} (spec {self.spec.source}): params.task must be one of {sorted(TASK_FILES)}, got {t!r}."
            )
        return t

    def files_for(self, split: str) -> list[str]:
        d = self.param("dir", "")
        return [f"{d}/{n}" for n in TASK_FILES[self._task()]]

    def load(self) -> TransferData:
        return load_task(self._task(), {n: self.file(f"{self.param('dir', '')}/{n}") for n in TASK_FILES[self._task()]})

    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        self.check_split(split)
        data = self.load()
        setting = clf.get_setting(self.param("setting", "default"))
        overrides = self.param("classifier_overrides") or {}
        if overrides:
            try:
                setting = clf.with_overrides(setting, name=f"{setting.name}+custom", **overrides)
            except TypeError as e:
                raise ConfigError(
                    f"Task {self.name!r} (spec {self.spec.source}): bad params.classifier_overrides {overrides}: {e}"
                ) from e
        pair_kind = self.param("pair_features", "abs_prod")
        vecs = model.embed(data.texts(), desc=self.name)
        feats = featurize(data, vecs, pair_kind)
        t0 = time.perf_counter()
        out = run_protocol(data, feats, setting, device=self.param("device"))
        seconds = time.perf_counter() - t0
        scores = {"acc": out["acc"], "devacc": out["devacc"]}
        if "f1" in out:
            scores["f1"] = out["f1"]
        details = {
            "setting": setting.name,
            "classifier": setting.describe(),
            "protocol": data.protocol,
            "senteval_task": data.task,
            "nclasses": data.nclasses,
            "classifier_seconds": round(seconds, 2),
            "n": {p: int(len(y)) for p, y in data.labels.items()},
            "selected_l2": out.get("l2"),
            "models": out.get("models"),
        }
        if data.pairs:
            details["pair_features"] = "[|u-v|, u*v]" if pair_kind == "abs_prod" else "[u, v, |u-v|, u*v]"
        return TaskResult(main_metric=self.spec.main_metric, scores=scores, details=details)

    def own_sentences(self) -> list[str]:
        return list(dict.fromkeys(self.load().texts()))
