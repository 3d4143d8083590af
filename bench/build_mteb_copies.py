"""Build MTEB-format local copies of MTEB tasks from the offline benchmark files (``../shared/data``),
so that ``benchbench run --tasks mteb:NAME`` and ``mteb``'s own evaluator read the same rows offline.

Each copy is a dataset folder in the Hugging Face repository layout (``README.md`` with a ``configs``
block, one JSONL file per config and split) at ``<out>/hf/<dataset id>/<revision>/``: the place
``benchbench.store.hf`` looks for a pinned dataset under the data dir or the data cache. The revision
folder is MTEB's pinned revision, but the rows are rebuilt from the offline files, so a copy is NOT
byte-identical to the hub's: its fingerprint is what benchbench records, and its scores are comparable
with mteb's on the same copy (``bench/mteb_equality.py``), not with published MTEB numbers where the
rows differ (the CQADupStack copy is title-only; MTEB's corpus has title and body).

    python bench/build_mteb_copies.py --data ../shared/data            # into ~/.cache/benchbench/data
    python bench/build_mteb_copies.py --data ../shared/data --out /tmp/mteb-copies
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
from pathlib import Path

# MTEB task -> (dataset id, revision), as the installed mteb 2.x declares them (checked at build time)
TASKS = {
    "STSBenchmark": ("mteb/stsbenchmark-sts", "b0fddb56ed78048fa8b90373c8a3cfc37b684831"),
    "SICK-R": ("mteb/sickr-sts", "20a6d6f312dd54037fe07a32d58e5e168867909d"),
    "STS12": ("mteb/sts12-sts", "a0d554a64d88156834ff5ae9920b964011b16384"),
    "TwitterURLCorpus": ("mteb/twitterurlcorpus-pairclassification", "8b6510b0b1fa4e4c4f879467980e9be563ec1cdf"),
    "CQADupstackAndroidRetrieval": ("mteb/CQADupstackAndroidRetrieval", "9be4c0e46342e8e3aff577a89b9a1ec9bc6b4af3"),
}


def write_copy(root: Path, dataset: str, revision: str, configs: dict[str, dict[str, list[dict]]]) -> Path:
    """``configs``: config -> split -> rows. Written as JSONL plus the README ``configs`` block that
    ``datasets.load_dataset(folder, config, split=...)`` reads."""
    d = root / "hf" / dataset / revision
    d.mkdir(parents=True, exist_ok=True)
    yaml = ["---", "configs:"]
    for config, splits in configs.items():
        yaml += [f"- config_name: {config}", "  data_files:"]
        for split, rows in splits.items():
            rel = f"{config}/{split}.jsonl"
            (d / config).mkdir(exist_ok=True)
            with open(d / rel, "w", encoding="utf-8") as f:
                for r in rows:
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
            yaml += [f"  - split: {split}", f"    path: {rel}"]
    (d / "README.md").write_text("\n".join([*yaml, "---", f"Local copy of {dataset}@{revision} (benchbench)", ""]))
    return d


def _tsv(path: Path, header: bool = False) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").split("\n")
    rows = [ln.rstrip("\r").split("\t") for ln in lines if ln.strip()]
    return rows[1:] if header else rows


def stsb(data: Path) -> dict:
    rows = _tsv(data / "sts/STSBenchmark/sts-test.csv")
    return {"default": {"test": [{"sentence1": r[5], "sentence2": r[6], "score": float(r[4])} for r in rows]}}


def sickr(data: Path) -> dict:
    """MTEB's SICK-R 'test' split is the whole SICK set (train + trial + test, 9,927 pairs), not the
    SemEval-2014 test split (4,927) that the literature's SICK-R (benchbench's ``sickr``) uses."""
    rows = []
    for f in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        rows += [
            {"sentence1": r[1], "sentence2": r[2], "score": float(r[3])} for r in _tsv(data / "sts/SICK" / f, True)
        ]
    return {"default": {"test": rows}}


def sts12(data: Path) -> dict:
    rows = []
    d = data / "sts/STS12"
    for sub in ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"):
        pairs = _tsv(d / f"STS.input.{sub}.txt")
        gold = (d / f"STS.gs.{sub}.txt").read_text(encoding="utf-8").split("\n")
        rows += [
            {"sentence1": p[0], "sentence2": p[1], "score": float(g)}
            for p, g in zip(pairs, gold, strict=False)
            if g.strip()
        ]
    return {"default": {"test": rows}}


def twitter_url(data: Path) -> dict:
    """TURL test, Lan et al.'s labels: n >= 4 of 6 annotators paraphrase, n <= 2 not, n = 3 dropped."""
    rows = []
    for r in _tsv(data / "useb/twitterpara/Twitter_URL_Corpus_test.txt"):
        n = int(r[2].strip("()").split(",")[0])
        if n != 3:
            rows.append({"sent1": r[0].strip(), "sent2": r[1].strip(), "labels": int(n >= 4)})
    return {"default": {"test": rows}}


def cqadupstack(data: Path, forum: str = "android") -> dict:
    d = data / "beir/cqadupstack" / forum

    def jsonl(p):
        with gzip.open(p, "rt", encoding="utf-8") as f:
            return [json.loads(ln) for ln in f if ln.strip()]

    corpus = [{"id": r["_id"], "title": r["title"], "text": r["text"]} for r in jsonl(d / "corpus.jsonl.gz")]
    queries = [{"id": r["_id"], "text": r["text"]} for r in jsonl(d / "queries.jsonl.gz")]
    qrels = [{"query-id": r[0], "corpus-id": r[1], "score": int(r[2])} for r in _tsv(d / "qrels/test.tsv", True)]
    return {"corpus": {"test": corpus}, "queries": {"test": queries}, "default": {"test": qrels}}


BUILDERS = {
    "STSBenchmark": stsb,
    "SICK-R": sickr,
    "STS12": sts12,
    "TwitterURLCorpus": twitter_url,
    "CQADupstackAndroidRetrieval": cqadupstack,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.environ.get("BENCHBENCH_DATA", "../shared/data"))
    ap.add_argument("--out", default=None, help="default: benchbench's data cache (~/.cache/benchbench/data)")
    ap.add_argument("--tasks", default=",".join(TASKS))
    args = ap.parse_args()
    from benchbench.core.paths import default_data_cache

    out = Path(args.out) if args.out else default_data_cache()
    try:
        import mteb
    except ImportError:
        mteb = None
    for name in args.tasks.split(","):
        dataset, revision = TASKS[name]
        if mteb is not None:  # the pinned id and revision must still be the installed mteb's
            meta = mteb.get_task(name).metadata.dataset
            assert (meta["path"], meta["revision"]) == (dataset, revision), (name, meta)
        d = write_copy(out, dataset, revision, BUILDERS[name](Path(args.data)))
        print(f"{name}: {d}")


if __name__ == "__main__":
    main()
