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


def test_training_sentences_exclude_test_tweets_and_the_heldout_pairs(registry):
    ad = make(registry, FIX / "native", heldout_sources=1)
    a, b, y = ad.heldout()
    # one of the two source tweets and its pair (the second pair is dropped: its source is a test tweet)
    assert len(a) == 1 and a[0] in ("a training tweet about news", "another tweet")
    held = {a[0], b[0]}
    sents = ad.own_sentences()
    every = {"a training tweet about news", "a second training tweet", "another tweet", "third one here"}
    assert set(sents) == every - held and len(sents) == len(set(sents)) == 2
    assert "pair one first tweet" not in sents  # also a test tweet (case-insensitive): never trained on


def test_heldout_takes_at_most_half_the_sources(registry):
    with pytest.raises(
        DataError, match="heldout split of task 'twitterpara' takes 2 source tweets, but TURL train has 2"
    ):
        make(registry, FIX / "native", heldout_sources=2).heldout()
    # by default a tenth of a small train set: none of the fixture's 2 sources, so nothing to score
    ad = make(registry, FIX / "native")
    assert ad.heldout()[0] == [] and len(ad.own_sentences()) == 4
    with pytest.raises(DataError, match="too small to hold out pairs"):
        ad.evaluate(Embedder(PairScorer(TABLE)), "heldout")


def test_heldout_scores_the_binary_turl_train_labels(registry, tmp_path):
    """AP against sim.txt's 0/1 labels (1 = paraphrase): ranking the held-out paraphrases first is AP 100,
    ranking them last 41.67 (2 positives of 4: (1/3 + 2/4) / 2); Spearman follows the label."""
    d = tmp_path / "useb" / "twitterpara"
    (d / "train").mkdir(parents=True)
    for f in ("Twitter_URL_Corpus_test.txt", "test.data", "test.label"):
        (d / f).write_bytes((FIX / "native" / "useb" / "twitterpara" / f).read_bytes())
    rows = [(f"source {i}", f"reply {i} {j}", j % 2) for i in range(4) for j in range(2)]
    for name, col in (("a.toks", 0), ("b.toks", 1), ("sim.txt", 2)):
        (d / "train" / name).write_text("".join(f"{r[col]}\n" for r in rows))
    ad = make(registry, tmp_path, heldout_sources=2)
    a, b, y = ad.heldout()
    assert len(a) == 4 and sorted(y.tolist()) == [0, 0, 1, 1] and len(set(a)) == 2
    for score_pos, ap in ((0.9, 100.0), (0.1, 100 * (1 / 3 + 2 / 4) / 2)):
        table = {(x, z): (score_pos if lab == 1 else 0.5) + 0.01 * k for k, (x, z, lab) in enumerate(zip(a, b, y))}
        r = ad.evaluate(Embedder(PairScorer(table)), "heldout")
        assert r.main_score == pytest.approx(ap) and r.subsets["heldout"]["n_ap"] == 4
        assert (r.scores["spearman"] > 0) == (score_pos > 0.5)
    assert "not USEB's" in r.notes[0] and r.details["aggregation"] == "held-out TURL train pairs"
    # its tweets left the training sentences; the other sources' pairs stay
    assert {s.lower() for s in ad.own_sentences()} == {s for r_ in rows for s in r_[:2]} - ad.heldout_sentences()


def test_real_heldout_split(registry, real_data):
    """Pinned: 150 of TURL train's source tweets (seed 2017), 1,748 pairs, 25.3% paraphrases; none of its
    tweets is a training sentence, a test tweet, or in the in-domain supervised stage's pairs."""
    import hashlib

    from benchbench.evaluate.adapters import twitterpara
    from benchbench.train.setups import in_domain_data

    assert (twitterpara.HELDOUT_SOURCES, twitterpara.HELDOUT_SEED) == (150, 2017)
    ad = make(registry, real_data)
    a, b, y = ad.heldout()
    assert (len(a), len(set(a)), int(y.sum())) == (1748, 150, 443)
    digest = hashlib.sha256("\n".join(f"{x}\t{z}\t{v}" for x, z, v in zip(a, b, y)).encode()).hexdigest()
    assert digest[:16] == DIGEST
    held = ad.heldout_sentences()
    assert len(held) == 1651
    assert not held & {s.lower() for s in ad.own_sentences()}
    assert not held & ad._test_sentences()
    lab = in_domain_data(ad, None, 1)
    assert not held & {s.lower() for x, z, _ in lab.scored + lab.dev for s in (x, z)}
    # the scores: a real split, not a constant (AP of a random scorer sits near the 25% positive rate)
    r = ad.evaluate(Embedder(_Random()), "heldout")
    assert 15 < r.main_score < 40 and r.subsets["heldout"]["n"] == 1748


class _Random:
    def encode(self, sentences, **_):
        import numpy as np

        return np.random.default_rng(0).standard_normal((len(sentences), 16)).astype("float32")


DIGEST = "cea71794c1e02a1f"


def test_real_twitterpara_counts(registry, real_data):
    data = make(registry, real_data).load("test")
    a, _, y = data["turl"]
    assert len(a) == 10120 and int((y != 3).sum()) == 9334
    assert len(data["pit"][0]) == 972 and int((data["pit"][2] != 3).sum()) == 838


@pytest.mark.parametrize("field", ['{"":"","":""}', "'ab'", "(3,6", "3", "(x,6)", "[2, 6]"])
def test_a_turl_label_that_is_not_n_of_6_is_a_data_error_naming_the_line(tmp_path, field):
    from benchbench.evaluate.adapters.twitterpara import read_turl

    f = tmp_path / "turl.txt"
    f.write_text(f"a cat sat\ta cat sits\t(4,6)\thttp://x\nb\tc\t{field}\thttp://y\n")
    with pytest.raises(DataError, match=r"turl.txt:2: expected"):
        read_turl(f)
    f.write_text("a cat sat\ta cat sits\t( 4 , 6 )\thttp://x\n")
    assert read_turl(f)[2].tolist() == [4]
