"""A benchbench encoder handed to ``mteb``: any encoder benchbench loads (an HF id, a packaged model, a
folder a run saved) becomes an mteb ``EncoderProtocol``, encoding through the harness's pipeline
(de-duplication, batching, embedding cache), so that mteb's own evaluators score exactly the vectors
benchbench's adapters score.

    import mteb
    from benchbench import load_encoder
    from benchbench.evaluate.mteb_encoder import MTEBEncoder
    model = MTEBEncoder.from_name("runs/.../encoder")        # a folder benchbench saved
    mteb.evaluate(model, mteb.get_tasks(["STSBenchmark"]), cache=None)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction

from benchbench.encode.encoding import Embedder


class MTEBEncoder(AbsEncoder):
    """mteb's similarity for it is cosine (``similarity_fn_name``), as benchbench's adapters use."""

    def __init__(self, embedder: Embedder, name: str = "benchbench/encoder", revision: str | None = None):
        self.model = None
        self.embedder = embedder
        self.mteb_model_meta = ModelMeta.create_empty(
            overwrites={
                "name": name,
                "revision": revision or embedder.fingerprint[:40],
                "similarity_fn_name": ScoringFunction.COSINE,
            }
        )

    @classmethod
    def from_name(cls, model: str, **kw: Any) -> MTEBEncoder:
        from benchbench.encode.models import load_encoder

        return cls(Embedder(load_encoder(str(model)), **kw), name=f"benchbench/{str(model).rstrip('/').split('/')[-1]}")

    def encode(self, inputs: Any, **kwargs: Any) -> np.ndarray:
        """mteb passes a DataLoader of ``{"text": [...]}`` batches and its task/split/prompt as keywords
        (unused: a benchbench encoder has no prompts)."""
        texts: list[str] = []
        for batch in inputs:
            texts.extend(batch["text"])
        return self.embedder.embed(texts, desc="mteb").astype(np.float32)
