"""Prompt-based sentence vectors, shared by PromptBERT and SNCSE (SNCSE builds on PromptBERT's
representation): a template ``prefix [X] suffix`` around the sentence's token ids, the hidden state at
its [MASK] as the sentence vector, and the official ``MLPLayer``.

Not a method (no hooks, no entry point): the two plugins import it as ``benchbench_plugins._prompt``.
Like a plugin, it imports only ``benchbench``'s public API.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from benchbench import ConfigError, TransformerEncoder


@dataclass(frozen=True)
class Template:
    """A prompt ``prefix [X] suffix`` as token ids: ``[CLS] prefix sentence suffix [SEP]``, the one
    [MASK] in the suffix."""

    text: str
    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    cls: int
    sep: int
    mask: int

    @classmethod
    def parse(cls, text: str, tokenizer, who: str = "prompt") -> Template:
        """``who`` names the method in errors (``promptbert: template ... must hold ...``)."""
        if text.count("[X]") != 1 or text.count("[MASK]") != 1 or text.index("[MASK]") < text.index("[X]"):
            raise ConfigError(
                f"{who}: template {text!r} must hold one [X] (the sentence) and one [MASK] after it, "
                f"e.g. 'This sentence : \"[X]\" means [MASK] .'"
            )
        if tokenizer.mask_token_id is None:
            raise ConfigError(f"{who}: the base model's tokenizer has no mask token; pick a masked LM.")
        before, after = text.split("[X]")
        ids = lambda s: tuple(tokenizer(s, add_special_tokens=False)["input_ids"])  # noqa: E731
        return cls(
            text,
            ids(before),
            ids(after.replace("[MASK]", tokenizer.mask_token)),
            tokenizer.cls_token_id,
            tokenizer.sep_token_id,
            tokenizer.mask_token_id,
        )

    @property
    def overhead(self) -> int:
        """Tokens the template adds to a sentence ([CLS] and [SEP] included)."""
        return len(self.prefix) + len(self.suffix) + 2

    def wrap(self, sentence: list[int]) -> list[int]:
        return [self.cls, *self.prefix, *sentence, *self.suffix, self.sep]

    def mask_index(self, n: int) -> int:
        """Where the [MASK] is in ``wrap`` of an ``n``-token sentence."""
        return 1 + len(self.prefix) + n + self.suffix.index(self.mask)


def sentence_ids(tokenizer, texts: list[str], limit: int | None = None) -> list[list[int]]:
    """Each sentence's token ids alone (no special tokens), cut to ``limit`` tokens when given."""
    ids = tokenizer([t.strip() for t in texts], add_special_tokens=False)["input_ids"] if texts else []
    return [x[:limit] for x in ids] if limit is not None else ids


def pad_rows(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids and their attention mask."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    mask = (torch.arange(width)[None] < torch.tensor([len(r) for r in rows])[:, None]).long()
    return ids, mask


def make_mlp(encoder: TransformerEncoder) -> torch.nn.Sequential:
    """The official ``MLPLayer`` (dense + tanh), initialised as BERT initialises a linear layer."""
    lin = torch.nn.Linear(encoder.dim, encoder.dim)
    torch.nn.init.normal_(lin.weight, std=float(getattr(encoder.model.config, "initializer_range", 0.02)))
    torch.nn.init.zeros_(lin.bias)
    return torch.nn.Sequential(lin, torch.nn.Tanh()).to(encoder.device)
