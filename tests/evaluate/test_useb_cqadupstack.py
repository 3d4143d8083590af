"""CQADupStack: USEB's MAP@100 (scikit-learn AP of the top 100) against a brute-force reference,
both layouts, streaming corpus blocks, missing forums marked partial, one training corpus."""

import hashlib
from pathlib import Path

import numpy as np
import pytest
from helpers import FIXTURES, fixture_adapter
from sklearn.metrics import average_precision_score

from benchbench.core.errors import ConfigError
from benchbench.encode.encoding import Embedder

FIX = FIXTURES / "useb"


def make(registry, root, **params):
    return fixture_adapter(registry, "cqadupstack", root, **params)


class HashEncoder:
    """Deterministic pseudo-random vectors per text; records every encode batch."""

    fingerprint = "hash-encoder"

    def __init__(self, dim=6):
        self.dim, self.calls = dim, []

    def vec(self, t):
        seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:4], "little")
        return np.random.default_rng(seed).normal(size=self.dim).astype(np.float32)

    def encode(self, texts):
        self.calls.append(list(texts))
        return np.stack([self.vec(t) for t in texts])


def reference(enc, forum):
    """USEB's computation written out plainly: full score matrix, top 100, sklearn AP; nDCG@10."""
    v = lambda t: enc.vec(t) / np.linalg.norm(enc.vec(t))  # noqa: E731
    ids, docs = list(forum["corpus"]), [v(t) for t in forum["corpus"].values()]
    aps, ndcgs = [], []
    for q, rel in forum["qrels"].items():
        s = np.array([v(forum["queries"][q]) @ d for d in docs])
        top = np.argsort(-s)[:100]
        hits = [ids[i] in rel for i in top]
        aps.append(average_precision_score(hits, s[top]) if any(hits) else 0.0)
        dcg = sum(h / np.log2(i + 2) for i, h in enumerate(hits[:10]))
        ndcgs.append(dcg / sum(1 / np.log2(i + 2) for i in range(min(len(rel), 10))))
    return 100 * np.mean(aps), 100 * np.mean(ndcgs)


ANDROID = {
    "corpus": {
        "a1": "phone battery drains fast",
        "a2": "how to root my phone",
        "a3": "battery life is poor on android",
        "a4": "install apk from sd card",
        "a5": "rooting android without a computer",
        "a6": "wifi keeps disconnecting",
    },
    "queries": {"aq1": "why does my battery drain so quickly", "aq2": "root android phone"},
    "qrels": {"aq1": {"a1", "a3"}, "aq2": {"a5"}},
}


def test_beir_layout_matches_brute_force_reference_and_is_partial(registry):
    ad = make(registry, FIX / "native")
    assert ad.layout == "beir" and ad.spec.splits == ["test"]
    enc = HashEncoder()
    r = ad.evaluate(Embedder(enc), "test")
    ref_map, ref_ndcg = reference(enc, ANDROID)
    assert r.subsets["android"]["map@100"] == pytest.approx(ref_map)
    assert r.subsets["android"]["ndcg@10"] == pytest.approx(ref_ndcg)
    assert r.scores["map@100"] == pytest.approx(np.mean([s["map@100"] for s in r.subsets.values()]))  # macro mean
    assert set(r.subsets) == {"android", "gis"}
    assert r.partial and any("2 of 12 forums" in n and "tex" in n for n in r.notes)
    assert any("test split" in n for n in r.notes)


def test_corpus_streams_in_blocks_with_the_same_result(registry):
    big = make(registry, FIX / "native").evaluate(Embedder(HashEncoder()), "test")
    enc = HashEncoder()
    small = make(registry, FIX / "native", block=2).evaluate(Embedder(enc), "test")
    assert small.scores == pytest.approx(big.scores)
    corpus_calls = [
        c
        for c in enc.calls
        if not any(t.startswith(("why", "root android", "how to reproject", "raster algebra", "utm")) for t in c)
    ]
    assert corpus_calls and max(len(c) for c in corpus_calls) <= 2


def test_beir_has_no_dev_split(registry):
    ad = make(registry, FIX / "native")
    with pytest.raises(ConfigError, match="test split only"):
        ad.check_split("dev")


def test_useb_layout_dev_and_queries_removed_from_pool(registry):
    ad = make(registry, FIX / "useb")
    assert ad.layout == "useb" and "dev" in ad.spec.splits
    f = ad.load_forum("android", "test")
    assert set(f.pool) == set(ANDROID["corpus"])  # the split's queries are popped from the corpus
    enc = HashEncoder()
    test = ad.evaluate(Embedder(enc), "test")
    assert test.subsets["android"]["map@100"] == pytest.approx(reference(enc, ANDROID)[0])
    dev = ad.evaluate(Embedder(HashEncoder()), "dev")
    assert dev.subsets["android"]["n_queries"] == 1 and dev.subsets["android"]["corpus"] == 7  # 8 texts - 1 query


def test_search_protocol_is_used_when_present(registry):
    class Searcher:
        fingerprint = "searcher"

        def encode(self, texts):
            raise AssertionError("vectors must not be used")

        def search(self, queries, corpus, k):
            # rank documents by the number of shared words, ties by row
            sc = np.array([[len(set(q.split()) & set(d.split())) for d in corpus] for q in queries], dtype=float)
            idx = np.argsort(-sc, axis=1, kind="stable")[:, :k]
            return np.take_along_axis(sc, idx, 1), idx

    r = make(registry, FIX / "native").evaluate(Embedder(Searcher()), "test")
    # gis gq1 "how to reproject a layer in qgis": g1 (2 shared: reproject, qgis) and g4 (layer, a) lead -> relevant both
    assert r.details["retrieval"] == "search()" and r.subsets["gis"]["map@100"] > 0


def test_one_training_corpus_for_all_forums_without_queries(registry):
    sents = make(registry, FIX / "native").own_sentences()
    assert "phone battery drains fast" in sents and "raster calculator syntax" in sents
    assert "root android phone" not in sents and "utm conversion" not in sents
    assert len(sents) == 11
    useb = make(registry, FIX / "useb").own_sentences()
    assert "how to root my phone" not in useb  # a dev (valid) query of the USEB layout is held out too
    assert "root android phone" not in useb and "phone battery drains fast" in useb


def test_real_beir_cqadupstack_reads(registry, real_data):
    ad = make(registry, real_data)
    assert ad.layout == "beir" and len(ad.available_forums("test")) == 11
    f = ad.load_forum("webmasters", "test")
    assert (len(f.queries), len(f.pool)) == (506, 17405) and sum(map(len, f.qrels.values())) == 1395


@pytest.mark.parametrize("n_distinct,k", [(300, 10), (300, 100), (40, 100), (5, 100)])
def test_repeated_texts_searched_once_give_the_search_over_every_document(n_distinct, k):
    """Repeats: searching the distinct texts and expanding gives the top-k of searching every
    document: the same scores and texts in the same order, the same documents (equal scores: the
    later document first, as faiss ranks them) wherever a repeated text is not split by the cut at
    k (there faiss's pick among equal scores depends on its heap's history). Also with fewer
    distinct texts than k."""
    from benchbench.evaluate.adapters.cqadupstack import Repeats
    from benchbench.evaluate.adapters.ranking import normalized, search_topk

    rng = np.random.default_rng(n_distinct + k)
    base = [f"text {i}" for i in range(n_distinct)]
    texts = base + [base[i] for i in rng.integers(0, n_distinct, size=max(3, n_distinct // 3))]
    rng.shuffle(texts)
    vec = {t: normalized(rng.normal(size=(1, 8)).astype(np.float32))[0] for t in base}
    queries = normalized(rng.normal(size=(25, 8)).astype(np.float32))
    queries[:5] = [vec[texts[i]] for i in range(5)]  # a repeated text at the top of some rows
    docs = np.stack([vec[t] for t in texts])
    want_s, want_i = search_topk(queries, [docs], k)

    rep = Repeats(texts)
    assert rep.distinct == list(dict.fromkeys(texts)) and len(rep.groups) > 0
    got_s, got_i = rep.expand(*search_topk(queries, [np.stack([vec[t] for t in rep.distinct])], k), k)
    np.testing.assert_array_equal(got_s, want_s)
    as_text = np.vectorize(lambda i: texts[i] if i >= 0 else "")
    np.testing.assert_array_equal(as_text(got_i), as_text(want_i))
    size = {t: texts.count(t) for t in set(texts)}
    for g, w in zip(got_i, want_i):
        row = [texts[i] for i in w if i >= 0]
        whole = [i for i, t in enumerate(row) if row.count(t) == size[t]]  # texts with all their documents in the row
        assert [g[i] for i in whole] == [w[i] for i in whole]
    assert got_i.shape == (25, min(k, len(texts)))


def test_repeated_titles_in_a_forum_are_encoded_once_and_still_all_ranked(registry, tmp_path):
    """Two documents with one title: encoded once (no repeat reaches the encoder), both retrieved."""
    import gzip
    import json

    forum = tmp_path / "beir" / "cqadupstack" / "android"
    (forum / "qrels").mkdir(parents=True)
    corpus = {"d1": "battery drains fast", "d2": "battery drains fast", "d3": "root my phone", "q1": "battery drain"}
    with gzip.open(forum / "corpus.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"_id": i, "title": t, "text": ""}) + "\n" for i, t in corpus.items())
    with gzip.open(forum / "queries.jsonl.gz", "wt") as f:
        f.write(json.dumps({"_id": "q1", "text": "battery drain"}) + "\n")
    (forum / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    ad = make(registry, tmp_path)
    enc = HashEncoder()
    r = ad.evaluate(Embedder(enc), "test")
    seen = [t for c in enc.calls for t in c]
    assert seen.count("battery drains fast") == 1
    assert r.subsets["android"]["corpus"] == 3
    scores, idx, dids = ad._retrieve(Embedder(HashEncoder()), "android", ad.load_forum("android", "test"))
    assert sorted(dids[i] for i in idx[0]) == ["d1", "d2", "d3"]


def _lite(registry, tmp_path, pools, sha=None):
    import dataclasses
    import json

    from benchbench.store.data import DataStore

    raw = json.dumps({"pools": pools}).encode()
    (tmp_path / "pool.json").write_bytes(raw)
    spec = registry.task("cqadupstack-lite")
    params = {**spec.params, "pool": "pool.json", "pool_sha256": sha or hashlib.sha256(raw).hexdigest()}
    spec = dataclasses.replace(spec, files={}, params=params, source=str(tmp_path / "spec.toml"))
    return registry.adapter(spec.kind)(spec, DataStore(FIX / "native", allow_download=False))


def test_lite_pool_keeps_listed_queries_and_documents_only(registry, tmp_path):
    pools = {
        "test": {
            "android": {"queries": ["aq1"], "pool": ["a1", "a2", "a6"]},
            "gis": {"queries": ["gq1"], "pool": ["g1", "g4"]},
        }
    }
    ad = _lite(registry, tmp_path, pools)
    f = ad.load_forum("android", "test")
    assert list(f.queries) == ["aq1"] and list(f.pool) == ["a1", "a2", "a6"] and f.qrels == {"aq1": {"a1", "a3"}}
    enc = HashEncoder()
    r = ad.evaluate(Embedder(enc), "test")
    # the reference search restricted to the same pool and query gives the same MAP@100
    lite_forum = {
        "corpus": {d: ANDROID["corpus"][d] for d in ("a1", "a2", "a6")},
        "queries": {"aq1": ANDROID["queries"]["aq1"]},
        "qrels": {"aq1": {"a1", "a3"}},
    }
    assert r.subsets["android"]["map@100"] == pytest.approx(reference(enc, lite_forum)[0])
    assert r.subsets["android"]["corpus"] == 3 and r.details["lite"] and any(n.startswith("LITE") for n in r.notes)
    # the training sentences stay the full corpus (lite cuts only the evaluation)
    assert "wifi keeps disconnecting" in ad.own_sentences() and "install apk from sd card" in ad.own_sentences()


def test_lite_pool_checksum_and_unknown_ids_are_errors(registry, tmp_path):
    from benchbench.core.errors import DataError

    pools = {"test": {"android": {"queries": ["aq1"], "pool": ["a1"]}, "gis": {"queries": ["gq1"], "pool": ["g1"]}}}
    with pytest.raises(DataError, match="sha256"):
        _lite(registry, tmp_path, pools, sha="0" * 64).load_forum("android", "test")
    bad = {"test": {"android": {"queries": ["aq1"], "pool": ["nope"]}, "gis": {"queries": ["gq1"], "pool": ["g1"]}}}
    with pytest.raises(DataError, match="nope"):
        _lite(registry, tmp_path, bad).load_forum("android", "test")


def test_published_lite_pools_match_the_spec():
    """The committed pool file is the one the spec pins, and every kept query's relevant documents
    are in its pool (a lite pool that dropped a positive would change the metric)."""
    import json

    from benchbench.core.registry import get_registry

    spec = get_registry().task("cqadupstack-lite")
    path = Path(spec.source).parent / spec.params["pool"]
    raw = path.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == spec.params["pool_sha256"]
    doc = json.loads(raw)
    assert doc["options"]["queries"] == 100 and sorted(doc["options"]["retrievers"]) == ["bm25", "glove-avg", "sbert"]
    assert len(doc["pools"]["test"]) == 11 and all(len(p["queries"]) == 100 for p in doc["pools"]["test"].values())
