"""Build CQADupStack-lite: a fixed pool per forum, as MTEB built its cheap retrieval tasks (PR #1236).

For each forum: at most ``--queries`` test queries (a seeded sample, ids sorted), and a pool = the
union of those queries' relevant documents and of the top ``--k`` documents each retriever finds for
them over the forum's FULL corpus. Retrievers: BM25 (rank-bm25 through the `bm25` plugin), the
average of GloVe 6B-50d vectors (`glove-avg`) and all-MiniLM-L6-v2 (`sbert`): one lexical and two
dense, all offline. Writes ``tasks/lite/cqadupstack-lite.json`` (id lists + how they were made) and
prints its sha256 for ``tasks/useb.toml``. Rerunning with the same data and options gives the same
file byte for byte.

    BENCHBENCH_DATA=../shared/data python bench/build_useb_lite.py [--queries 100] [--k 50]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=100, help="queries kept per forum")
    ap.add_argument("--k", type=int, default=50, help="top-k documents of each retriever added to the pool")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--retrievers", default="bm25,glove-avg,sbert")
    ap.add_argument("--out", default=str(REPO / "tasks" / "lite" / "cqadupstack-lite.json"))
    ap.add_argument("--data-dir", default=os.environ.get("BENCHBENCH_DATA"))
    args = ap.parse_args()

    from benchbench.core.registry import get_registry, make_adapter
    from benchbench.encode.cache import EmbeddingCache, default_cache_dir
    from benchbench.encode.encoding import Embedder
    from benchbench.evaluate.adapters.cqadupstack import CQADupStackAdapter
    from benchbench.evaluate.adapters.ranking import normalized, search_topk
    from benchbench.store.data import DataStore
    from benchbench.train.context import TrainContext

    reg = get_registry()
    data = DataStore(args.data_dir)
    adapter: CQADupStackAdapter = make_adapter(reg, "cqadupstack", data)
    cache = EmbeddingCache(default_cache_dir())
    retrievers = {}
    for name in args.retrievers.split(","):
        cls = reg.method(name)
        ctx = TrainContext(model=cls.default_model or "", seed=1, output_dir=Path("/tmp"), progress=False)
        retrievers[name] = cls().train([], ctx)
    pools, sources = {"test": {}}, {}
    t0 = time.perf_counter()
    for forum in adapter.available_forums("test"):
        full = adapter._load_full_forum(forum, "test")
        rng = np.random.default_rng([args.seed, int(hashlib.sha256(forum.encode()).hexdigest()[:8], 16)])
        qids = sorted(full.queries)
        keep = sorted(rng.choice(qids, size=min(args.queries, len(qids)), replace=False).tolist())
        dids = list(full.pool)
        texts = [full.pool[d] for d in dids]
        chosen: set[str] = {d for q in keep for d in full.qrels[q] if d in full.pool}
        for name, enc in retrievers.items():
            queries = [full.queries[q] for q in keep]
            if callable(getattr(enc, "search", None)):
                _, idx = enc.search(queries, texts, args.k)
            else:
                emb = Embedder(enc, cache=cache, progress=False)
                qv = normalized(emb.embed(queries), inplace=True)
                blocks = (
                    normalized(emb.embed(texts[i : i + 16384]), inplace=True) for i in range(0, len(texts), 16384)
                )
                _, idx = search_topk(qv, blocks, args.k)
            chosen.update(dids[i] for i in np.asarray(idx).ravel() if i >= 0)
        pools["test"][forum] = {"queries": keep, "pool": [d for d in dids if d in chosen]}  # corpus order
        sources[forum] = {
            "queries_full": len(qids),
            "corpus_full": len(dids),
            "pool": len(pools["test"][forum]["pool"]),
        }
        print(
            f"{forum}: {len(keep)}/{len(qids)} queries, pool {len(pools['test'][forum]['pool'])}/{len(dids)} "
            f"({time.perf_counter() - t0:.0f}s)",
            file=sys.stderr,
            flush=True,
        )
    doc = {
        "what": "CQADupStack-lite: fixed per-forum pools (queries capped; pool = relevant + top-k of each retriever "
        "over the full forum corpus)",
        "built_by": "bench/build_useb_lite.py",
        "options": {"queries": args.queries, "k": args.k, "seed": args.seed, "retrievers": list(retrievers)},
        "retriever_fingerprints": {n: getattr(e, "fingerprint", None) for n, e in retrievers.items()},
        "data": {k: v for k, v in sorted(data.used.items())},
        "sizes": sources,
        "pools": pools,
    }
    raw = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_bytes(raw)
    print(
        json.dumps(
            {
                "out": args.out,
                "sha256": hashlib.sha256(raw).hexdigest(),
                "queries": sum(len(p["queries"]) for p in pools["test"].values()),
                "pool": sum(len(p["pool"]) for p in pools["test"].values()),
                "full_corpus": sum(s["corpus_full"] for s in sources.values()),
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
