"""LLM2Vec (plugins/llm2vec.py): behaviours a mutation run over the module found unpinned by
``test_llm2vec.py``. Tiny random decoders on the CPU, no training loop."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from benchbench_plugins import llm2vec as L
from benchbench_plugins.llm2vec import (
    LLM2Vec,
    LLM2VecConfig,
    LLM2VecEncoder,
    MNTPObjective,
    SimCSEStageObjective,
    add_lora,
    load_lm,
    mntp_tokenizer,
)
from test_llm2vec import ARCHS, SEPARATOR, TEXTS, RefLLM2Vec

from benchbench import ConfigError, load_decoder, load_encoder

LONG = " ".join(["word"] * 30)


def test_mntp_collate_cuts_each_sentence_at_max_length():
    lm, tok = load_lm("tiny-llama")
    batch = MNTPObjective(lm, tok, 0.2, 8, None).collate([LONG, "a cat"], np.random.default_rng(0))
    assert batch["input_ids"].shape == batch["labels"].shape == (2, 8)
    assert batch["n_tokens"] == 8 + int(batch["attention_mask"][1].sum())


def test_mntp_masks_unknown_words_but_never_the_added_bos():
    """The tokenizer's own special-tokens mask (``return_special_tokens_mask=True``, as run_mntp.py): only
    the tokens it ADDED are never masked (tiny-llama's BOS); an unknown word's [UNK] is a text token and is
    masked like any other (the collator's fallback, ``get_special_tokens_mask``, would spare every [UNK])."""
    lm, tok = load_lm("tiny-llama")
    texts = ["a \u2603 cat \u2603 \u2603 sat \u2603 on \u2603 the mat", "\u2603 \u2603 dog \u2603"]
    batch = MNTPObjective(lm, tok, 0.999, 64, None).collate(texts, np.random.default_rng(1))
    ids, labels = batch["input_ids"], batch["labels"]
    enc = mntp_tokenizer(tok)(texts, padding=True, return_tensors="pt")  # the ids before masking
    unk = (enc["input_ids"] == tok.unk_token_id) & enc["attention_mask"].bool()  # [UNK] also pads: real ones
    assert unk.sum() >= 6 and (labels[unk] == tok.unk_token_id).all()  # every [UNK] is a target
    assert (labels[:, 0] == -100).all() and (ids[:, 0] == tok.bos_token_id).all()  # the BOS never is


def test_simcse_batch_counts_both_views_tokens():
    """Each sentence is run twice (two dropout views), so a batch's token count is 2 x its real tokens:
    what the loop adds into the record's ``tokens``."""
    lm, tok = load_lm("tiny-llama")
    batch = SimCSEStageObjective(lm, tok, 20.0, 128, "text", None).collate(TEXTS, np.random.default_rng(0))
    assert batch["n_tokens"] == 2 * int(batch["attention_mask"].sum()) > 0


@pytest.mark.parametrize("arch", ARCHS)
def test_pool_mask_is_the_references_embed_mask(arch):
    """The encoder's ``embed_mask`` is LLM2Vec's, value for value (0/1: its row sums are the lengths the
    reference averages over)."""
    bi, tok = load_decoder(arch, attention="bidirectional", seed=0)
    got = LLM2VecEncoder(bi, tok).tokenize(TEXTS)["embed_mask"]
    want = RefLLM2Vec(bi, tok, arch=arch).tokenize([SEPARATOR + t for t in TEXTS])["embed_mask"]
    assert torch.equal(got, want) and set(got.unique().tolist()) == {0, 1}


def _untied_causal_folder(tmp_path):
    """A tiny Llama saved WITH its own (untied) LM head, as a checkpoint folder."""
    from transformers import LlamaForCausalLM

    body, tok = load_decoder("tiny-llama", seed=0)
    cfg = copy.deepcopy(body.config)
    cfg.tie_word_embeddings = False
    torch.manual_seed(4)
    model = LlamaForCausalLM(cfg).eval()
    folder = tmp_path / "untied"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder, model


def test_a_checkpoints_own_lm_head_is_loaded_and_frozen_under_lora(tmp_path):
    """A causal checkpoint's head is MNTP's head (not refused, not the input embedding); under the
    adapter every base weight is frozen, the head (outside the peft-wrapped body) included: only LoRA
    trains."""
    folder, saved = _untied_causal_folder(tmp_path)
    lm, _ = load_lm(str(folder))
    assert torch.equal(lm.head.weight, saved.lm_head.weight)
    assert not torch.equal(lm.head.weight, lm.body.get_input_embeddings().weight)
    add_lora(lm, LLM2VecConfig(lora_r=2))
    trainable = {n for n, p in lm.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert not lm.head.weight.requires_grad


def test_saved_encoder_keeps_its_length_and_defaults_to_512(tmp_path):
    bi, tok = load_decoder("tiny-llama", attention="bidirectional", seed=0)
    path = LLM2VecEncoder(bi, tok, max_seq_length=64).save(tmp_path / "e")
    assert load_encoder(str(path)).max_seq_length == 64
    f = path / "benchbench_decoder.json"
    saved = json.loads(f.read_text(encoding="utf-8"))
    del saved["max_seq_length"]
    f.write_text(json.dumps(saved), encoding="utf-8")
    assert load_encoder(str(path)).max_seq_length == L.ENCODE_MAX_LENGTH == 512


def test_option_boundaries():
    """mask_ratio in the open (0, 1); lora_r >= 1."""
    assert LLM2Vec(LLM2VecConfig(mask_ratio=0.999, lora_r=1))._check() == ["mntp", "simcse"]
    with pytest.raises(ConfigError, match="'mask_ratio'"):
        LLM2Vec(LLM2VecConfig(mask_ratio=1.0))._check()
