"""Fidelity and speed of benchbench's USEB evaluators against the official ``useb`` package (PyPI).

The SAME vectors go to both: benchbench embeds every text once (through its embedding cache: for
all-MiniLM-L6-v2 the CQADupStack vectors are already cached), the table of (text -> vector) is saved,
and each evaluator then runs in its own fresh subprocess reading vectors only from that table:
benchbench's adapters through an ``Embedder`` over a lookup encoder, useb's evaluators through a
``semb_fn`` over the same lookup. Our data are converted to useb's ``data-eval`` layout in a
temporary folder. Printed: every metric from both with its difference (must be <= 0.01 points),
and per dataset the evaluation wall time (median of --repeats alternated runs) and peak resident memory of each (a fresh process each, so
the peaks are comparable; "+MB" is the growth during evaluation, the vectors excluded). The time
is shown twice: in full, and without the seconds spent inside the shared lookup encoder (the
stand-in for "precomputed embeddings", the same table gather on both sides), which leaves what the
evaluators themselves cost: reading the data, search, scoring. The CPU seconds (every thread of the
process) are shown too: on a shared machine the wall time follows the other processes' load, and the
load average at the start and end is printed with the table.

useb's SciDocs evaluator imports ``pytrec_eval``; the real one is used when importable
(``pip install pytrec-eval-terrier`` provides it with prebuilt wheels). Without it a stub that
raises is registered so the other evaluators import, and the SciDocs comparison is skipped.

    BENCHBENCH_DATA=/work/shared/data python bench/useb_fidelity.py [--tasks twitterpara,cqadupstack,askubuntu,scidocs]

TwitterPara and CQADupStack use the real data (CQADupStack: the forums whose vectors are all in the
cache, unless --encode-missing); AskUbuntu and SciDocs use the fixtures in tests/fixtures/useb
(their real text is not available offline).

``--vectors bow`` replaces the model by a bag of random word vectors (d=384, all-MiniLM-L6-v2's size,
so the search does the same arithmetic; seconds to make, no cache needed): every CQADupStack forum
is compared at full size even where no model's vectors are cached. The scores are lexical, not a
model's, so only the agreement and the timings mean anything, not the numbers themselves:

    BENCHBENCH_DATA=/work/shared/data python bench/useb_fidelity.py --tasks cqadupstack --vectors bow

``--search faiss,int8-probe`` runs benchbench's CQADupStack evaluator twice per repeat, side by side
with useb's: once with its own faiss search, once with ``bench/int8_search_probe.py``'s exact int8
two-stage search patched in (a probe, not adopted; see leaderboards/speed/cqadupstack_vs_useb.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "useb" / "native"
SPLITS = {"twitterpara": ["test"], "cqadupstack": ["test"], "askubuntu": ["dev", "test"], "scidocs": ["dev", "test"]}


# ---------------------------------------------------------------------------------------------
# shared pieces
# ---------------------------------------------------------------------------------------------
def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    """VmHWM: this process's peak resident memory (ru_maxrss would carry the forking parent's peak over exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _make_adapter(task: str, root: Path, fixture: bool):
    from benchbench.core.registry import get_registry
    from benchbench.store.data import DataStore

    reg = get_registry()
    spec = reg.task(task)
    if fixture:  # fixtures are not the published bytes: no sha256
        spec = dataclasses.replace(spec, files={})
    return reg.adapter(spec.kind)(spec, DataStore(root, allow_download=False))


class LookupEncoder:
    """Vectors from the saved table only: a text outside it is an error, never an encoding."""

    def __init__(self, table: dict[str, int], vecs: np.ndarray):
        self.table, self.vecs = table, vecs
        self.fingerprint = "lookup"
        self.batch_size = 1 << 20  # a table lookup has no batch-size limit (a model would)
        self.length_sorted = False  # nor any padding to save by sorting
        self.seconds = 0.0  # time spent inside the lookup: the stand-in for encoding, paid by both evaluators

    def __call__(self, texts: list[str]) -> np.ndarray:
        t0 = time.perf_counter()
        try:  # the same lookup serves both evaluators
            return self.vecs[np.fromiter(map(self.table.__getitem__, texts), dtype=np.int64, count=len(texts))]
        except KeyError as e:
            raise KeyError(f"text not in the vector table: {e}") from None
        finally:
            self.seconds += time.perf_counter() - t0

    encode = __call__


class BowEncoder:
    """A stand-in for a model (``--vectors bow``): the sum of a fixed random vector per lower-cased word,
    plus a little noise per text so that texts with the same words in another order do not tie.
    Deterministic (vectors seeded by crc32 of the word or text), any text, no download."""

    fingerprint = "bow-random-words-384-v1"
    dim = 384

    def __init__(self):
        import re

        self.words: dict[str, np.ndarray] = {}
        self.split = re.compile(r"\w+").findall

    def _seeded(self, s: str, scale: float = 1.0) -> np.ndarray:
        import zlib

        rng = np.random.default_rng(zlib.crc32(s.encode("utf-8")))
        return scale * rng.standard_normal(self.dim, dtype=np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for r, t in enumerate(texts):
            v = self._seeded("text:" + t, 0.05)
            for w in self.split(t.lower()):
                if w not in self.words:
                    self.words[w] = self._seeded(w)
                v += self.words[w]
            out[r] = v
        return out


def _count_search(adapter) -> dict:
    """Wrap the exact top-k search the adapter's module calls (``search_topk``), if it has one, to add up
    its arithmetic (2 x queries x corpus rows x dim multiply-adds) and its seconds: what the search
    costs at best is that arithmetic at the machine's matmul peak."""
    import sys as _sys

    tally = {"flops": 0.0, "seconds": 0.0}
    module = _sys.modules[type(adapter).__module__]
    inner = getattr(module, "search_topk", None)
    if inner is None:
        return tally

    def counted(queries, blocks, k):
        def each():
            for b in blocks:
                tally["flops"] += 2.0 * len(queries) * b.shape[0] * b.shape[1]
                yield b

        t = time.perf_counter()
        try:
            return inner(queries, each(), k)
        finally:
            tally["seconds"] += time.perf_counter() - t

    module.search_topk = counted
    return tally


def _load_table(d: Path) -> tuple[dict[str, int], np.ndarray]:
    texts = json.loads((d / "texts.json").read_text())
    return {t: i for i, t in enumerate(texts)}, np.load(d / "vecs.npy")


# ---------------------------------------------------------------------------------------------
# worker side: one evaluator, one dataset, in a fresh process
# ---------------------------------------------------------------------------------------------
def worker(args) -> None:
    work = Path(args.work)
    table, vecs = _load_table(work / args.task)
    out: dict = {"splits": {}}
    if args.worker == "ours":
        from benchbench.core.registry import get_registry
        from benchbench.encode.encoding import Embedder

        get_registry()  # imports and plugin discovery happen before the clock starts, as useb's imports do
        import faiss  # noqa: F401  (imported lazily by the adapters; useb's torch/sklearn are imported above too)
        import pyarrow.json  # noqa: F401
        from isal import igzip  # noqa: F401  (the .gz reader)

        before = _rss_mb()
        t0, c0 = time.perf_counter(), time.process_time()
        ad = _make_adapter(args.task, Path(args.root), args.fixture)
        forums_file = work / args.task / "forums.json"
        if forums_file.exists():  # CQADupStack restricted to the forums whose vectors were prepared
            ad.spec = dataclasses.replace(
                ad.spec, params={**ad.spec.params, "forums": json.loads(forums_file.read_text())}
            )
        look = LookupEncoder(table, vecs)
        if args.worker_search == "int8-probe":  # bench/int8_search_probe.py's exact two-stage search instead
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from int8_search_probe import two_stage_topk

            module = sys.modules[type(ad).__module__]
            if getattr(module, "search_topk", None) is not None:
                module.search_topk = two_stage_topk
        search = _count_search(ad)
        for split in SPLITS[args.task]:
            out["splits"][split] = _ours_scores(
                args.task, ad.evaluate(Embedder(look, progress=False), split)
            )  # useb runs with show=False
        out["seconds"], out["cpu_seconds"] = time.perf_counter() - t0, time.process_time() - c0
        out["search_flops"], out["search_seconds"] = search["flops"], search["seconds"]
    else:
        import torch

        _ensure_pytrec_eval()
        from useb.evaluators import AskubuntuEvaluator, CQADupStackEvaluator, SciDocsEvaluator, TwitterParaEvaluator

        look = LookupEncoder(table, vecs)
        semb_fn = lambda batch: torch.from_numpy(look(batch))  # noqa: E731
        cls = {
            "twitterpara": TwitterParaEvaluator,
            "cqadupstack": CQADupStackEvaluator,
            "askubuntu": AskubuntuEvaluator,
            "scidocs": SciDocsEvaluator,
        }[args.task]
        before = _rss_mb()
        t0, c0 = time.perf_counter(), time.process_time()
        ev = cls(semb_fn, str(work / "useb" / args.task), show=False)
        for split in SPLITS[args.task]:
            out["splits"][split] = {k: 100 * float(v) for k, v in ev._run({"dev": "valid"}.get(split, split)).items()}
        out["seconds"], out["cpu_seconds"] = time.perf_counter() - t0, time.process_time() - c0
    out["lookup_seconds"] = look.seconds
    out["rss_before_mb"], out["peak_mb"] = before, _peak_mb()
    print("RESULT " + json.dumps(out))


def _ours_scores(task: str, r) -> dict[str, float]:
    """benchbench's result under useb's metric names."""
    s = {}
    if task == "twitterpara":
        for ours, theirs in (("turl", "twitterurl"), ("pit", "pit")):
            s[f"ap_twitter_{theirs}"] = r.scores[f"ap_{ours}"]
            s[f"spearman_twitter_{theirs}"] = r.scores[f"spearman_{ours}"]
        s["ap_twitter_avg"], s["spearman_twitter_avg"] = r.scores["ap"], r.scores["spearman"]
    elif task == "cqadupstack":
        for forum, v in r.subsets.items():
            s[f"map@100_cqadupstack_{forum}"] = v["map@100"]
            s[f"ndcg@10_cqadupstack_{forum}"] = v["ndcg@10"]
        if len(r.subsets) > 1:
            s["map@100_cqadupstack_avg"], s["ndcg@10_cqadupstack_avg"] = r.scores["map@100"], r.scores["ndcg@10"]
    elif task == "askubuntu":
        for m in ("map", "p@1", "p@5", "mrr"):
            s[f"{m}_askubuntu_title"] = r.scores[m]
    elif task == "scidocs":
        for t, v in r.subsets.items():
            s[f"map_scidocs_{t}_cosine"], s[f"ndcg_scidocs_{t}_cosine"] = v["map"], v["ndcg"]
        s["map_scidocs_cosine_avg"], s["ndcg_scidocs_cosine_avg"] = r.scores["map"], r.scores["ndcg"]
    return s


def _ensure_pytrec_eval() -> bool:
    try:
        import pytrec_eval  # noqa: F401

        return True
    except ImportError:
        stub = types.ModuleType("pytrec_eval")

        def _missing(*a, **k):
            raise RuntimeError("pytrec_eval is not installed (pip install pytrec-eval-terrier)")

        stub.RelevanceEvaluator = _missing
        sys.modules["pytrec_eval"] = stub
        return False


# ---------------------------------------------------------------------------------------------
# driver side: vectors, conversion to useb's layout, side-by-side runs, the report
# ---------------------------------------------------------------------------------------------
class RecordingEmbedder:
    """An Embedder that remembers every (text -> vector) it hands out."""

    def __init__(self, inner):
        self.inner, self.seen = inner, {}

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed(self, texts, desc="encoding"):
        v = self.inner.embed(texts, desc=desc)
        for t, row in zip(texts, v):
            self.seen.setdefault(t, row.copy())  # the adapter may normalise the returned array in place
        return v


def build_vectors(task: str, ad, embedder, work: Path, forums: list[str] | None) -> None:
    rec = RecordingEmbedder(embedder)
    if task == "cqadupstack" and forums is not None:
        ad.spec = dataclasses.replace(ad.spec, params={**ad.spec.params, "forums": forums})
    for split in SPLITS[task]:
        ad.evaluate(rec, split)
    texts = list(rec.seen)
    for t in list(texts):  # useb strips every text before encoding: give the stripped form the same vector
        if t.strip() not in rec.seen:
            rec.seen[t.strip()] = rec.seen[t]
            texts.append(t.strip())
    d = work / task
    d.mkdir(parents=True, exist_ok=True)
    if forums is not None:
        (d / "forums.json").write_text(json.dumps(forums))
    (d / "texts.json").write_text(json.dumps(texts))
    np.save(d / "vecs.npy", np.stack([rec.seen[t] for t in texts]).astype(np.float32))


def convert(task: str, ad, work: Path, forums: list[str] | None) -> None:
    out = work / "useb" / task
    out.mkdir(parents=True, exist_ok=True)
    if task == "twitterpara":
        d = ad.param("dir")
        for f in ("Twitter_URL_Corpus_test.txt", "test.data", "test.label"):
            shutil.copy(ad.file(f"{d}/{f}"), out / f)
    elif task == "askubuntu":
        text, dev, test = ad._layouts()["taolei87"]
        with gzip.open(ad.file(text), "rt", encoding="utf-8") as f:
            (out / "text_tokenized.txt").write_text(f.read(), encoding="utf-8")
        shutil.copy(ad.file(dev), out / "dev.txt")
        shutil.copy(ad.file(test), out / "test.txt")
    elif task == "cqadupstack":
        corpus, split = {}, {"test": {}, "valid": {}}
        for forum in forums or ad.available_forums("test"):
            fo = ad.load_forum(forum, "test")
            corpus[forum] = {**fo.pool, **fo.queries}
            split["test"][forum] = {q: sorted(r) for q, r in fo.qrels.items()}
            split["valid"][forum] = {}
        (out / "corpus.json").write_text(json.dumps(corpus))
        (out / "retrieval_split.json").write_text(json.dumps(split))
    elif task == "scidocs":
        data = {"corpus": {p: {"title": t or None} for p, t in ad.corpus().items()}}
        for split, key in (("dev", "valid"), ("test", "test")):
            data[key] = ad.load(split)
        (out / "data.json").write_text(json.dumps(data))


def cached_forums(ad, embedder) -> tuple[list[str], dict[str, float]]:
    """Forums whose corpus titles and queries are (>= 99%) already in the embedding cache."""
    from benchbench.encode.cache import text_key

    ok, coverage = [], {}
    for forum in ad.available_forums("test"):
        fo = ad.load_forum(forum, "test")
        texts = list(dict.fromkeys(list(fo.pool.values()) + list(fo.queries.values())))
        found, _ = embedder.cache.get(embedder.fingerprint, [text_key(t) for t in texts])
        coverage[forum] = float(found.mean())
        if found.mean() >= 0.99:  # the few stragglers are encoded (seconds); a whole forum never is
            ok.append(forum)
    return ok, coverage


def run_worker(side: str, task: str, work: Path, root: Path, fixture: bool) -> dict:
    """One evaluator in a fresh process. ``side``: "useb", or "ours:<search>" (see --search)."""
    side, _, search = side.partition(":")
    cmd = [sys.executable, __file__, "--worker", side, "--task", task, "--work", str(work), "--root", str(root)]
    cmd += ["--worker-search", search or "faiss"]
    if fixture:
        cmd.append("--fixture")
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TRANSFORMERS_VERBOSITY": "error"})
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode != 0 or line is None:
        raise RuntimeError(f"{side} worker for {task} failed:\n{p.stderr[-3000:]}")
    return json.loads(line[len("RESULT ") :])


def _median_run(runs: list[dict]) -> dict:
    """The first run's scores and peak memory, the median of the runs' times (scores must not vary)."""
    first = runs[0]
    for r in runs[1:]:
        if r["splits"] != first["splits"]:
            raise RuntimeError("an evaluator gave different scores on a repeated run")
    net = [r["seconds"] - r["lookup_seconds"] for r in runs]
    return {
        **first,
        "seconds": float(np.median([r["seconds"] for r in runs])),
        "all_seconds": [r["seconds"] for r in runs],
        "net_seconds": float(np.median(net)),
        "cpu_seconds": float(np.median([r["cpu_seconds"] for r in runs])),
    }


def _report_side(task, label, fixture, ours, theirs, prep, rows, timing, notes, floors, worst) -> float:
    """Add one benchbench evaluator's agreement rows and timing row (against useb's) to the report;
    returns the largest difference so far."""
    for split in SPLITS[task]:
        o, u = ours["splits"][split], theirs["splits"][split]
        extra = sorted(set(u) - set(o))
        if extra:  # SciDocs' euclidean variants: useb extras the paper does not report
            notes.append(f"{task} {split}: useb-only metrics not computed by benchbench: {', '.join(extra)}")
        for m in sorted(o):
            d = abs(o[m] - u[m]) if m in u else np.inf
            worst = max(worst, d)
            rows.append(
                [
                    label + ("" if not fixture else " (fixture)"),
                    split,
                    m,
                    f"{o[m]:.4f}",
                    f"{u.get(m, np.nan):.4f}",
                    f"{d:.4f}",
                    "ok" if d <= 0.01 else "FAIL",
                ]
            )
    timing.append(
        [
            label,
            f"{ours['seconds']:.2f} ({'/'.join(f'{x:.2f}' for x in ours['all_seconds'])})",
            f"{theirs['seconds']:.2f} ({'/'.join(f'{x:.2f}' for x in theirs['all_seconds'])})",
            f"{theirs['seconds'] / ours['seconds']:.1f}x",
            f"{ours['net_seconds']:.2f} / {theirs['net_seconds']:.2f}",
            f"{theirs['net_seconds'] / ours['net_seconds']:.1f}x",
            f"{ours['cpu_seconds']:.1f} / {theirs['cpu_seconds']:.1f} ({theirs['cpu_seconds'] / ours['cpu_seconds']:.1f}x)",
            f"{ours['peak_mb']:.0f} (+{ours['peak_mb'] - ours['rss_before_mb']:.0f})",
            f"{theirs['peak_mb']:.0f} (+{theirs['peak_mb'] - theirs['rss_before_mb']:.0f})",
            f"{prep:.0f}",
        ]
    )
    if ours.get("search_flops") and label == task:  # the fp32 floor speaks of the faiss search only
        floors.append((label, ours))
    return worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default="twitterpara,cqadupstack,askubuntu,scidocs")
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument(
        "--vectors",
        choices=["model", "bow"],
        default="model",
        help="model: --model's vectors (through the embedding cache); bow: random word vectors, every forum (see above)",
    )
    ap.add_argument("--data-dir", default=os.environ.get("BENCHBENCH_DATA"))
    ap.add_argument("--forums", default=None, help="CQADupStack forums (default: those >= 99%% in the embedding cache)")
    ap.add_argument("--encode-missing", action="store_true", help="encode CQADupStack forums not in the cache (slow)")
    ap.add_argument(
        "--repeats", type=int, default=3, help="runs of each evaluator (alternated); the median time is reported"
    )
    ap.add_argument("--keep", default=None, help="keep the work folder here")
    ap.add_argument(
        "--search",
        default="faiss",
        help="benchbench's top-k search for CQADupStack, or a comma list run side by side: faiss (the "
        "evaluator's), int8-probe (bench/int8_search_probe.py's exact two-stage search, not adopted)",
    )
    ap.add_argument("--worker", choices=["ours", "useb"], help=argparse.SUPPRESS)
    ap.add_argument("--worker-search", choices=["faiss", "int8-probe"], default="faiss", help=argparse.SUPPRESS)
    ap.add_argument("--task", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    ap.add_argument("--fixture", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return 0

    from tabulate import tabulate

    from benchbench.encode.cache import EmbeddingCache, default_cache_dir
    from benchbench.encode.encoding import Embedder
    from benchbench.encode.models import load_encoder

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    searches = [x.strip() for x in args.search.split(",") if x.strip()]
    if not searches or set(searches) - {"faiss", "int8-probe"}:
        ap.error(f"--search: a comma list of faiss, int8-probe; got {args.search!r}")
    real = Path(args.data_dir) if args.data_dir else None
    if real is None and any(t in ("twitterpara", "cqadupstack") for t in tasks):
        print("set BENCHBENCH_DATA (or --data-dir) for TwitterPara and CQADupStack", file=sys.stderr)
        return 2
    work = Path(args.keep or tempfile.mkdtemp(prefix="useb-fidelity-"))
    if args.vectors == "bow":
        embedder = Embedder(BowEncoder(), progress=False)
        args.model = f"none: random word vectors ({BowEncoder.fingerprint})"
    else:
        embedder = Embedder(load_encoder(args.model), cache=EmbeddingCache(default_cache_dir()), progress=False)
    have_trec = _ensure_pytrec_eval()
    load_start = os.getloadavg()  # timings on a shared machine mean little without the load they ran under
    rows, timing, notes = [], [], []
    worst = 0.0
    floors: list = []
    for task in tasks:
        fixture = task in ("askubuntu", "scidocs")
        root = FIXTURES if fixture else real
        ad = _make_adapter(task, root, fixture)
        forums = None
        if task == "cqadupstack":
            if args.forums:
                forums = args.forums.split(",")
            elif not args.encode_missing and args.vectors == "model":
                forums, cov = cached_forums(ad, embedder)
                skipped = {f: c for f, c in cov.items() if f not in forums}
                if skipped:
                    notes.append(
                        "cqadupstack forums skipped (not fully cached; --encode-missing to encode): "
                        + ", ".join(f"{f} ({100 * c:.0f}% cached)" for f, c in skipped.items())
                    )
                if not forums:
                    notes.append("cqadupstack: no forum fully cached; skipped")
                    continue
        if task == "scidocs" and not have_trec:
            notes.append("scidocs: pytrec_eval not installed (pip install pytrec-eval-terrier): useb side skipped")
            continue
        t0 = time.perf_counter()
        build_vectors(task, ad, embedder, work, forums)
        convert(task, _make_adapter(task, root, fixture), work, forums)
        prep = time.perf_counter() - t0
        ours_sides = [f"ours:{x}" for x in searches] if task == "cqadupstack" else ["ours:faiss"]
        runs: dict[str, list[dict]] = {side: [] for side in [*ours_sides, "useb"]}
        for _ in range(max(1, args.repeats)):  # alternated, each in a fresh process; the median time is reported
            for side in runs:
                runs[side].append(run_worker(side, task, work, root, fixture))
        theirs = _median_run(runs["useb"])
        for side in ours_sides:
            ours = _median_run(runs[side])
            label = task + ("" if side == "ours:faiss" else f" [{side.partition(':')[2]}]")
            worst = _report_side(task, label, fixture, ours, theirs, prep, rows, timing, notes, floors, worst)
        if task == "cqadupstack":
            notes.append(
                f"cqadupstack forums compared: {', '.join(forums or ad.available_forums('test'))} "
                "(BEIR title-only layout, test split; the offline data has 11 of 12 forums, no tex)"
            )
    print(
        f"model: {args.model}; same vectors to both evaluators (x100 scores); pytrec_eval: "
        f"{'real (pytrec-eval-terrier)' if have_trec else 'missing'}"
    )
    print(
        tabulate(
            rows,
            headers=["dataset", "split", "useb metric", "benchbench", "useb", "|diff|", "<=0.01"],
            tablefmt="github",
        )
    )
    print()
    print(
        tabulate(
            timing,
            headers=[
                "dataset",
                "benchbench s, median (runs)",
                "useb s, median (runs)",
                "speed-up",
                "without the shared lookup: benchbench / useb s (median)",
                "speed-up (evaluators alone)",
                "CPU s (all threads): benchbench / useb (median)",
                "benchbench peak MB (+eval)",
                "useb peak MB (+eval)",
                "vector prep s",
            ],
            tablefmt="github",
        )
    )
    for n in notes:
        print("note:", n)
    print(
        f"load average (1/5/15 min) at start {'/'.join(f'{x:.2f}' for x in load_start)}, "
        f"at end {'/'.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
    )
    if floors:  # the exact search's arithmetic against this machine's matmul peak, measured now
        sys.path.insert(0, str(Path(__file__).parent))
        from encode_throughput import matmul_peak

        peak = matmul_peak()
        for task, o in floors:
            gflop, floor = o["search_flops"] / 1e9, o["search_flops"] / peak
            rest = o["all_seconds"][0] - o["search_seconds"]  # the search was timed in the first run
            print(
                f"{task} search: {gflop:.0f} GFLOP of exact inner products in {o['search_seconds']:.2f} s "
                f"({o['search_flops'] / o['search_seconds'] / 1e9:.0f} GFLOP/s = "
                f"{100 * o['search_flops'] / o['search_seconds'] / peak:.0f}% of the {peak / 1e9:.0f} GFLOP/s "
                f"fp32 matmul peak measured now); at the peak it would take {floor:.2f} s, so with the rest of "
                f"this evaluation ({rest:.2f} s) the best full time is {floor + rest:.2f} s "
                f"(that run: {o['all_seconds'][0]:.2f} s)"
            )
    print(f"largest difference: {worst:.4f} points -> {'PASS' if worst <= 0.01 else 'FAIL'}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if worst <= 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
