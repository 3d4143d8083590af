"""Echo embeddings, training-free (Springer et al. 2024, "Repetition Improves Language Model Embeddings";
code github.com/jakespringer/echo-embeddings at c752c46, ``echo_embeddings.py``: ``EchoParser``, ``EchoPooling``).

A causal LM's early tokens cannot see later ones. Echo repeats the text: the prompt holds it twice, and
the sentence vector pools only the token states of the SECOND occurrence, each of which has read the
whole text once already. No training: the encoder is the pretrained decoder read through the prompt.

The template language is the reference's: text in braces is pooled (``{%%text%%}``), braces opened with
``!`` are read but not pooled (``{!%%text%%}``), ``%%name%%`` is a variable (``text``, ``prompt``), text
outside braces is a fixed part of the prompt, and each brace group is cut to ``piece_max_length`` tokens
on its own (so ``{</s>}`` in its own braces is never cut off).

| item | paper | reference code (jakespringer/echo-embeddings@c752c46, README, ``example.py``) | benchbench |
|---|---|---|---|
| prompt | the text twice; pool the second occurrence | ``<s>Instruct:{!%%prompt%%,}\\nQuery:{!%%text%%}\\nQuery again:{%%text%%}{</s>}`` (the ``query`` template; "for symmetric similarity encode both sentences with the query template") | same template (``template``) |
| instruction | per task (MTEB) | README example: "Retrieve passages that answer the question"; no STS instruction is published in the repository | ``prompt = "Retrieve semantically similar text."``, E5-Mistral's STS instruction (a departure: the repository names none for STS) |
| ``<s>`` / ``</s>`` | - | Mistral's BOS / EOS written into the template; the tokenizer adds no special token (``add_bos_token=False, add_eos_token=False``) | replaced by the tokenizer's own BOS / EOS tokens (``<s>`` dropped when it has no BOS: Qwen2); pieces tokenized without special tokens |
| pooling | mean (zero-shot) or last token | ``EchoPooling('mean')`` over the pooled pieces (the second text AND the final ``</s>``), NaN set to 0; ``'last'``: last pooled token | same (``pooling`` mean / last) |
| tokenization | - | each piece tokenized ON ITS OWN and concatenated; each cut to ``max_length`` (example: 300); right padding, pad ``<unk>`` when none | same; ``piece_max_length`` 300 |
| readout layer | last layer | ``AutoModel(...).last_hidden_state`` (after the final norm) | same (``layer=-1``) |
| model | Mistral-7B(-Instruct), LLaMA-2 | a fine-tuned ``jspringer/echo-mistral-7b-instruct-*`` in the example; the zero-shot rows use the base LLMs | offline: SmolLM2-135M-Instruct, instruction-tuned, 4-bit GGUF de-quantised (``smollm2-135m-instruct``) |

Equality with the reference ``EchoParser`` + ``EchoPooling`` (re-implemented from the fetched source in
``tests/plugins/llm_reference.py``) on tiny random Llama and Qwen2 decoders:
leaderboards/new_methods/llm_equality.md (``bench/llm_equality.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import torch
from benchbench_plugins._readout import ReadoutEncoder, as_readout

from benchbench import ConfigError, Method, TrainContext, hookimpl

TEMPLATE = "<s>Instruct:{!%%prompt%%,}\nQuery:{!%%text%%}\nQuery again:{%%text%%}{</s>}"
PROMPT = "Retrieve semantically similar text."
LOADER = "echo"
_BRACES = re.compile(r"\{(.|\n|\r|\t)+?\}")  # the reference's _parse_template pattern


@dataclass
class EchoConfig:
    template: str = TEMPLATE
    prompt: str = PROMPT
    pooling: str = "mean"  # over the pooled pieces: "mean" (the zero-shot setting) or "last"
    piece_max_length: int = 300  # tokens per brace group (the reference example's max_length)
    layer: int = -1
    batch_size: int = field(default=16, metadata={"hash": False})


def parse_template(template: str) -> list[tuple[str, bool]]:
    """(piece, is_variable) in order, as the reference's ``_parse_template`` splits it: the text between
    brace groups, and each brace group's content without its braces."""
    matches = list(_BRACES.finditer(template))
    if not matches:
        raise ConfigError(f"echo: template {template!r} has no brace group to pool")
    pieces: list[tuple[str, bool]] = []
    for i, m in enumerate(matches):
        pieces.append((template[(matches[i - 1].end() if i else 0) : m.start()], False))
        pieces.append((m.group()[1:-1], True))
    pieces.append((template[matches[-1].end() :], False))
    return [(p, var) for p, var in pieces if p]


class EchoEncoder(ReadoutEncoder):
    """The mean (or last) token state over the template's pooled pieces (``{...}`` without ``!``)."""

    kind = "echo"
    loader = LOADER
    saved_options = ("echo_template", "prompt", "piece_max_length")

    def __init__(
        self, *a: Any, echo_template: str = TEMPLATE, prompt: str = PROMPT, piece_max_length: int = 300, **kw: Any
    ):
        super().__init__(*a, **kw)
        if "%%text%%" not in echo_template:
            raise ConfigError(f"echo: template {echo_template!r} never reads the text (%%text%%)")
        if piece_max_length < 1:
            raise ConfigError(f"echo: option 'piece_max_length' must be >= 1 (got {piece_max_length})")
        self.echo_template, self.prompt, self.piece_max_length = echo_template, prompt, int(piece_max_length)
        tok = self.tokenizer
        text = echo_template.replace("<s>", tok.bos_token or "").replace("</s>", tok.eos_token or "")
        self.pieces = [(p, var) if var else (self._ids(p), var) for p, var in parse_template(text)]

    def _ids(self, s: str) -> list[int]:
        return list(self.tokenizer(s, add_special_tokens=False)["input_ids"])[: self.piece_max_length]

    def _row(self, text: str) -> tuple[list[int], list[int]]:
        ids: list[int] = []
        pooled: list[int] = []
        for piece, var in self.pieces:
            if not var:
                ids += piece
                pooled += [0] * len(piece)
                continue
            keep = 0 if piece.startswith("!") else 1
            filled = piece.removeprefix("!").replace("%%text%%", text).replace("%%prompt%%", self.prompt)
            got = self._ids(filled)
            ids += got
            pooled += [keep] * len(got)
        return ids, pooled

    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        rows = [self._row(t.strip()) for t in texts]
        width = max(len(ids) for ids, _ in rows)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        embed = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (r, p) in enumerate(rows):  # right padding, as the reference's parser
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
            embed[i, : len(r)] = torch.tensor(p)
        return {"input_ids": ids, "attention_mask": mask, "embed_mask": embed}

    def lengths(self, texts: list[str]) -> list[int]:
        return [len(self._row(t.strip())[0]) for t in texts]

    def forward(self, input_ids, attention_mask, embed_mask=None, **_ignored) -> dict[str, torch.Tensor]:
        tokens = self.token_states(input_ids, attention_mask)
        # the pooling reads embed_mask, as the reference's EchoPooling (mean: NaN -> 0 when nothing is pooled)
        return {
            "token_embeddings": tokens,
            "sentence_embedding": self.pool(tokens, embed_mask),
            "attention_mask": attention_mask,
        }

    def pool(self, token_embeddings: torch.Tensor, embed_mask: torch.Tensor) -> torch.Tensor:
        """The reference's ``EchoPooling`` over ``embed_mask``: "mean" over the pooled tokens (0 when none),
        "last" the last pooled token (position 0 when none, as its ``_extract_last_nonzero``); NaN set to 0."""
        return torch.nan_to_num(super().pool(token_embeddings, embed_mask), nan=0.0)

    def readout(self) -> dict[str, Any]:
        return {
            **super().readout(),
            "echo_template": self.echo_template,
            "prompt": self.prompt,
            "piece_max_length": self.piece_max_length,
        }


class Echo(Method):
    name = "echo"
    Config = EchoConfig
    trains = False
    default_model = "smollm2-135m-instruct"
    description = "training-free LLM readout: the text twice, the second occurrence's tokens pooled (echo embeddings)"

    def train(self, corpus: list[str], ctx: TrainContext) -> EchoEncoder:
        c = self.config
        if c.pooling not in ("mean", "last"):
            raise ConfigError(f"echo: option 'pooling' must be 'mean' or 'last' (got {c.pooling!r}).")
        return as_readout(
            EchoEncoder,
            ctx,
            self.name,
            {"pooling": c.pooling},
            pooling=c.pooling,
            layer=c.layer,
            padding_side="right",
            batch_size=c.batch_size,
            echo_template=c.template,
            prompt=c.prompt,
            piece_max_length=c.piece_max_length,
        )


load_echo = EchoEncoder.from_saved  # the registered loader of a saved echo readout


@hookimpl
def benchbench_register_methods(register):
    register(Echo.name, Echo)


@hookimpl
def benchbench_register_loaders(register):
    register(LOADER, load_echo)
