"""PromptEOL, training-free (Jiang et al. 2023, "Scaling Sentence Embeddings with Large Language Models";
code github.com/kongds/scaling_sentemb at 8567aa0, ``evaluation.py``'s ``batcher``).

A decoder LLM reads the sentence inside a prompt that asks for ONE word, ``This sentence : "[X]" means in
one word:"``, and the sentence vector is the hidden state of the prompt's last token, the one from which
the model would generate that word (Explicit One-word Limitation). No training: the encoder is the
pretrained decoder read through the prompt.

| item | paper | reference code (kongds/scaling_sentemb@8567aa0, ``evaluation.py`` ``batcher``, ``run_icl.sh``) | benchbench |
|---|---|---|---|
| template | "This sentence : [X] means in one word:" | ``This_sentence_:_"*sent_0*"_means_in_one_word:"`` with ``_`` read as a space (``eval_checkpoints.sh``, ``train_llm.sh``, README) | same text, ``{text}`` for ``*sent 0*`` (``template``) |
| in-context example | the ICL variant prepends one demonstration per model (``run_icl.sh``) | OPT-only demonstrations in ``run_icl.sh``; none for the plain readout | none (the plain PromptEOL readout); a demonstration can be written into ``template`` |
| sentence rules | - | a sentence not ending in ``.?"'`` gets ``.``; ``"`` becomes ``'``; a final ``?`` becomes ``.``; the filled template is ``.strip()``ped | same (``prompteol_sentence``) |
| tokenizer | - | ``batch_encode_plus`` with the tokenizer's own special tokens (Llama: BOS); ``pad_token_id = 0``; left padding; no truncation (SentEval STS passes no max length) | the tokenizer's own special tokens; its pad token (the attention mask hides pads, so the id does not change the vectors); left padding; a text over ``max_seq_length`` (512) tokens is cut inside the sentence, never the prompt's end |
| readout | last token of the last layer | ``hidden_states[-1][:, -1, :]`` of ``AutoModelForCausalLM`` (after the final norm; position -1 is the last real token under left padding) | the base model's ``last_hidden_state`` at each row's last real token (``layer=-1``); another layer by ``layer`` |
| precision | - | 8-bit by default (``--load_kbit 8``), 16 for the README's table | float32 weights de-quantised from the start's file (SmolLM2: GGUF Q4_1, 4-bit) |
| model | OPT 125M - 66B, LLaMA | ``facebook/opt-*`` | offline: SmolLM2-135M-Instruct, instruction-tuned, 4-bit GGUF de-quantised (``smollm2-135m-instruct``); any Llama/Qwen2/decoder folder or hub id |

Equality with the reference ``batcher`` (re-implemented from the fetched source in
``tests/plugins/llm_reference.py``) on tiny random Llama and Qwen2 decoders:
leaderboards/new_methods/llm_equality.md (``bench/llm_equality.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchbench_plugins._readout import ReadoutEncoder, as_readout

from benchbench import ConfigError, Method, TrainContext, hookimpl

TEMPLATE = 'This sentence : "{text}" means in one word:"'
LOADER = "prompteol"


@dataclass
class PromptEOLConfig:
    template: str = TEMPLATE
    layer: int = -1  # index into the hidden states: -1 the last layer (after the final norm), as published
    max_seq_length: int = 512  # whole prompt; the reference never truncates (STS sentences are short)
    batch_size: int = field(default=16, metadata={"hash": False})


def prompteol_sentence(s: str) -> str:
    """The reference batcher's rules: a final period when the sentence ends in none of ``.?"'``, double
    quotes made single (the template quotes the sentence), a final question mark made a period."""
    if len(s) > 0 and s[-1] not in ".?\"'":
        s += "."
    s = s.replace('"', "'")
    if len(s) > 0 and s[-1] == "?":
        s = s[:-1] + "."
    return s


class PromptEOLEncoder(ReadoutEncoder):
    """The last real token's state of ``template`` filled with the sentence (rules of ``prompteol_sentence``)."""

    kind = "prompteol"
    loader = LOADER

    def prepare(self, text: str) -> str:
        return self.template.replace("{text}", prompteol_sentence(text.strip())).strip()


class PromptEOL(Method):
    name = "prompteol"
    Config = PromptEOLConfig
    trains = False
    default_model = "smollm2-135m-instruct"
    description = 'training-free LLM readout: last token of \'This sentence : "[X]" means in one word:"\''

    def train(self, corpus: list[str], ctx: TrainContext) -> PromptEOLEncoder:
        c = self.config
        if c.template.count("{text}") != 1:
            raise ConfigError(f"prompteol: option 'template' must hold '{{text}}' once (got {c.template!r}).")
        return last_token_readout(PromptEOLEncoder, ctx, self.name, c)


def last_token_readout(cls: type[PromptEOLEncoder], ctx: TrainContext, method: str, c: Any, **kw: Any) -> Any:
    """PromptEOL's readout as ``cls``: the config ``c``'s template and layer, the last real token, left padding
    (token prepending's too, with its own options in ``kw``)."""
    return as_readout(
        cls,
        ctx,
        method,
        {"pooling": "last", "max_seq_length": c.max_seq_length},
        pooling="last",
        template=c.template,
        layer=c.layer,
        padding_side="left",
        batch_size=c.batch_size,
        **kw,
    )


load_prompteol = PromptEOLEncoder.from_saved  # the registered loader of a saved PromptEOL readout


@hookimpl
def benchbench_register_methods(register):
    register(PromptEOL.name, PromptEOL)


@hookimpl
def benchbench_register_loaders(register):
    register(LOADER, load_prompteol)
