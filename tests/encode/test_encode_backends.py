"""Evaluation backends (benchbench/encode/backends.py): ONNX Runtime and OpenVINO agree with torch fp32
on real STS-B pairs (every vector to cosine >= 0.99999, the main score to 0.01), bf16 runs on the CPU
and returns float32 vectors close to fp32, int8 is marked lossy and keyed apart, and the backend and
dtype reach the record, the result key (lossy only) and the embedding-cache key."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from benchbench.core.errors import ConfigError
from benchbench.encode import backends
from benchbench.encode.cache import EmbeddingCache, cache_key
from benchbench.encode.encoding import Embedder, embed
from benchbench.encode.models import TransformerEncoder, load_encoder

HAS_ORT = all(importlib.util.find_spec(m) for m in ("onnxruntime", "onnx", "onnxscript"))
HAS_OV = HAS_ORT and importlib.util.find_spec("openvino") is not None
needs_ort = pytest.mark.skipif(not HAS_ORT, reason="onnxruntime/onnx/onnxscript not installed (pip install '.[fast]')")
needs_ov = pytest.mark.skipif(not HAS_OV, reason="openvino/onnx/onnxscript not installed (pip install '.[fast]')")
N_PAIRS = 300  # STS-B test pairs: 600 texts, enough for a stable Spearman, seconds to encode


@pytest.fixture(scope="session")
def export_root(tmp_path_factory) -> Path:
    """One export folder for the whole session: each model is exported once (~15 s on 2 cores)."""
    return tmp_path_factory.mktemp("exported")


@pytest.fixture(autouse=True)
def _shared_exports(export_root, monkeypatch):
    monkeypatch.setattr(backends, "export_dir", lambda: export_root)
    backends._LAST.clear()


@pytest.fixture(scope="module")
def stsb(real_data):
    """The first N_PAIRS pairs of STS-B test through the registered adapter (real data)."""
    from benchbench.core.registry import load_registry, make_adapter
    from benchbench.store.data import DataStore

    adapter = make_adapter(load_registry(), "stsb", DataStore(str(real_data), allow_download=False))
    full = adapter.load
    adapter.load = lambda split: {k: (a[:N_PAIRS], b[:N_PAIRS], y[:N_PAIRS]) for k, (a, b, y) in full(split).items()}
    ((a, b, _),) = adapter.load("test").values()
    assert len(a) == N_PAIRS
    return adapter, a + b


MODELS = {"tiny-bert": dict(pooling="mean"), "all-MiniLM-L6-v2": {}}  # tiny-bert mean: the run test's model


@pytest.fixture(scope="module", params=list(MODELS))
def reference(request, stsb, tmp_path_factory):
    """(encoder, torch fp32 vectors of the STS-B texts, torch fp32 main score)."""
    enc = load_encoder(request.param, **MODELS[request.param])
    adapter, texts = stsb
    vecs, score = _vectors_and_score(enc, adapter, texts, tmp_path_factory.mktemp("emb"))
    return enc, vecs, score


def _vectors_and_score(enc, adapter, texts, folder) -> tuple[np.ndarray, float]:
    """The texts' vectors through the pipeline (batching, length sorting, normalisation) and the
    adapter's main score, encoding once: the score reads the vectors back from a private cache."""
    cache = EmbeddingCache(folder)
    vecs = embed(enc, texts, cache=cache, progress=False)
    result = adapter.evaluate(Embedder(enc, cache=cache, progress=False), "test")
    return vecs, result.scores[adapter.spec.main_metric]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.mark.slow
@pytest.mark.parametrize(
    "backend,runtime_class",
    [pytest.param("onnx", "OnnxEncoder", marks=needs_ort), pytest.param("openvino", "OpenVINOEncoder", marks=needs_ov)],
)
def test_runtime_agrees_with_torch_fp32_on_stsb(reference, stsb, backend, runtime_class, tmp_path):
    enc, ref, ref_score = reference
    adapter, texts = stsb
    got_enc, info = backends.evaluation_encoder(enc, backend, "auto")
    assert type(got_enc).__name__ == runtime_class  # the runtime itself encodes, not the torch encoder
    assert info == {
        "backend": backend,
        "dtype": "fp32",
        "device": "cpu",
        "threads": torch.get_num_threads(),
        "runtime": got_enc.runtime_version,
        "lossy": False,
    }
    if backend == "openvino":  # f32 asked for explicitly: on CPUs with bf16 units OpenVINO would pick bf16
        assert got_enc.compiled.get_property("INFERENCE_PRECISION_HINT").to_string() == "f32"
    got, score = _vectors_and_score(got_enc, adapter, texts, tmp_path)
    assert got.dtype == np.float32 and got.shape == ref.shape
    assert _cosines(got, ref).min() >= 0.99999
    assert np.abs(got - ref).max() < 1e-4  # also the norms: MiniLM's normalisation is kept
    assert abs(score - ref_score) <= 0.01, (score, ref_score)
    # a batch of one and a batch without padding (the export's shapes are dynamic, no branch baked in)
    for batch in ([texts[0]], ["a b c", "d e f"]):
        assert _cosines(got_enc.encode(batch), enc.encode(batch)).min() >= 0.99999


@pytest.mark.slow
def test_bf16_on_cpu_is_close_to_fp32_and_returns_float32(reference, stsb):
    enc, ref, _ = reference
    _, texts = stsb
    got_enc, info = backends.evaluation_encoder(enc, "torch", "bf16", "cpu")
    assert info == {"backend": "torch", "dtype": "bf16", "device": "cpu", "attention": "sdpa", "lossy": False}
    assert next(got_enc.model.parameters()).dtype == torch.bfloat16  # really computed in bf16 ...
    assert next(enc.model.parameters()).dtype == torch.float32  # ... on a copy: the trained encoder is untouched
    n = 200  # bf16 matmuls are emulated on CPUs without bf16 units: a subset keeps it seconds there
    got = embed(got_enc, texts[:n], progress=False)
    assert got.dtype == np.float32
    cos = _cosines(got, ref[:n])
    assert cos.min() >= 0.99 and cos.min() < 0.999999  # close, and not the fp32 vectors themselves
    assert np.abs(np.linalg.norm(got, axis=1) - np.linalg.norm(ref[:n], axis=1)).max() < 0.05  # normalised alike


@needs_ort
def test_int8_is_lossy_marked_and_keyed_apart(tmp_path):
    enc = load_encoder("tiny-bert", pooling="mean")
    texts = ["A man is playing a guitar.", "A woman is slicing an onion.", "Two dogs run on the beach."]
    exact, _ = backends.evaluation_encoder(enc, "onnx", "auto")
    lossy, info = backends.evaluation_encoder(enc, "onnx-int8", "auto")
    assert info["lossy"] is True and info["dtype"] == "int8" and info["backend"] == "onnx-int8"
    a, b, ref = exact.encode(texts), lossy.encode(texts), enc.encode(texts)
    assert np.abs(a - ref).max() < 1e-5 < np.abs(b - ref).max()  # int8 really changed the vectors
    assert _cosines(b, ref).min() > 0.9
    assert len({cache_key(enc), cache_key(exact), cache_key(lossy)}) == 3
    assert cache_key(enc) == enc.fingerprint and cache_key(exact) == f"{enc.fingerprint}-onnx"
    assert lossy.fingerprint == enc.fingerprint  # records still name the trained weights


def test_bad_options_name_the_option_and_what_to_do(monkeypatch):
    with pytest.raises(ConfigError, match="--encode-backend 'tensorrt'.*torch, onnx, openvino, onnx-int8"):
        backends.check_options("tensorrt", "auto")
    with pytest.raises(ConfigError, match="--encode-dtype 'fp16'"):
        backends.check_options("torch", "fp16")
    with pytest.raises(ConfigError, match="--encode-dtype bf16 is for --encode-backend torch"):
        backends.check_options("onnx", "bf16")
    # a missing runtime is named with its pip command, before anything is built
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: None if m == "openvino" else real(m, *a))
    with pytest.raises(
        ConfigError, match=r"--encode-backend openvino: its runtime is not installed; pip install openvino"
    ):
        backends.check_runtime("openvino", "auto")


def test_auto_dtype_is_bf16_on_cuda_and_fp32_elsewhere():
    assert backends.resolve_dtype("torch", "auto", "cuda") == "bf16"
    assert backends.resolve_dtype("torch", "auto", "cuda:1") == "bf16"
    assert backends.resolve_dtype("torch", "auto", "cpu") == "fp32"
    assert backends.resolve_dtype("torch", "fp32", "cuda") == "fp32"
    assert backends.resolve_dtype("onnx", "auto", "cuda") == "fp32"  # the CPU runtimes are fp32
    assert backends.resolve_dtype("onnx-int8", "auto", None) == "int8"


def test_torch_fp32_on_its_own_device_is_the_encoder_itself(tiny_encoder):
    got, info = backends.evaluation_encoder(tiny_encoder, "torch", "auto", "cpu")
    assert got is tiny_encoder and cache_key(got) == tiny_encoder.fingerprint  # old cache folders still serve
    assert info == {"backend": "torch", "dtype": "fp32", "device": "cpu", "lossy": False}


def test_a_subclass_is_evaluated_natively_and_the_record_says_why(tiny_encoder, caplog):
    class WithHead(TransformerEncoder):  # a plugin's encoder: the backends cannot know what it adds
        pass

    sub = WithHead(tiny_encoder.model, tiny_encoder.tokenizer)
    got, info = backends.evaluation_encoder(sub, "onnx", "auto")
    assert got is sub
    assert info["backend"] == "native" and info["requested"] == "onnx/auto" and "WithHead" in info["note"]
    assert "WithHead" in caplog.text
    assert "note" not in backends.evaluation_encoder(sub, "torch", "auto")[1]  # nothing asked, nothing to say


def test_a_subclass_is_scored_on_the_runs_device_and_the_record_says_which(tiny_encoder, monkeypatch):
    class WithHead(TransformerEncoder):
        pass

    sub = WithHead(tiny_encoder.model, tiny_encoder.tokenizer)
    moves: list[torch.device] = []
    monkeypatch.setattr(sub, "to", lambda d: moves.append(torch.device(d)) or sub)  # the fixture's model stays put
    got, info = backends.evaluation_encoder(sub, "torch", "auto", "meta")  # a device the encoder is not on
    assert got is sub and moves == [torch.device("meta")] and info["device"] == "meta"
    assert info["backend"] == "native" and info["dtype"] == "as built"  # its own forward and dtype, moved
    moves.clear()
    assert backends.evaluation_encoder(sub, "torch", "auto", "cpu")[1]["device"] == "cpu" and moves == []
    monkeypatch.setattr(TransformerEncoder, "device", property(lambda self: torch.device("meta", 0)))
    assert backends.evaluation_encoder(sub, "torch", "auto", "meta")[1]["device"] == "meta" and moves == []  # on it
    backends.evaluation_encoder(sub, "torch", "auto", "meta:1")  # another card of that kind: moved
    assert moves == [torch.device("meta", 1)]
    moves.clear()
    info = backends.evaluation_encoder(sub, "onnx", "auto", "meta")[1]  # not asked for torch: left where it is
    assert moves == [] and "device" not in info

    class Words(torch.nn.Module):  # native but not a transformer (GRUs, word vectors): its encode is its own
        def encode(self, texts):
            return np.zeros((len(texts), 2), dtype=np.float32)

    words = Words()
    monkeypatch.setattr(words, "to", lambda d: moves.append(d) or words)
    assert "device" not in backends.evaluation_encoder(words, "torch", "auto", "meta")[1] and moves == []


def test_bf16_wrapper_is_reused_while_the_weights_are_unchanged(tiny_encoder):
    first, _ = backends.evaluation_encoder(tiny_encoder, "torch", "bf16", "cpu")
    assert backends.evaluation_encoder(tiny_encoder, "torch", "bf16", "cpu")[0] is first
    with torch.no_grad():
        tiny_encoder.model.embeddings.word_embeddings.weight[0, 0] += 1.0  # trained further: a new copy
    try:
        assert backends.evaluation_encoder(tiny_encoder, "torch", "bf16", "cpu")[0] is not first
    finally:
        with torch.no_grad():
            tiny_encoder.model.embeddings.word_embeddings.weight[0, 0] -= 1.0


@needs_ort
def test_export_is_cached_by_weight_hash(export_root, monkeypatch):
    enc = load_encoder("tiny-bert", pooling="mean")
    path = backends.export_onnx(enc)
    assert path.parent.parent == export_root and (path.parent / ".complete").is_file()
    monkeypatch.setattr(backends, "_export", lambda *a: pytest.fail("exported twice"))
    assert backends.export_onnx(load_encoder("tiny-bert", pooling="mean")) == path  # same weights: reused
    other = load_encoder("tiny-bert", pooling="mean", seed=1)
    assert backends.export_key(other) != backends.export_key(enc)  # other weights: another graph
    assert backends.export_key(load_encoder("tiny-bert", pooling="cls")) != backends.export_key(enc)


@needs_ort
def test_run_records_the_backend_and_keys_only_lossy_runs_apart(env, monkeypatch, capsys):
    from benchbench.cli.main import main
    from benchbench.store.results import ResultStore

    monkeypatch.chdir(env)
    base = ["run", "--method", "plm-mean", "--model", "tiny-bert", "--tasks", "sts-mini", "--json"]
    assert main(base) == 0
    (torch_rec,) = json.loads(capsys.readouterr().out)
    assert torch_rec["encode"] == {"backend": "torch", "dtype": "fp32", "device": "cpu", "lossy": False}
    assert main([*base, "--encode-backend", "onnx", "--force"]) == 0  # same key: re-evaluated in place
    (onnx_rec,) = json.loads(capsys.readouterr().out)
    assert onnx_rec["encode"]["backend"] == "onnx" and onnx_rec["evaluated"]["test"]["encode"]["backend"] == "onnx"
    assert onnx_rec["config_hash"] == torch_rec["config_hash"]
    assert abs(onnx_rec["splits"]["test"]["main_score"] - torch_rec["splits"]["test"]["main_score"]) <= 0.01
    fp = torch_rec["encoder_fingerprint"]
    folders = {p.name for p in (env / "cache" / "embeddings").iterdir()}
    assert {fp, f"{fp}-onnx"} <= folders  # each runtime its own cache folder
    assert main([*base, "--encode-backend", "onnx-int8"]) == 0
    (int8_rec,) = json.loads(capsys.readouterr().out)
    assert int8_rec["encode"]["lossy"] is True and int8_rec["config_hash"] != torch_rec["config_hash"]
    assert len(list(ResultStore("results").records())) == 2  # the lossy result never replaced the exact one


def test_run_refuses_a_dtype_the_backend_lacks(capsys):
    from benchbench.cli.main import main

    assert (
        main(["run", "--method", "plm-mean", "--tasks", "stsb", "--encode-backend", "onnx", "--encode-dtype", "bf16"])
        != 0
    )
    assert "--encode-dtype bf16 is for --encode-backend torch" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "--method", "plm-mean", "--tasks", "stsb", "--encode-backend", "tensorrt"])
    assert "invalid choice: 'tensorrt'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", "--methods", "simcse", "--tasks", "stsb"],
        ["study", "run", "post-training-minilm"],
        ["reproduce", "tsdae-table2"],
        ["run", "--method", "simcse", "--tasks", "stsb"],
    ],
)
def test_every_command_that_runs_takes_the_encode_options(argv):
    """sweep, study run and reproduce encode like `run`: the same two options reach RunOptions."""
    import importlib

    main = importlib.import_module("benchbench.cli.main")
    args = main.build_parser().parse_args([*argv, "--encode-backend", "onnx", "--encode-dtype", "fp32"])
    assert main.encode_options(args) == {"encode_backend": "onnx", "encode_dtype": "fp32"}
    assert main.encode_options(main.build_parser().parse_args(argv)) == {
        "encode_backend": "torch",
        "encode_dtype": "auto",
    }


def test_study_run_and_reproduce_pass_the_backend_to_every_cell(monkeypatch):
    from benchbench.report import reproduce
    from benchbench.run import study as studies
    from benchbench.run import sweep

    seen = {}
    monkeypatch.setattr(sweep, "run_sweep", lambda cells, base, *a, **k: seen.update(base) or [])
    st = studies.load_study("post-training-minilm")
    studies.run(st, "out", cells=[], encode={"encode_backend": "openvino", "encode_dtype": "fp32"})
    assert seen["encode_backend"] == "openvino" and seen["encode_dtype"] == "fp32" and seen["store_items"] is True
    b = reproduce.Budget(encode_backend="onnx", encode_dtype="fp32")
    base = reproduce.base_options(b, "out")
    assert base["encode_backend"] == "onnx"
    line = reproduce.command(sweep.SweepRun("simcse", "stsb", 1, "unsupervised", {}), base)
    assert "--encode-backend onnx --encode-dtype fp32" in line, line
