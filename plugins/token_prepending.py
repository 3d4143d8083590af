"""Token Prepending, training-free (Fu et al., ACL 2025, "Token Prepending: A Training-Free Approach for
Eliciting Better Sentence Embeddings from LLMs"; code github.com/fuyuchenIfyw/token_prepending at cc41b58:
``evaluate.py``'s ``batcher`` and PST setup, ``senllm/modeling_llama.py`` / ``modeling_qwen2.py``'s
``LlamaModel.forward`` / ``Qwen2Model.forward`` under ``plan == "tp"``).

Under causal attention the sentence's early tokens never see its end. Token prepending puts a placeholder
token <PST> in the prompt just before the sentence, and before each of the early layers ``[tp_start,
tp_exit)`` overwrites the placeholder's state with the LAST token's state from the layer below (the
sentence embedding decoded so far): every later token of the sentence can then attend to a summary of the
whole sentence. The readout is PromptEOL's: the last token's state, here of an intermediate layer.

| item | paper | reference code (fuyuchenIfyw/token_prepending@cc41b58) | benchbench |
|---|---|---|---|
| prompt | PromptEOL with <PST> before the sentence | ``This sentence : <PST> "*sent 0*" means in one word:"`` (``prompt_method: prompteol``, ``plan: tp``) | same (``template``, ``{text}`` for ``*sent 0*``) |
| sentence rules | - | PromptEOL's (final period, ``"`` to ``'``, final ``?`` to ``.``), ``.strip()`` | same (``prompteol_sentence``) |
| placeholder | an added token | ``tokenizer.add_tokens(['<PST>'])``, ``resize_token_embeddings``, its row ``torch.randn(hidden)`` after ``torch.cuda.manual_seed(3407)`` (the CUDA generator: CPU runs are unseeded) | an added token of a copy of the tokenizer; its input vector ``torch.randn(hidden)`` from a CPU generator seeded ``pst_seed`` = 3407 (the values differ from the CUDA draw); fed as input embeddings, the model's own embedding table untouched |
| which placeholder | - | first occurrence per row (``find_token_indices``, hard-coded id 32000 for Llama-2 and 151646 for Qwen2) | first occurrence of the added token's id |
| prepending | before layers ``tp_start`` .. ``tp_exit - 1`` | ``hidden_states[arange(B), pst] = hidden_states[:, -1]`` before each such layer (in place) | the same assignment in a forward pre-hook of each such decoder layer |
| layers (Llama-2-7B, PromptEOL) | - | ``config.yaml`` ``llama-2-7b-tp``: ``output_layer: 27``, ``tp_starting_index: 1``, ``tp_exiting_index: 7`` | ``layer = 27``, ``tp_start = 1``, ``tp_exit = 7`` (SmolLM2 has 30 layers, Llama-2-7B 32: the published indices, not rescaled) |
| readout | last token, intermediate layer | ``hidden_states[output_layer][:, -1, :]`` (index 0 the embeddings; -1 after the final norm), left padding, ``pad_token_id = 0`` | the last real token of hidden state ``layer``; left padding; the tokenizer's pad token (masked) |
| model | LLaMA-2/3, Qwen2, Gemma2 (7-13B) | the above | offline: SmolLM2-135M-Instruct (Llama architecture), instruction-tuned, 4-bit GGUF de-quantised (``smollm2-135m-instruct``); Llama and Qwen2 decoders |

Equality with the reference's ``forward`` under ``plan == "tp"`` and its ``batcher`` (re-implemented from the
fetched source in ``tests/plugins/llm_reference.py``) on tiny random Llama and Qwen2 decoders:
leaderboards/new_methods/llm_equality.md (``bench/llm_equality.py``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch
from benchbench_plugins.prompteol import PromptEOLEncoder, last_token_readout

from benchbench import ConfigError, Method, TrainContext, hookimpl

TEMPLATE = 'This sentence : <PST> "{text}" means in one word:"'
PST = "<PST>"
LOADER = "token-prepending"


@dataclass
class TokenPrependingConfig:
    template: str = TEMPLATE
    layer: int = 27  # hidden-state index read out (config.yaml llama-2-7b-tp: output_layer 27)
    tp_start: int = 1  # first layer whose input gets the prepended token (tp_starting_index)
    tp_exit: int = 7  # first layer that no longer does (tp_exiting_index)
    pst_seed: int = 3407  # the placeholder's random input vector (the reference seeds CUDA with 3407)
    max_seq_length: int = 512
    batch_size: int = field(default=16, metadata={"hash": False})


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The decoder blocks of a base model (``model.layers``) or of a causal LM (``model.model.layers``)."""
    layers = getattr(model, "layers", None)
    if layers is None:
        layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        raise ConfigError(f"token-prepending: model {type(model).__name__} has no decoder layers (.layers)")
    return layers


class TokenPrependingEncoder(PromptEOLEncoder):
    """PromptEOL's readout with the <PST> placeholder overwritten by the last token's state before each
    layer in ``[tp_start, tp_exit)``."""

    kind = "token-prepending"
    loader = LOADER
    saved_options = ("tp_start", "tp_exit", "pst_seed")

    def __init__(self, *a: Any, tp_start: int = 1, tp_exit: int = 7, pst_seed: int = 3407, **kw: Any):
        super().__init__(*a, **kw)
        if not 0 <= tp_start < tp_exit:
            raise ConfigError(
                f"token-prepending: need 0 <= tp_start < tp_exit (got tp_start={tp_start}, tp_exit={tp_exit})."
            )
        if self.template is None or self.template.count(PST) != 1:
            raise ConfigError(f"token-prepending: template must hold {PST} once (got {self.template!r}).")
        self.tokenizer = copy.deepcopy(self.tokenizer)  # the added token stays out of the shared tokenizer
        self.tokenizer.add_tokens([PST])
        self.pst_id = int(self.tokenizer.convert_tokens_to_ids(PST))
        self.tp_start, self.tp_exit, self.pst_seed = int(tp_start), int(tp_exit), int(pst_seed)
        g = torch.Generator().manual_seed(self.pst_seed)
        hidden = int(self.model.config.hidden_size)
        self.register_buffer("pst_vector", torch.randn(hidden, generator=g), persistent=False)

    def forward(self, input_ids, attention_mask, **_ignored) -> dict[str, torch.Tensor]:
        is_pst = input_ids == self.pst_id
        if not bool(is_pst.any(1).all()):
            raise ConfigError("token-prepending: a row lost its <PST> token (cut by max_seq_length?)")
        embed = self.model.get_input_embeddings()
        x = embed(input_ids.masked_fill(is_pst, 0))
        x = torch.where(is_pst[..., None], self.pst_vector.to(device=x.device, dtype=x.dtype), x)
        where = is_pst.to(torch.float32).argmax(1)  # first <PST> per row (find_token_indices)
        rows = torch.arange(len(input_ids), device=input_ids.device)

        def prepend(module, args, kwargs):
            h = args[0] if args else kwargs["hidden_states"]
            h = h.clone()
            h[rows, where] = h[:, -1]
            if args:
                return (h, *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": h}

        layers = decoder_layers(self.model)
        hooks = [
            layers[k].register_forward_pre_hook(prepend, with_kwargs=True)
            for k in range(self.tp_start, min(self.tp_exit, len(layers)))
        ]
        try:
            if self.layer == -1:
                tokens = self.model(inputs_embeds=x, attention_mask=attention_mask).last_hidden_state
            else:
                out = self.model(inputs_embeds=x, attention_mask=attention_mask, output_hidden_states=True)
                tokens = out.hidden_states[self.layer]
        finally:
            for hk in hooks:
                hk.remove()
        return {
            "token_embeddings": tokens,
            "sentence_embedding": self.pool(tokens, attention_mask),
            "attention_mask": attention_mask,
        }

    def readout(self) -> dict[str, Any]:
        return {**super().readout(), "tp_start": self.tp_start, "tp_exit": self.tp_exit, "pst_seed": self.pst_seed}


class TokenPrepending(Method):
    name = "token-prepending"
    Config = TokenPrependingConfig
    trains = False
    default_model = "smollm2-135m-instruct"
    description = "training-free LLM readout: PromptEOL with the last token's state prepended to early layers"

    def train(self, corpus: list[str], ctx: TrainContext) -> TokenPrependingEncoder:
        c = self.config
        return last_token_readout(
            TokenPrependingEncoder, ctx, self.name, c, tp_start=c.tp_start, tp_exit=c.tp_exit, pst_seed=c.pst_seed
        )


# the registered loader of a saved token-prepending readout; the saved tokenizer already holds <PST>: the
# base's copy is used, and add_tokens finds it there
load_token_prepending = TokenPrependingEncoder.from_saved


@hookimpl
def benchbench_register_methods(register):
    register(TokenPrepending.name, TokenPrepending)


@hookimpl
def benchbench_register_loaders(register):
    register(LOADER, load_token_prepending)
