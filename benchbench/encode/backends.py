"""Encoding backends for evaluation: a trained ``TransformerEncoder``'s vectors through another runtime
or number format, with the same tokenizer, pooling and normalisation.

``--encode-backend``:
  ``torch``      eager PyTorch (the default), on ``--device`` (CUDA when there is one);
  ``onnx``       ONNX Runtime on the CPU (pip ``onnxruntime``), from a graph exported once per weights;
  ``openvino``   OpenVINO on the CPU (pip ``openvino``), reading that same exported graph, forced to f32;
  ``onnx-int8``  ONNX Runtime with dynamic int8 quantisation of the weights: LOSSY, opt-in only; its
                 results get their own result key and are marked ``lossy`` in the record.
``--encode-dtype`` (torch only): ``auto`` (bf16 on CUDA, fp32 elsewhere), ``fp32``, ``bf16`` (weights and
activations in bf16 with SDPA attention; the last hidden state is upcast to fp32 before pooling, so
every vector leaves as float32).

The exact backends agree with torch fp32 to cosine >= 0.99999 (tests/encode/test_encode_backends.py). Each
(backend, dtype) other than torch fp32 has its own embedding-cache folder (``encode_variant``, read by
``cache.cache_key``). The graph is exported with ``torch.onnx.export(dynamo=True)`` (torch.export: no
traced branch is baked in, unlike the legacy TorchScript exporter, which warned that it froze the
attention-mask checks; optimum was not used: ``optimum[onnxruntime]`` 2.1 downgrades transformers to 4.57)
and cached under ``<cache>/exported/<weight hash>/`` (``hash_weights``), written to a temp folder and
renamed, so a killed export leaves nothing that looks complete.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchbench.core.errors import ConfigError
from benchbench.encode.models import TransformerEncoder, hash_weights
from benchbench.store.files import atomic_writer, is_complete, mark_complete

log = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx", "openvino", "onnx-int8")
LOSSY_BACKENDS = frozenset({"onnx-int8"})
DTYPES = ("auto", "fp32", "bf16")
EXPORT_FORMAT = "v1"  # bump when the exported graph changes (inputs, outputs, pooling in the graph)
# Batch size for the CPU runtimes: 64 was within the run-to-run spread of the best of 32/64/128 for
# torch, onnx and openvino on a quiet machine (the torch encoder's default too); the measurement and its
# command are in leaderboards/speed/encode_throughput.md, section 2.
RUNTIME_BATCH_SIZE = 64


def check_options(backend: str, dtype: str) -> None:
    """ConfigError naming the option for an unknown backend or dtype, or a dtype the backend lacks."""
    if backend not in BACKENDS:
        raise ConfigError(f"--encode-backend {backend!r}: expected one of {', '.join(BACKENDS)}.")
    if dtype not in DTYPES:
        raise ConfigError(f"--encode-dtype {dtype!r}: expected one of {', '.join(DTYPES)}.")
    if backend != "torch" and dtype == "bf16":
        raise ConfigError(
            f"--encode-dtype bf16 is for --encode-backend torch; {backend} runs on the CPU in "
            f"{'int8' if backend == 'onnx-int8' else 'fp32'}. Use --encode-dtype auto or fp32 with it."
        )


def runtime_available(backend: str) -> str | None:
    """None when ``backend`` can run here, else what to install (the packages are in the ``fast`` extra)."""
    import importlib.util

    need = {"torch": [], "onnx": ["onnxruntime", "onnx", "onnxscript"], "openvino": ["openvino", "onnx", "onnxscript"]}
    need["onnx-int8"] = need["onnx"]
    missing = [m for m in need[backend] if importlib.util.find_spec(m) is None]
    return f"pip install {' '.join(missing)} (or pip install 'benchbench[fast]')" if missing else None


def check_runtime(backend: str, dtype: str) -> None:
    """The options checked and the backend's runtime found, before anything is trained: a ConfigError
    naming the option and what to install otherwise."""
    check_options(backend, dtype)
    missing = runtime_available(backend)
    if missing:
        raise ConfigError(f"--encode-backend {backend}: its runtime is not installed; {missing}.")


def _device(device: str | None) -> torch.device:
    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def resolve_dtype(backend: str, dtype: str, device: str | None) -> str:
    """The concrete dtype: ``auto`` is bf16 for torch on CUDA, else fp32 (int8 for onnx-int8)."""
    check_options(backend, dtype)
    if backend == "onnx-int8":
        return "int8"
    if dtype == "auto":
        return "bf16" if backend == "torch" and _device(device).type == "cuda" else "fp32"
    return dtype


def _is_plain(encoder: Any) -> bool:
    """A TransformerEncoder whose tokenize/forward/encode are the base class's own: only then do the
    backends reproduce it (a subclass may add a template, an MLP or a flow to its vectors)."""
    return type(encoder) is TransformerEncoder


_LAST: dict[tuple, tuple[Any, dict[str, Any]]] = {}  # the last one built: every task of a run reuses it


def evaluation_encoder(
    encoder: Any, backend: str = "torch", dtype: str = "auto", device: str | None = None
) -> tuple[Any, dict[str, Any]]:
    """(the encoder to evaluate with, the record's ``encode`` field). Torch fp32 on the encoder's own
    device is the encoder itself (its vectors and cache folder as before). An encoder the backends
    cannot reproduce (not a plain TransformerEncoder: a plugin's subclass, GRUs, BM25, word vectors) is
    evaluated with its own ``encode`` ("native"); when another backend or dtype was asked for, the
    record says so and why it was not used. The last wrapper built is reused while the encoder's
    weights are unchanged (the tasks of one run share it: one export, one session)."""
    want = resolve_dtype(backend, dtype, device)
    if not _is_plain(encoder):
        info: dict[str, Any] = {"backend": "native", "dtype": "as built", "lossy": False}
        if backend == "torch" and isinstance(encoder, TransformerEncoder):
            # its own forward in its own dtype, on the device the run evaluates on: models load on the CPU and
            # the training loop hands back on the CPU, so on a GPU machine a prompt or MLP encoder was
            # otherwise scored by one CPU thread (~50 s per TwitterPara cell on the H100 lanes vs ~2 s)
            dev, now = _device(device), encoder.device
            if now.type != dev.type or (dev.index is not None and now.index != dev.index):  # "cuda" is cuda:0's
                encoder.to(dev)  # only when it moves
            info["device"] = dev.type
        if backend != "torch" or dtype != "auto":
            info["requested"] = f"{backend}/{dtype}"
            info["note"] = (
                f"{type(encoder).__name__} is not a plain TransformerEncoder: evaluated with its own encode()"
            )
            log.warning("--encode-backend %s --encode-dtype %s: %s", backend, dtype, info["note"])
        return encoder, info
    dev = _device(device) if backend == "torch" else torch.device("cpu")
    if backend == "torch" and want == "fp32" and dev == encoder.device:
        return encoder, {"backend": "torch", "dtype": "fp32", "device": dev.type, "lossy": False}
    key = (id(encoder), encoder.fingerprint, backend, want, str(dev))
    if key not in _LAST:
        _LAST.clear()
        _LAST[key] = _build(encoder, backend, want, dev)
    return _LAST[key]


def _build(encoder: TransformerEncoder, backend: str, dtype: str, dev: torch.device) -> tuple[Any, dict[str, Any]]:
    if backend == "torch":
        wrapped = TorchBackendEncoder(encoder, dtype, dev)
        return wrapped, {
            "backend": "torch",
            "dtype": dtype,
            "device": dev.type,
            "attention": wrapped.attention,
            "lossy": False,
        }
    check_runtime(backend, "auto")
    runtime = (OpenVINOEncoder if backend == "openvino" else OnnxEncoder)(encoder, backend)
    return runtime, {
        "backend": backend,
        "dtype": dtype,
        "device": "cpu",
        "threads": runtime.threads,
        "runtime": runtime.runtime_version,
        "lossy": backend in LOSSY_BACKENDS,
    }


class _BackendEncoder:
    """What every backend shares with the torch encoder it stands for: the tokenizer (so padding,
    truncation and token counts are the same), ``normalize`` (applied by ``embed`` after the cache),
    ``fingerprint`` (the weights' own: records still name the trained encoder) and ``encode_variant``
    (appended to the fingerprint in the embedding-cache key only)."""

    def __init__(self, base: TransformerEncoder, variant: str, batch_size: int | None = None):
        self.base = base
        self.encode_variant = variant
        self.normalize = base.normalize
        self.batch_size = batch_size or base.batch_size
        self.name = base.name
        self.max_seq_length = base.max_seq_length

    @property
    def fingerprint(self) -> str:
        return self.base.fingerprint

    @property
    def dim(self) -> int:
        return self.base.dim

    def lengths(self, texts: list[str]) -> list[int]:
        return self.base.lengths(texts)

    def encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError


class TorchBackendEncoder(_BackendEncoder):
    """A copy of the encoder's transformer on ``device`` in ``dtype`` (bf16: weights and activations,
    SDPA attention); the last hidden state is upcast to fp32 before pooling. The trained encoder is
    not touched (it may be trained further, or evaluated again on another task)."""

    def __init__(self, base: TransformerEncoder, dtype: str, device: torch.device):
        super().__init__(base, f"torch-{dtype}")
        self.device = device
        model = copy.deepcopy(base.model).eval()
        if dtype == "bf16":
            model = model.to(dtype=torch.bfloat16)
        self.model = model.to(device)
        self.attention = _use_sdpa(self.model)

    def encode(self, texts: list[str]) -> np.ndarray:
        feats = {k: v.to(self.device) for k, v in self.base.tokenize(texts).items()}
        with torch.inference_mode():
            tokens = self.model(**feats).last_hidden_state.float()  # fp32 before pooling and scoring
            out = self.base.pool(tokens, feats["attention_mask"])
        return out.cpu().numpy()


def _use_sdpa(model: torch.nn.Module) -> str:
    """Ask for scaled-dot-product attention (fused kernels, bf16-friendly); the attention the model runs with."""
    try:
        model.set_attn_implementation("sdpa")  # type: ignore[operator]
    except (AttributeError, ValueError, ImportError) as e:  # an architecture without SDPA keeps its own
        log.info("SDPA attention not available for %s (%s); keeping its own", type(model).__name__, e)
    return str(getattr(model.config, "_attn_implementation", "unknown"))


# ---- the exported graph ------------------------------------------------------------------------------
class _Pooled(torch.nn.Module):
    """The graph exported: token ids -> the pooled sentence vector (TransformerEncoder.forward's own)."""

    def __init__(self, encoder: TransformerEncoder):
        super().__init__()
        self.encoder = encoder

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.encoder(input_ids, attention_mask, token_type_ids)["sentence_embedding"]


def _input_names(encoder: TransformerEncoder) -> list[str]:
    """The tokenizer outputs the forward pass takes, in ``_Pooled.forward``'s order."""
    got = encoder.tokenize(["a", "b c"])
    return [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in got]


def export_dir() -> Path:
    from benchbench.encode.cache import default_cache_dir

    return default_cache_dir().parent / "exported"


def export_key(encoder: TransformerEncoder) -> str:
    """The exported graph's identity: the weights (``hash_weights``), the pooling, the graph's inputs,
    the exporter's version and this module's format."""
    h = hash_weights(hashlib.blake2b(digest_size=16), encoder.model.state_dict())
    h.update(f"|{encoder.pooling}|{','.join(_input_names(encoder))}|torch={torch.__version__}|{EXPORT_FORMAT}".encode())
    return f"{type(encoder.model).__name__}-{h.hexdigest()}"


def export_onnx(encoder: TransformerEncoder) -> Path:
    """The fp32 ONNX graph of ``encoder`` (token ids -> pooled vector, dynamic batch and length),
    exported once per weights and reused from the cache afterwards."""
    final = export_dir() / export_key(encoder)
    if is_complete(final):
        return final / "model.onnx"
    names = _input_names(encoder)
    example = encoder.tokenize(["a short one", "a somewhat longer example sentence, with padding in the batch"])
    args = tuple(example[k].cpu() for k in names)
    module = _Pooled(copy.deepcopy(encoder).to("cpu").float()).eval()
    final.parent.mkdir(parents=True, exist_ok=True)
    log.info("exporting %s to ONNX (once for these weights) into %s", encoder.name or "the encoder", final)
    with tempfile.TemporaryDirectory(dir=final.parent) as tmp:
        out = Path(tmp) / "graph"
        out.mkdir()
        try:
            _export(module, args, names, out / "model.onnx", encoder.max_seq_length)
        except Exception as e:  # an architecture torch.export cannot capture: say which option to drop
            raise ConfigError(
                f"--encode-backend: exporting {encoder.name or type(encoder.model).__name__} to ONNX failed "
                f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); evaluate it with "
                f"--encode-backend torch."
            ) from e
        mark_complete(out, final.name)
        try:
            out.rename(final)
        except OSError:  # another process finished the same export first: use its copy
            if not is_complete(final):
                shutil.rmtree(final, ignore_errors=True)
                out.rename(final)
    return final / "model.onnx"


def _export(module: torch.nn.Module, args: tuple, names: list[str], path: Path, max_len: int) -> None:
    """torch.onnx.export (dynamo) with a dynamic batch and sequence length."""
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq", max=max(max_len, 8))
    with torch.no_grad(), _quiet():
        torch.onnx.export(
            module,
            args,
            str(path),
            dynamo=True,
            input_names=names,
            output_names=["sentence_embedding"],
            dynamic_shapes={k: {0: batch, 1: seq} for k in names},
            external_data=True,  # graphs over 2 GB (large models) need their weights beside them
            verbose=False,
        )


@contextlib.contextmanager
def _quiet():
    """The exporter's and the quantiser's chatter (deprecation notes, 'torchvision is not installed',
    'consider pre-processing') hidden: the export is an implementation detail of one option."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo", "")]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def quantized_onnx(encoder: TransformerEncoder) -> Path:
    """The int8 graph beside the fp32 one: ONNX Runtime's dynamic quantisation of the MatMul weights,
    per output channel (the embedding table stays fp32). Measured on all-MiniLM-L6-v2, min cosine to
    torch fp32 over 5 sentences: per-tensor 0.91 (0.90 with Gather quantised too), per-channel 0.978."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src = export_onnx(encoder)
    dst = src.with_name("model-int8.onnx")
    if not dst.is_file():
        with atomic_writer(dst) as f, _quiet():  # the quantiser writes the temp file by its name
            quantize_dynamic(
                src, f.name, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"]
            )
    return dst


def _runtime_threads() -> int:
    """Intra-op threads for the CPU runtimes: torch's own thread count, so each backend gets the same
    cores as eager torch (a fair comparison, and ``torch.set_num_threads``/OMP_NUM_THREADS are obeyed).
    All of torch's threads, not one: every runtime was markedly faster with 2 threads than with 1
    (leaderboards/speed/encode_throughput.md, section 2)."""
    return max(1, torch.get_num_threads())


class OnnxEncoder(_BackendEncoder):
    """ONNX Runtime (CPU) on the exported graph; ``onnx-int8`` on its dynamically quantised copy."""

    def __init__(self, base: TransformerEncoder, backend: str = "onnx"):
        import onnxruntime as ort

        super().__init__(base, backend, RUNTIME_BATCH_SIZE)
        path = quantized_onnx(base) if backend == "onnx-int8" else export_onnx(base)
        self.threads = _runtime_threads()
        so = ort.SessionOptions()  # takes its settings only as attributes
        for option, value in {
            "intra_op_num_threads": self.threads,
            "inter_op_num_threads": 1,
            "log_severity_level": 3,
        }.items():
            setattr(so, option, value)
        self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        self.names = [i.name for i in self.session.get_inputs()]
        self.runtime_version = f"onnxruntime {ort.__version__}"

    def encode(self, texts: list[str]) -> np.ndarray:
        feats = self.base.tokenize(texts)
        return np.asarray(self.session.run(None, {k: feats[k].numpy() for k in self.names})[0], dtype=np.float32)


class OpenVINOEncoder(_BackendEncoder):
    """OpenVINO (CPU) on the exported ONNX graph, with f32 inference precision forced (on CPUs with
    bf16 units OpenVINO would otherwise silently compute in bf16)."""

    def __init__(self, base: TransformerEncoder, backend: str = "openvino"):
        import openvino as ov

        super().__init__(base, backend, RUNTIME_BATCH_SIZE)
        core = ov.Core()
        self.threads = _runtime_threads()
        model = core.read_model(str(export_onnx(base)))
        self.names = [p.get_any_name() for p in model.inputs]
        self.compiled = core.compile_model(
            model,
            "CPU",
            {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": self.threads, "PERFORMANCE_HINT": "LATENCY"},
        )
        self.request = self.compiled.create_infer_request()
        self.runtime_version = f"openvino {ov.__version__}"

    def encode(self, texts: list[str]) -> np.ndarray:
        feats = self.base.tokenize(texts)
        out = self.request.infer({k: feats[k].numpy() for k in self.names})
        return np.array(out[self.compiled.output(0)], dtype=np.float32)  # a copy: the request reuses its buffer
