"""The reference functions of the three training-free LLM readouts, re-implemented line by line from the
fetched sources (the repositories pin transformers 4.37-4.46 and are not installed), and the comparison of
each with its benchbench plugin on tiny random Llama and Qwen2 decoders.

Used by tests/plugins/test_llm_readouts.py (asserts each difference under its tolerance) and by
bench/llm_equality.py (writes leaderboards/new_methods/llm_equality.md). Where the reference needs a
transformers 4.x piece that transformers 5 moved, the 5.x piece that does the same job is named at the line.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

import torch

PROMPTEOL_REF = "kongds/scaling_sentemb@8567aa083c1b"
ECHO_REF = "jakespringer/echo-embeddings@c752c4641d3e"
TP_REF = "fuyuchenIfyw/token_prepending@cc41b58696d6"
TOLERANCE = 1e-5  # max |difference| of float32 sentence vectors

# SentEval hands the batcher token lists; these cover the batcher's rules (no final period, a final "?",
# double quotes, a final quote) and unequal lengths (left and right padding)
SENTENCES = [
    "A man is playing a large flute",
    "Is a woman slicing an onion?",
    'He said "stop" and left .',
    "Three dogs run across the snowy field near the old red barn.",
    "Ok",
    "The cat's toy is under the sofa'",
]


def causal_lm_of(base: torch.nn.Module) -> torch.nn.Module:
    """The reference loads ``AutoModelForCausalLM``: the same weights with an LM head (tied)."""
    from transformers import AutoModelForCausalLM

    lm = AutoModelForCausalLM.from_config(copy.deepcopy(base.config))
    lm.model.load_state_dict(base.state_dict())
    return lm.eval()


# ---- PromptEOL: kongds/scaling_sentemb evaluation.py ------------------------------------------------
def prompteol_reference(model, tokenizer, batch: list[list[str]], template: str) -> torch.Tensor:
    """``main()``'s tokenizer setup and ``batcher`` (``--mask_embedding_sentence`` with a template, no ``--avg``)."""
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.pad_token_id = 0  # unk. we want this to be different from the eos token
    tokenizer.padding_side = "left"  # Allow batched inference
    max_length = None
    sentences = [" ".join(s) for s in batch]
    template = template.replace("_", " ").replace("*sep+*", "").replace("*cls*", "")
    for i, s in enumerate(sentences):
        if len(s) > 0 and s[-1] not in ".?\"'":
            s += "."
        s = s.replace('"', "'")
        if len(s) > 0 and s[-1] == "?":
            s = s[:-1] + "."
        sentences[i] = template.replace("*sent 0*", s).strip()
    enc = tokenizer(  # batch_encode_plus (removed in transformers 5): the tokenizer's __call__ on a list
        sentences, return_tensors="pt", padding=True, max_length=max_length, truncation=max_length is not None
    )
    with torch.no_grad():
        hidden_states = model(output_hidden_states=True, return_dict=True, **enc).hidden_states
        outputs = hidden_states[-1][:, -1, :]
    return outputs.float()


# ---- Echo: jakespringer/echo-embeddings echo_embeddings.py ------------------------------------------
class EchoParser:
    """``EchoParser`` without its string-to-tokenizer branch: ``tokenizer`` is called as the reference
    calls one loaded with ``add_bos_token=False, add_eos_token=False`` (``_NoSpecial`` below)."""

    def __init__(self, tokenizer, templates, max_length=None):
        self.tokenizer = tokenizer
        if self.tokenizer.padding_side != "right":
            self.tokenizer.padding_side = "right"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = "<unk>"
        self.templates = templates
        self.template_pieces = {k: self._parse_template(template) for k, template in templates.items()}
        self.max_length = max_length

    def _parse_template(self, template):
        matches = [m for m in re.finditer(r"\{(.|\n|\r|\t)+?\}", template)]
        template_pieces = []
        for i, m in enumerate(matches):
            if i == 0:
                template_pieces.append(template[: m.start()])
            else:
                template_pieces.append(template[matches[i - 1].end() : m.start()])
            template_pieces.append(m.group())
        template_pieces.append(template[matches[-1].end() :])
        template_pieces = [t for t in template_pieces if t]
        tokenized_pieces = []
        for template_piece in template_pieces:
            if template_piece.startswith("{") and template_piece.endswith("}"):
                tokenized_pieces.append(template_piece[1:-1])
            else:
                tokenized_pieces.append(self.tokenizer(template_piece)["input_ids"])
        return tokenized_pieces

    def _tokenize_piece(self, x, template_piece):
        if isinstance(template_piece, str):
            if template_piece.startswith("!"):
                template_piece = template_piece[1:]
                embed_mask_value = 0
            else:
                embed_mask_value = 1
            for k, v in x.items():
                template_piece = template_piece.replace(f"%%{k}%%", v)
            tokenized_piece = self.tokenizer(template_piece)["input_ids"]
            tokenized_piece = tokenized_piece[: self.max_length] if self.max_length is not None else tokenized_piece
            attention_mask = torch.ones(len(tokenized_piece), dtype=torch.long)
            embed_mask = torch.full((len(tokenized_piece),), embed_mask_value, dtype=torch.long)
            return {
                "input_ids": torch.tensor(tokenized_piece, dtype=torch.long),
                "attention_mask": attention_mask,
                "embed_mask": embed_mask,
            }
        template_piece = template_piece[: self.max_length] if self.max_length is not None else template_piece
        attention_mask = torch.ones(len(template_piece), dtype=torch.long)
        embed_mask = torch.zeros(len(template_piece), dtype=torch.long)
        return {
            "input_ids": torch.tensor(template_piece, dtype=torch.long),
            "attention_mask": attention_mask,
            "embed_mask": embed_mask,
        }

    def _tokenize_from_pieces(self, x, template_pieces):
        token_pieces = [self._tokenize_piece(x, template_piece) for template_piece in template_pieces]
        return {k: torch.cat([z[k] for z in token_pieces]) for k in token_pieces[0]}

    def tokenize(self, xs):
        if isinstance(xs, tuple) and isinstance(xs[1], str):
            xs = [(xs[0], {"x": xs[1]})]
        elif isinstance(xs, tuple) and isinstance(xs[1], dict):
            xs = [xs]
        elif isinstance(xs[0], tuple) and isinstance(xs[0][1], str):
            xs = [(x[0], {"x": x[1]}) for x in xs]
        tokenized = [self._tokenize_from_pieces(x[1], self.template_pieces[x[0]]) for x in xs]
        max_tokenized_length = max([len(x["input_ids"]) for x in tokenized])
        for x in tokenized:
            if len(x["input_ids"]) < max_tokenized_length:
                n = max_tokenized_length - len(x["input_ids"])
                x["input_ids"] = torch.cat(
                    [x["input_ids"], torch.tensor([self.tokenizer.pad_token_id] * n, dtype=torch.long)]
                )
                x["attention_mask"] = torch.cat([x["attention_mask"], torch.zeros(n, dtype=torch.long)])
                x["embed_mask"] = torch.cat([x["embed_mask"], torch.zeros(n, dtype=torch.long)])
        return {k: torch.stack([z[k] for z in tokenized]) for k in tokenized[0]}

    def __call__(self, xs):
        return self.tokenize(xs)


class EchoPooling:
    def __init__(self, strategy="mean"):
        self.strategy = strategy

    def __call__(self, xs):
        token_embeddings = xs["token_embeddings"]
        embed_mask = xs["embed_mask"].to(token_embeddings.device)
        if self.strategy == "mean":
            pooled = torch.sum(token_embeddings * embed_mask.unsqueeze(-1), dim=1) / torch.sum(
                embed_mask, dim=1
            ).unsqueeze(-1)
            pooled.masked_fill_(torch.isnan(pooled), 0)
        elif self.strategy == "last":

            def _extract_last_nonzero(m):
                nonzeros = (m == 1).nonzero(as_tuple=True)[0]
                return torch.max(nonzeros) if nonzeros.size(0) > 0 else 0

            last_indices = torch.tensor([_extract_last_nonzero(m) for m in embed_mask])
            i = torch.arange(token_embeddings.shape[0]).reshape(token_embeddings.shape[0], 1, 1)
            j = last_indices.reshape(last_indices.shape[0], 1, 1)
            k = torch.arange(token_embeddings.shape[2])
            pooled = token_embeddings[i, j, k][:, 0, :]
            pooled.masked_fill_(torch.isnan(pooled), 0)
        else:
            raise ValueError(f"Unknown pooling strategy: {self.strategy}")
        xs.update({"sentence_embedding": pooled})
        return xs


def echo_model_forward(model, xs):
    """``EchoEmbeddingsMistral.forward``: the base model's ``last_hidden_state`` over the parsed batch."""
    inputs = {"input_ids": xs["input_ids"], "attention_mask": xs["attention_mask"]}
    outputs = model(**inputs).last_hidden_state
    xs.update({"token_embeddings": outputs})
    return xs


class _NoSpecial:
    """The tokenizer as the reference loads it (``add_bos_token=False, add_eos_token=False``): called on a
    piece, it adds no special token; pad token and side pass through."""

    def __init__(self, tok):
        self.tok = tok

    def __call__(self, text):
        return self.tok(text, add_special_tokens=False)

    def __getattr__(self, name):
        return getattr(self.tok, name)

    def __setattr__(self, name, value):
        if name == "tok":
            object.__setattr__(self, name, value)
        else:
            setattr(self.tok, name, value)


def echo_reference(model, tokenizer, texts, template, prompt, strategy="mean", max_length=300) -> torch.Tensor:
    """``example.py``'s use: the ``query`` template for every text (symmetric similarity), the parser,
    the model's forward and the pooling. ``<s>`` / ``</s>`` are written as the tokenizer's own BOS / EOS
    (the same substitution benchbench makes; the reference writes Mistral's)."""
    template = template.replace("<s>", tokenizer.bos_token or "").replace("</s>", tokenizer.eos_token or "")
    parser = EchoParser(_NoSpecial(copy.deepcopy(tokenizer)), {"query": template}, max_length=max_length)
    pooling = EchoPooling(strategy=strategy)
    tagged = [("query", {"prompt": prompt, "text": t}) for t in texts]
    with torch.no_grad():
        return pooling(echo_model_forward(model, parser(tagged)))["sentence_embedding"].float()


# ---- Token prepending: fuyuchenIfyw/token_prepending ----------------------------------------------
def find_token_indices(input_ids, token=32000):
    assert (input_ids == token).any(dim=1).all(), f"Not all sequences contain the token {token}"
    mask = input_ids == token
    mask_float = mask.float()
    return mask_float.argmax(dim=1)


def tp_model_forward(model, input_ids, attention_mask, tp_starting_index, tp_exiting_index, pst_id):
    """``LlamaModel.forward`` / ``Qwen2Model.forward`` of senllm/modeling_llama.py and modeling_qwen2.py under
    ``plan == "tp"`` (no cache, no gradient checkpointing, output_hidden_states): the hidden states tuple.
    4.46's ``_update_causal_mask`` is transformers 5's ``create_causal_mask``; a 5.x decoder layer returns the
    hidden states themselves (4.46: a tuple, ``layer_outputs[0]``)."""
    from transformers.masking_utils import create_causal_mask

    pst_token_indices = find_token_indices(input_ids, token=pst_id)
    inputs_embeds = model.embed_tokens(input_ids)
    cache_position = torch.arange(0, inputs_embeds.shape[1], device=inputs_embeds.device)
    position_ids = cache_position.unsqueeze(0)
    causal_mask = create_causal_mask(
        config=model.config,
        inputs_embeds=inputs_embeds,
        attention_mask=attention_mask,
        cache=None,
        position_ids=position_ids,
    )
    hidden_states = inputs_embeds
    position_embeddings = model.rotary_emb(hidden_states, position_ids)
    all_hidden_states = ()
    for index, decoder_layer in enumerate(model.layers):
        all_hidden_states += (hidden_states,)
        layer_index = tp_starting_index
        exiting_index = tp_exiting_index
        assert layer_index < exiting_index
        if index >= layer_index and index < exiting_index:
            B = hidden_states.shape[0]
            previous_sentence_embeddings = hidden_states[:, -1, :].clone()
            hidden_states[torch.arange(B), pst_token_indices, :] = previous_sentence_embeddings
        layer_outputs = decoder_layer(
            hidden_states,
            attention_mask=causal_mask,
            position_ids=position_ids,
            position_embeddings=position_embeddings,
        )
        hidden_states = layer_outputs
    hidden_states = model.norm(hidden_states)
    all_hidden_states += (hidden_states,)
    return all_hidden_states


def tp_reference(base, tokenizer, batch, pst_vector, output_layer, tp_start, tp_exit) -> torch.Tensor:
    """``evaluate.py``: the <PST> token added and its embedding row drawn (here: given, ``pst_vector``, the
    draw benchbench makes; the reference's is an unseeded CPU draw or a CUDA draw after seed 3407), then
    ``batcher`` with ``prompt_method == "prompteol"`` and ``use_which_plan == "tp"``."""
    lm = causal_lm_of(base)
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.pad_token_id = 0
    tokenizer.padding_side = "left"
    placeholder_token = "<PST>"
    tokenizer.add_tokens([placeholder_token])
    placeholder_token_id = tokenizer.convert_tokens_to_ids(placeholder_token)
    lm.resize_token_embeddings(len(tokenizer))
    embedding_layer = lm.get_input_embeddings()
    with torch.no_grad():
        embedding_layer.weight[placeholder_token_id] = pst_vector
    task_prompts = ['This sentence : <PST> "*sent 0*" means in one word:"']
    sentences = [" ".join(s) for s in batch]
    new_sentences = []
    for s in sentences:
        if len(s) > 0 and s[-1] not in ".?\"'":
            s += "."
        s = s.replace('"', "'")
        if len(s) > 0 and s[-1] == "?":
            s = s[:-1] + "."
        for prompt in task_prompts:
            new_sentences.append(prompt.replace("*sent 0*", s).strip())
    enc = tokenizer(new_sentences, return_tensors="pt", padding=True)
    with torch.no_grad():
        hidden_states = tp_model_forward(
            lm.model, enc["input_ids"], enc["attention_mask"], tp_start, tp_exit, placeholder_token_id
        )
        outputs = hidden_states[output_layer][:, -1, :]
        outputs = outputs.view(-1, len(task_prompts), outputs.size()[1]).mean(dim=1)
    return outputs.float()


# ---- the comparisons ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    method: str
    arch: str
    reference: str
    function: str
    setting: str
    max_diff: float
    control: str
    control_diff: float


def _words() -> list[list[str]]:
    return [s.split() for s in SENTENCES]


def compare_prompteol(arch: str, seed: int = 0) -> Row:
    from benchbench_plugins.prompteol import TEMPLATE, PromptEOLEncoder

    from benchbench import tiny_decoder

    base = tiny_decoder(arch, seed=seed, layers=3)
    ours = PromptEOLEncoder(
        base.model, base.tokenizer, pooling="last", template=TEMPLATE, padding_side="left", name=base.name
    )
    got = torch.from_numpy(ours.encode([" ".join(w) for w in _words()]))
    ref = prompteol_reference(
        causal_lm_of(base.model), base.tokenizer, _words(), 'This_sentence_:_"*sent_0*"_means_in_one_word:"'
    )
    # control: the last COLUMN of a right-padded batch (a pad for every shorter row)
    ours.padding_side = "right"
    feats = ours.tokenize([" ".join(w) for w in _words()])
    with torch.no_grad():
        wrong = ours.token_states(feats["input_ids"], feats["attention_mask"])[:, -1]
    return Row(
        "prompteol",
        arch,
        PROMPTEOL_REF,
        "evaluation.py batcher (template, hidden_states[-1][:, -1, :], left padding)",
        'template \'This sentence : "*sent 0*" means in one word:"\', last layer',
        float((got - ref).abs().max()),
        "last column of a right-padded batch",
        float((wrong - ref).abs().max()),
    )


def compare_echo(arch: str, seed: int = 0, strategy: str = "mean") -> Row:
    from benchbench_plugins.echo import PROMPT, TEMPLATE, EchoEncoder

    from benchbench import tiny_decoder

    base = tiny_decoder(arch, seed=seed, layers=3)
    ours = EchoEncoder(
        base.model, base.tokenizer, pooling=strategy, name=base.name, echo_template=TEMPLATE, prompt=PROMPT
    )
    texts = [" ".join(w) for w in _words()]
    got = torch.from_numpy(ours.encode(texts))
    ref = echo_reference(base.model, base.tokenizer, texts, TEMPLATE, PROMPT, strategy=strategy)
    # control: the mean over every real token (both occurrences and the prompt), no echo
    feats = ours.tokenize(texts)
    with torch.no_grad():
        t = ours.token_states(feats["input_ids"], feats["attention_mask"])
    m = feats["attention_mask"][..., None].float()
    wrong = (t * m).sum(1) / m.sum(1)
    return Row(
        "echo",
        arch,
        ECHO_REF,
        "EchoParser + EchoEmbeddingsMistral.forward + EchoPooling",
        f"'query' template, {strategy} pooling, pieces cut at 300",
        float((got - ref).abs().max()),
        "mean over all real tokens",
        float((wrong - ref).abs().max()),
    )


def compare_token_prepending(arch: str, seed: int = 0, layer: int = 6) -> Row:
    from benchbench_plugins.token_prepending import TEMPLATE, TokenPrependingEncoder

    from benchbench import tiny_decoder

    base = tiny_decoder(arch, seed=seed, layers=8)  # room for the published tp layers 1..6
    ours = TokenPrependingEncoder(
        base.model,
        base.tokenizer,
        pooling="last",
        template=TEMPLATE,
        padding_side="left",
        layer=layer,
        tp_start=1,
        tp_exit=7,
        name=base.name,
    )
    texts = [" ".join(w) for w in _words()]
    got = torch.from_numpy(ours.encode(texts))
    ref = tp_reference(base.model, base.tokenizer, _words(), ours.pst_vector, layer, 1, 7)
    # control: the same prompt and placeholder, nothing prepended (tp_exit = tp_start + 0 layers)
    off = TokenPrependingEncoder(
        base.model,
        base.tokenizer,
        pooling="last",
        template=TEMPLATE,
        padding_side="left",
        layer=layer,
        tp_start=50,
        tp_exit=51,
        name=base.name,
    )
    wrong = torch.from_numpy(off.encode(texts))
    return Row(
        "token-prepending",
        arch,
        TP_REF,
        "evaluate.py PST setup + batcher; senllm LlamaModel/Qwen2Model.forward (plan 'tp')",
        f"PromptEOL + <PST>, prepended before layers 1-6, hidden state {layer}",
        float((got - ref).abs().max()),
        "no layer prepends (placeholder kept)",
        float((wrong - ref).abs().max()),
    )


def all_rows() -> list[Row]:
    rows = []
    for arch in ("llama", "qwen2"):
        rows.append(compare_prompteol(arch))
        rows.append(compare_echo(arch, strategy="mean"))
        rows.append(compare_echo(arch, strategy="last"))
        rows.append(compare_token_prepending(arch, layer=6))
        rows.append(compare_token_prepending(arch, layer=-1))
    return rows
