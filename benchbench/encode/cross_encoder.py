"""A cross-encoder: ``[CLS] a [SEP] b [SEP]`` -> transformer -> linear head -> one logit, scored as
``sigmoid(logit)``. A ``PairScorer`` like any encoder here, so it lives in ``encode/`` (pairwise tasks
score with it, loaders reload it); its training objective is ``train/cross_encoder.py``.

Saved as a sentence-transformers ``CrossEncoder`` folder (HF sequence classification with one label,
safetensors weights, the tokenizer) plus ``benchbench_cross.json`` (its max length), so
``sentence_transformers.CrossEncoder(folder)`` reads it too. Loading refuses pickled weights and
custom code, as every model load in benchbench does."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchbench.encode.models import NO_REMOTE_CODE, TransformerEncoder, _refuse_pickled_weights, hash_weights

META_FILE = "benchbench_cross.json"


class CrossEncoderScorer(torch.nn.Module):
    """A pair model whose score is ``sigmoid(logit)`` of a linear head on the [CLS] state (through
    the pooler where the architecture has one, as HF's sequence classification does)."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, max_length: int = 64, batch_size: int = 64):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.batch_size = batch_size

    @classmethod
    def from_encoder(cls, encoder: TransformerEncoder, max_length: int, seed: int) -> CrossEncoderScorer:
        """A cross-encoder whose transformer starts from ``encoder``'s weights and whose head is new,
        initialised under ``seed`` without touching the global RNG (HF builds the head when it loads
        the plain transformer as a classifier; going through a folder is how it does so)."""
        from transformers import AutoModelForSequenceClassification

        with tempfile.TemporaryDirectory() as d:
            encoder.model.save_pretrained(d)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                model = AutoModelForSequenceClassification.from_pretrained(d, num_labels=1, **NO_REMOTE_CODE)
        return cls(model, encoder.tokenizer, max_length=max_length)

    @classmethod
    def load(cls, path: str | Path, max_length: int | None = None) -> CrossEncoderScorer:
        """A saved cross-encoder (this class's folder or any one-label CrossEncoder folder whose weights
        are safetensors); ``max_length`` None: the saved one, else 64."""
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = Path(path)
        _refuse_pickled_weights(str(path), str(path))
        meta = json.loads((path / META_FILE).read_text()) if (path / META_FILE).is_file() else {}
        model = AutoModelForSequenceClassification.from_pretrained(str(path), use_safetensors=True, **NO_REMOTE_CODE)
        return cls(
            model.eval(),
            AutoTokenizer.from_pretrained(str(path), **NO_REMOTE_CODE),
            max_length=max_length or meta.get("max_length", 64),
        )

    def head_names(self) -> set[str]:
        """The parameters outside the transformer body: the linear layer on [CLS] and the pooler before
        it (new, or never trained by sentence-embedding training), as ``named_parameters`` names them:
        what a method gives its own learning rate (Trans-Encoder's ``cross_head_lr``)."""
        base = self.model.base_model
        pooler = getattr(base, "pooler", None)
        body = {id(p) for p in base.parameters()} - {id(p) for p in (pooler.parameters() if pooler else [])}
        return {n for n, p in self.named_parameters() if id(p) not in body}

    def tokenize(self, a: list[str], b: list[str]):
        """The pairs ``(a[i], b[i])`` as one padded batch of tensors, stripped and cut to ``max_length``."""
        return self.tokenizer(
            [x.strip() for x in a],
            [x.strip() for x in b],
            padding=True,
            truncation="longest_first",
            max_length=self.max_length,
            return_tensors="pt",
        )

    def forward(self, **features: torch.Tensor) -> torch.Tensor:
        """One logit per tokenized pair (float32 whatever the autocast dtype)."""
        return self.model(**features).logits.reshape(-1).float()

    def logits(self, a: list[str], b: list[str]) -> torch.Tensor:
        """One raw logit per pair, on the model's device, with gradients when training."""
        dev = next(self.parameters()).device
        return self(**{k: v.to(dev) for k, v in self.tokenize(a, b).items()})

    def score_pairs(self, a: list[str], b: list[str]) -> np.ndarray:
        """sigmoid(logit) per pair, batched longest-first (little padding), returned in input order."""
        was = self.training
        self.eval()
        out = np.empty(len(a), dtype=np.float64)
        order = np.argsort([-(len(x) + len(y)) for x, y in zip(a, b)], kind="stable")
        try:
            with torch.inference_mode():
                for s in range(0, len(order), self.batch_size):
                    idx = order[s : s + self.batch_size]
                    out[idx] = torch.sigmoid(self.logits([a[i] for i in idx], [b[i] for i in idx])).cpu().numpy()
        finally:
            self.train(was)
        return out

    @property
    def fingerprint(self) -> str:
        """The weights' bytes (computed at every call, as ``TransformerEncoder.fingerprint``) and every
        setting that changes a score: the max length and the tokenizer (its class, size and lowercasing;
        v1 missed the lowercasing). Not ``batch_size``: scores come back the same whatever the batching."""
        h = hash_weights(hashlib.blake2b(digest_size=16), self.model.state_dict())
        tok = self.tokenizer
        h.update(
            f"|{self.max_length}|{type(tok).__name__}|{len(tok)}|{getattr(tok, 'do_lower_case', None)}|cross-v2".encode()
        )
        return f"ce-{h.hexdigest()}"

    def save(self, path: str | Path) -> Path:
        """Write the model (safetensors), tokenizer and max length into ``path``; ``load(path)`` gives
        back the same scores. Returns ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path)  # safetensors (transformers' default)
        self.tokenizer.save_pretrained(path)
        (path / META_FILE).write_text(json.dumps({"max_length": self.max_length}))
        return path
