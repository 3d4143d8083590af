"""Every task-file reader, fed arbitrary bytes, empty and 100k-character sentences, short rows and
bad scores, either returns a result or raises a ``DataError`` that names the file; never another
exception type (``UnicodeDecodeError``, ``ValueError``, ``IndexError``, ...). The line-exact
messages are pinned by the targeted tests at the end."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchbench.core.errors import DataError
from benchbench.evaluate.adapters import afs, askubuntu, caption, cqadupstack, pairs, scidocs, senteval, twitterpara
from tests.helpers import fixture_adapter

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

LONG = "w" * 100_000
FIELDS = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "0",
            "1",
            "3",
            "4.5",
            "-1",
            "nan",
            "inf",
            "x",
            "(3,6)",
            "entailment",
            "not_entailment",
            "NEUTRAL",
            "ENTAILMENT",
            "DESC:manner",
            "q1",
            "d1",
            "{",
            "[]",
            '{"_id": "1", "title": "t"}',
            "query-id",
            '"',
            LONG,
            "a b c",
            "\u00e9\u4e2d",
            "\u2028",
            "\x00",
        ]
    ),
    st.text(max_size=12),
)
ROWS = st.lists(st.lists(FIELDS, min_size=0, max_size=8).map("\t".join), max_size=6).map("\n".join)
CONTENT = st.one_of(
    st.binary(max_size=200),
    ROWS.map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.tuples(ROWS, st.binary(min_size=1, max_size=4)).map(lambda t: t[0].encode("utf-8", "surrogatepass") + t[1]),
    st.just(b""),
    st.just(b"\xff\xfe\x00bad"),
)


def _check(fn, path: Path):
    """Run one reader: a result, or a DataError naming ``path``."""
    try:
        return fn()
    except DataError as e:
        assert path.name in str(e), f"DataError does not name the file {path.name}: {e}"
        return None


def _write(root: Path, rel: str, data: bytes) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


# ---- plain reader functions -----------------------------------------------------------------------
FUNCTION_READERS = {
    "senteval.binary": lambda p: senteval.load_binary(p, p),
    "senteval.sst2": lambda p: senteval.load_sst(p, 2),
    "senteval.sst5": lambda p: senteval.load_sst(p, 5),
    "senteval.trec": senteval.load_trec,
    "senteval.mrpc": senteval.load_mrpc,
    "senteval.sick": lambda p: senteval.load_sick(p, 3),
    "senteval.sick_entailment": senteval.load_sick_entailment,
    "pairs.qnli": lambda p: pairs.read_pairs(p, "glue-qnli"),
    "pairs.msrp": lambda p: pairs.read_pairs(p, "msrp"),
    "pairs.qqp": lambda p: pairs.read_pairs(p, "glue-qqp"),
    "askubuntu.eval": askubuntu.read_eval,
    "askubuntu.titles": askubuntu.read_titles,
    "twitterpara.turl": twitterpara.read_turl,
    "twitterpara.pit": twitterpara.read_pit,
    "scidocs.qrel": scidocs.read_qrel,
    "cqadupstack.jsonl": cqadupstack._jsonl,
    "cqadupstack.jsonl_fields": lambda p: cqadupstack._jsonl_fields(p, "title"),
    "cqadupstack.json": cqadupstack._json_file,
    "afs.auto": afs.read_afs,
    "afs.utf8": lambda p: afs.read_afs(p, "utf-8"),
    "caption.pickle": caption.load_senteval_pickle,
}


@pytest.mark.parametrize("reader", sorted(FUNCTION_READERS))
def test_function_reader_never_crashes(reader, tmp_path):
    fn = FUNCTION_READERS[reader]

    @SETTINGS
    @given(data=CONTENT)
    def prop(data):
        p = _write(tmp_path, "task-file.txt", data)
        _check(lambda: fn(p), p)

    prop()


def test_caption_lines_never_crash(tmp_path):
    feats = tmp_path / "feats.npy"
    np.save(feats, np.zeros((1, 3), dtype=np.float32))

    @SETTINGS
    @given(data=CONTENT)
    def prop(data):
        p = _write(tmp_path, "captions.txt", data)
        _check(lambda: caption.load_npy(feats, p, captions_per_image=2), p)

    prop()


# ---- readers inside adapters (STS formats, SICK-R, SciDocs JSON) ----------------------------------
ADAPTER_READERS = {
    # task: (param overrides, {relative file: None}, call)
    "stsb": ({}, ["sts/STSBenchmark/sts-test.csv"], lambda a: a.load("test")),
    "sickr": ({}, ["sts/SICK/SICK_test_annotated.txt"], lambda a: a.load("test")),
    "sts12": ({"subsets": ["X"]}, ["sts/STS12/STS.input.X.txt", "sts/STS12/STS.gs.X.txt"], lambda a: a.load("test")),
    "sts17-ar-ar": ({"gold": ""}, ["sts17/STS.input.track1.ar-ar.txt"], lambda a: a.load("test")),
    "sick-r": (
        {},
        [f"senteval/SICK/{f}" for f in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt")],
        lambda a: a.load(),
    ),
    "scidocs": ({}, ["useb/data-eval/scidocs/x.json"], lambda a: a._json("useb/data-eval/scidocs/x.json")),
}


@pytest.mark.parametrize("task", sorted(ADAPTER_READERS))
def test_adapter_reader_never_crashes(task, registry, tmp_path):
    params, files, call = ADAPTER_READERS[task]

    @SETTINGS
    @given(data=st.lists(CONTENT, min_size=len(files), max_size=len(files)))
    def prop(data):
        paths = [_write(tmp_path, rel, d) for rel, d in zip(files, data)]
        adapter = fixture_adapter(registry, task, tmp_path, **params)
        try:
            call(adapter)
        except DataError as e:
            assert any(p.name in str(e) for p in paths), f"DataError names none of {files}: {e}"

    prop()


# ---- line-exact messages: a non-UTF-8 byte, a non-numeric score, a short row ----------------------
def _raises_at(fn, path: Path, line: int):
    with pytest.raises(DataError) as info:
        fn()
    assert re.search(rf"{re.escape(path.name)}:{line}\b", str(info.value)), str(info.value)


STSB_OK = "main-captions\tMSRvid\t2012test\t0001\t5.000\tA man.\tA man.\n"


@pytest.mark.parametrize(
    "bad, line",
    [
        (STSB_OK + "main-captions\tMSRvid\t2012test\t0002\tfive\tA.\tB.\n", 2),  # non-numeric score
        (STSB_OK + "main-captions\tMSRvid\t2012test\t0002\tnan\tA.\tB.\n", 2),  # NaN score
        (STSB_OK * 2 + "main\tshort\n", 3),  # short row
    ],
)
def test_stsb_bad_line_is_named(bad, line, registry, tmp_path):
    p = _write(tmp_path, "sts/STSBenchmark/sts-test.csv", bad.encode())
    _raises_at(lambda: fixture_adapter(registry, "stsb", tmp_path).load("test"), p, line)


def test_non_utf8_byte_is_named_with_its_line(registry, tmp_path):
    p = _write(tmp_path, "sts/STSBenchmark/sts-test.csv", STSB_OK.encode() * 2 + b"x\t\xff\n")
    _raises_at(lambda: fixture_adapter(registry, "stsb", tmp_path).load("test"), p, 3)


def test_sts12_bad_gold_names_the_gold_file(registry, tmp_path):
    _write(tmp_path, "sts/STS12/STS.input.X.txt", b"a\tb\nc\td\n")
    g = _write(tmp_path, "sts/STS12/STS.gs.X.txt", b"4.0\noops\n")
    _raises_at(lambda: fixture_adapter(registry, "sts12", tmp_path, subsets=["X"]).load("test"), g, 2)
    _write(tmp_path, "sts/STS12/STS.gs.X.txt", b"4.0\n3.0\n")
    short = _write(tmp_path, "sts/STS12/STS.input.X.txt", b"a\tb\nc\n")
    _raises_at(lambda: fixture_adapter(registry, "sts12", tmp_path, subsets=["X"]).load("test"), short, 2)


@pytest.mark.parametrize(
    "name, data, line",
    [
        ("askubuntu.eval", b"1\t2\t3 4\t1.0 2.0\n1\t2\t3 4\t1.0 x\n", 2),
        ("askubuntu.titles", b"1\tt\n2\n", 2),
        ("askubuntu.titles", b"1\tt\n2\t\xe9\n", 2),
        ("twitterpara.pit", b"1\tt\ta\tb\t3\n1\tt\ta\tb\tthree\n", 2),
        ("scidocs.qrel", b"q 0 d 1\nq 0 d x\n", 2),
        ("senteval.sst2", b"good\t1\nbad\tone\n", 2),
        ("senteval.mrpc", b"header\n1\ta\tb\ts\tt\nX\ta\tb\ts\tt\n", 3),
        ("senteval.sick", b"h\n1\ta\tb\n", 2),
        ("pairs.qqp", b"id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t1\t2\ta\tb\tmaybe\n", 2),
        ("afs.auto", b"regression_label,sentence_1,sentence_2\n1.0,a,b\nhigh,a,b\n", 3),
        ("cqadupstack.jsonl", b'{"_id": "1"}\n{oops\n', 2),
    ],
)
def test_reader_names_file_and_line(name, data, line, tmp_path):
    p = _write(tmp_path, "task-file.txt", data)
    _raises_at(lambda: FUNCTION_READERS[name](p), p, line)


def test_sick_relatedness_bad_score_line(registry, tmp_path):
    good = b"pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n1\ta\tb\t4.5\tNEUTRAL\n"
    for f in ("SICK_train.txt", "SICK_trial.txt"):
        _write(tmp_path, f"senteval/SICK/{f}", good)
    bad = _write(tmp_path, "senteval/SICK/SICK_test_annotated.txt", good + b"2\ta\tb\thigh\tNEUTRAL\n")
    _raises_at(lambda: fixture_adapter(registry, "sick-r", tmp_path).load(), bad, 3)
