"""What the training-free LLM readouts (PromptEOL, echo, token prepending) share: the readout built on a
decoder start (``as_readout``), and its persistence (``ReadoutEncoder``): ``save`` writes the decoder
folder plus a ``benchbench_wrapper.json`` naming the readout's registered loader, and ``from_saved`` is that
loader, rebuilding the readout from the saved settings so that ``--model PATH`` gives the same vectors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchbench import ConfigError, DecoderEncoder, TrainContext, is_decoder_name

WRAPPER_FILE = "benchbench_wrapper.json"  # names the loader (benchbench.encode.models reads it)
DECODER_FILE = "benchbench_decoder.json"  # DecoderEncoder.save's readout settings


class ReadoutEncoder(DecoderEncoder):
    """A ``DecoderEncoder`` read through a method's prompt. A subclass names its registered ``loader`` and
    the constructor options it adds to ``DecoderEncoder``'s readout (``saved_options``: each is a key of
    its ``readout()``, so ``DecoderEncoder.save`` writes it)."""

    loader: str = ""
    saved_options: tuple[str, ...] = ()

    def save(self, path: str | Path) -> Path:
        path = DecoderEncoder.save(self, path)
        (path / WRAPPER_FILE).write_text(json.dumps({"loader": self.loader}))
        return path

    @classmethod
    def from_saved(cls, base: DecoderEncoder, path: str | Path) -> Any:
        """The loader registered under ``loader``: ``base`` (the folder loaded as a ``DecoderEncoder``, with
        the saved pooling, template, layer, attention, padding side and max length) read out by ``cls``,
        with ``saved_options`` from the folder's ``benchbench_decoder.json``."""
        r = base.readout()
        saved = json.loads((Path(path) / DECODER_FILE).read_text(encoding="utf-8")) if cls.saved_options else {}
        return cls(
            base.model,
            base.tokenizer,
            pooling=r["pooling"],
            max_seq_length=r["max_seq_length"],
            name=base.name,
            template=r["template"],
            layer=r["layer"],
            attention=r["attention"],
            padding_side=r["padding_side"],
            **{k: saved[k] for k in cls.saved_options},
        )


def as_readout(cls: type[DecoderEncoder], ctx: TrainContext, method: str, load: dict[str, Any], **kw: Any) -> Any:
    """The base model (``ctx.load_encoder(**load)``) read out by ``cls``; a start that is not a decoder-only
    LLM is refused before it loads."""
    if not is_decoder_name(ctx.model or ""):
        raise ConfigError(
            f"{method}: the base model must be a decoder-only LLM (e.g. --model smollm2-135m-instruct, tiny-llama, "
            f"a Llama/Qwen2 folder or hub id); got {ctx.model!r}."
        )
    base = ctx.load_encoder(**load)
    kw.setdefault("max_seq_length", base.max_seq_length)
    return cls(base.model, base.tokenizer, name=base.name, attention=base.attention, normalize=False, **kw)
