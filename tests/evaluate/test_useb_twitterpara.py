"""TwitterPara: USEB's label handling (3 dropped from AP, > 3 positive, Spearman vs label x 20 over
all pairs), TURL/PIT averaged, and the no-dev-split rule."""

import dataclasses

import pytest
from helpers import FIXTURES, TablePairScorer, fixture_adapter

from benchbench.core.errors import ConfigError, DataError
from benchbench.encode.encoding import Embedder
from benchbench.run.runner import RunOptions, run

FIX = FIXTURES / "useb"


def make(registry, root, **params):
    return fixture_adapter(registry, "twitterpara", root, **params)


def PairScorer(table):
    return TablePairScorer(table, strict=True)


# texts are stripped (the TURL file has trailing spaces), as USEB strips before encoding
TABLE = {
    ("Pair one first tweet", "Pair one second tweet"): 0.9,
    ("Pair two first", "Pair two second"): 0.2,
    ("Pair three first", "Pair three second"): 0.8,
    ("Pair four first", "Pair four second"): 0.3,
    ("Pair five first", "Pair five second"): 0.4,
    ("pit one a", "pit one b"): 0.1,
    ("pit two a", "pit two b"): 0.6,
    ("pit three a", "pit three b"): 0.5,
    ("pit four a", "pit four b"): 0.05,
}


@pytest.mark.parametrize(
    "root, d", [(FIX / "native", "useb/twitterpara"), (FIX / "useb", "useb/data-eval/twitterpara")]
)
def test_hand_computed_ap_and_spearman(registry, root, d):
    r = make(registry, root, dir=d).evaluate(Embedder(PairScorer(TABLE)), "test")
    # TURL labels 5,1,3,4,0 -> label 3 dropped; ranking 0.9(+) 0.4(-) 0.3(+) 0.2(-): AP = (1 + 2/3)/2
    assert r.scores["ap_turl"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    # Spearman over all 5 pairs (label 3 kept): sum d^2 = 10 -> 1 - 60/120
    assert r.scores["spearman_turl"] == pytest.approx(50.0)
    # PIT labels 5,2,3,1 -> ranking 0.6(-) 0.1(+) 0.05(-): AP = 1/2 ; Spearman: sum d^2 = 8 -> 1 - 48/60
    assert r.scores["ap_pit"] == pytest.approx(50.0)
    assert r.scores["spearman_pit"] == pytest.approx(20.0)
    assert r.main_metric == "ap" and r.main_score == pytest.approx((100 * 5 / 6 + 50) / 2)
    assert r.scores["spearman"] == pytest.approx(35.0)
    assert r.subsets["turl"]["n"] == 5 and r.subsets["turl"]["n_ap"] == 4


def test_dev_request_is_an_error_never_test(registry):
    ad = make(registry, FIX / "native")
    with pytest.raises(ConfigError, match="no dev split"):
        ad.evaluate(Embedder(PairScorer(TABLE)), "dev")


def test_explicit_dev_run_is_an_error(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "cache"))
    registry.tasks["twitterpara"] = dataclasses.replace(registry.task("twitterpara"), files={})
    with pytest.raises(ConfigError, match="no dev split"):
        run(
            RunOptions(
                method="bm25",
                tasks="twitterpara",
                data_dir=str(FIX / "native"),
                output=str(tmp_path / "o"),
                splits=["dev"],
            ),
            registry,
        )


def test_malformed_turl_label_names_the_file(registry, tmp_path):
    d = tmp_path / "useb" / "twitterpara"
    d.mkdir(parents=True)
    (d / "Twitter_URL_Corpus_test.txt").write_text("a\tb\tnot-a-label\turl\n")
    for f in ("test.data", "test.label"):
        (d / f).write_bytes((FIX / "native" / "useb" / "twitterpara" / f).read_bytes())
    with pytest.raises(DataError, match="Twitter_URL_Corpus_test.txt:1"):
        make(registry, tmp_path).evaluate(Embedder(PairScorer(TABLE)), "test")


def test_training_sentences_exclude_test_tweets(registry):
    sents = make(registry, FIX / "native").own_sentences()
    assert "a training tweet about news" in sents and "third one here" in sents
    assert "pair one first tweet" not in sents  # also a test tweet (case-insensitive): held out
    assert len(sents) == len(set(sents)) == 4


def test_real_twitterpara_counts(registry, real_data):
    data = make(registry, real_data).load("test")
    a, _, y = data["turl"]
    assert len(a) == 10120 and int((y != 3).sum()) == 9334
    assert len(data["pit"][0]) == 972 and int((data["pit"][2] != 3).sum()) == 838
