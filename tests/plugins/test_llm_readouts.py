"""The training-free LLM readouts (plugins/prompteol.py, echo.py, token_prepending.py): equality with each
reference function (re-implemented from the fetched sources in llm_reference.py) on tiny random Llama and
Qwen2 decoders, a control showing each comparison would catch the mechanism's absence, the published
defaults, and each mechanism with a test that fails when it breaks."""

from __future__ import annotations

import benchbench_plugins.echo as echo
import benchbench_plugins.prompteol as pe
import benchbench_plugins.token_prepending as tp
import llm_reference as ref
import pytest
import torch

from benchbench import ConfigError, TrainContext, build_config, load_encoder, tiny_decoder

ARCHS = ("llama", "qwen2")


@pytest.mark.parametrize("arch", ARCHS)
def test_prompteol_equals_the_reference_batcher(arch):
    row = ref.compare_prompteol(arch)
    assert row.max_diff < ref.TOLERANCE, row
    assert row.control_diff > 100 * ref.TOLERANCE, row


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("strategy", ["mean", "last"])
def test_echo_equals_the_reference_parser_and_pooling(arch, strategy):
    row = ref.compare_echo(arch, strategy=strategy)
    assert row.max_diff < ref.TOLERANCE, row
    assert row.control_diff > 100 * ref.TOLERANCE, row


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("layer", [6, -1])
def test_token_prepending_equals_the_reference_forward(arch, layer):
    row = ref.compare_token_prepending(arch, layer=layer)
    assert row.max_diff < ref.TOLERANCE, row
    assert row.control_diff > 100 * ref.TOLERANCE, row


@pytest.mark.parametrize("layer", [0, 1])
def test_token_prepending_reads_the_early_hidden_states_as_the_reference(layer):
    """Hidden state 0 (the embeddings) and 1 (before any prepending reaches the last token: no control)."""
    assert ref.compare_token_prepending("llama", layer=layer).max_diff < ref.TOLERANCE


def test_defaults_are_the_published_ones():
    assert pe.PromptEOLConfig().template == 'This sentence : "{text}" means in one word:"'
    assert pe.PromptEOLConfig().layer == -1
    e = echo.EchoConfig()
    assert e.template == "<s>Instruct:{!%%prompt%%,}\nQuery:{!%%text%%}\nQuery again:{%%text%%}{</s>}"
    assert (e.pooling, e.piece_max_length, e.layer) == ("mean", 300, -1)
    t = tp.TokenPrependingConfig()
    assert t.template == 'This sentence : <PST> "{text}" means in one word:"'
    assert (t.layer, t.tp_start, t.tp_exit, t.pst_seed) == (27, 1, 7, 3407)
    for cls in (pe.PromptEOL, echo.Echo, tp.TokenPrepending):
        assert cls.trains is False and cls.default_model == "smollm2-135m-instruct"
    # the encoders' own defaults (what the reference comparisons build) are the published ones too
    base = tiny_decoder("llama")
    e = echo.EchoEncoder(base.model, base.tokenizer)
    assert (e.echo_template, e.prompt, e.piece_max_length) == (echo.TEMPLATE, echo.PROMPT, 300)
    t = tp.TokenPrependingEncoder(base.model, base.tokenizer, template=tp.TEMPLATE)
    assert (t.tp_start, t.tp_exit, t.pst_seed) == (1, 7, 3407)


def test_prompteol_sentence_rules():
    assert pe.prompteol_sentence("a cat") == "a cat."
    assert pe.prompteol_sentence("is it?") == "is it."
    assert pe.prompteol_sentence('he said "no"') == "he said 'no'"
    assert pe.prompteol_sentence("done.") == "done."
    assert pe.prompteol_sentence("") == ""
    # one-character sentences: the rules apply from length 1 (the reference's len(s) > 0)
    assert pe.prompteol_sentence("a") == "a."
    assert pe.prompteol_sentence("?") == "."
    assert pe.prompteol_sentence('"') == "'"


def test_echo_pools_exactly_the_second_occurrence_and_the_end_token():
    base = tiny_decoder("llama")
    enc = echo.EchoEncoder(base.model, base.tokenizer, echo_template=echo.TEMPLATE, prompt="find it")
    feats = enc.tokenize(["red cat sits", "dog"])
    tok = base.tokenizer
    for i, text in enumerate(["red cat sits", "dog"]):
        pooled = feats["input_ids"][i][feats["embed_mask"][i].bool()].tolist()
        assert pooled == tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        first = feats["input_ids"][i].tolist()
        assert first[0] == tok.bos_token_id  # <s> is the tokenizer's BOS
        text_ids = tok(text, add_special_tokens=False)["input_ids"]
        # the text occurs twice; only the second is pooled
        starts = [j for j in range(len(first)) if first[j : j + len(text_ids)] == text_ids]
        assert len(starts) == 2 and feats["embed_mask"][i][starts[0]] == 0 and feats["embed_mask"][i][starts[1]] == 1
    qwen = tiny_decoder("qwen2")  # no BOS token: <s> is dropped, not spelled out
    ids = echo.EchoEncoder(qwen.model, qwen.tokenizer).tokenize(["dog"])["input_ids"][0].tolist()
    assert (
        ids[: len(qwen.tokenizer("instruct", add_special_tokens=False)["input_ids"])]
        == qwen.tokenizer("instruct", add_special_tokens=False)["input_ids"]
    )


def test_echo_template_pieces_in_order_with_the_text_after_the_last_group():
    assert echo.parse_template("a{%%text%%}b{!c}d") == [
        ("a", False),
        ("%%text%%", True),
        ("b", False),
        ("!c", True),
        ("d", False),
    ]
    assert echo.parse_template("{x}") == [("x", True)]
    with pytest.raises(ConfigError, match="no brace group"):
        echo.parse_template("no groups")


@pytest.mark.parametrize("strategy", ["mean", "last"])
def test_a_row_with_nothing_to_pool_is_read_as_the_reference_reads_it(strategy):
    """An empty text under a template that pools only the text: the reference's pooling gives zeros for
    mean (0/0 set to 0) and the state at position 0 for last (``_extract_last_nonzero``), as benchbench
    does; a NaN token state pools to 0 (its ``masked_fill``)."""
    base = tiny_decoder("llama", layers=3)
    template = "<s>Query:{!%%text%%} again:{%%text%%}"
    enc = echo.EchoEncoder(base.model, base.tokenizer, pooling=strategy, echo_template=template, prompt="")
    got = torch.from_numpy(enc.encode(["", "a dog runs"]))
    want = ref.echo_reference(base.model, base.tokenizer, ["", "a dog runs"], template, "", strategy=strategy)
    assert (got - want).abs().max() < ref.TOLERANCE
    assert bool((got[0] == 0).all()) is (strategy == "mean") and got[1].abs().max() > 0
    states = torch.ones(1, 3, 4)
    states[0, 2, 1] = float("nan")
    pooled = enc.pool(states, torch.tensor([[0, 1, 1]]))
    assert pooled.tolist() == [[1.0, 0.0, 1.0, 1.0]]


def test_each_echo_piece_is_cut_on_its_own():
    base = tiny_decoder("llama")
    enc = echo.EchoEncoder(base.model, base.tokenizer, piece_max_length=3)
    feats = enc.tokenize([" ".join(["word"] * 20)])
    pooled = feats["input_ids"][0][feats["embed_mask"][0].bool()].tolist()
    assert pooled == [base.tokenizer.convert_tokens_to_ids("word")] * 3 + [base.tokenizer.eos_token_id]


def _tp(base, **kw):
    return tp.TokenPrependingEncoder(
        base.model, base.tokenizer, pooling="last", template=tp.TEMPLATE, padding_side="left", layer=-1, **kw
    )


def test_token_prepending_overwrites_the_placeholder_in_its_layers_only():
    """What each decoder layer reads (its input norm's input, after token prepending's pre-hook) at the
    <PST> position: inside [tp_start, tp_exit) the last token's state from the layer below, outside not;
    the hooks are gone after encoding, and the vectors depend on the window."""
    base = tiny_decoder("llama", layers=6)
    enc = _tp(base, tp_start=2, tp_exit=4)
    seen = {}

    def grab(k):
        def hook(module, args):
            seen[k] = args[0].detach().clone()

        return hook

    texts = ["a small red cat sits", "dog"]
    feats = enc.tokenize(texts)
    where = (feats["input_ids"] == enc.pst_id).float().argmax(1)
    handles = [layer.input_layernorm.register_forward_pre_hook(grab(k)) for k, layer in enumerate(base.model.layers)]
    with torch.no_grad():
        enc(**feats)
    for h in handles:
        h.remove()
    rows = torch.arange(len(texts))
    for k in range(6):
        overwritten = torch.allclose(seen[k][rows, where], seen[k][:, -1])
        assert overwritten is (2 <= k < 4), k
    assert sum(len(layer._forward_pre_hooks) for layer in base.model.layers) == 0
    assert abs(enc.encode(texts) - _tp(base, tp_start=2, tp_exit=3).encode(texts)).max() > 1e-4
    # a window past the last layer prepends nothing
    assert (
        abs(_tp(base, tp_start=6, tp_exit=7).encode(texts) - _tp(base, tp_start=50, tp_exit=51).encode(texts)).max()
        == 0
    )


def test_token_prepending_keeps_the_shared_tokenizer_unchanged():
    base = tiny_decoder("qwen2")
    n = len(base.tokenizer)
    enc = _tp(base)
    assert len(base.tokenizer) == n and len(enc.tokenizer) == n + 1
    assert enc.pst_id == n


def test_bad_options_are_refused(tmp_path):
    ctx = TrainContext(model="tiny-bert", seed=1, output_dir=tmp_path, progress=False, device="cpu")
    with pytest.raises(ConfigError, match="decoder-only"):
        pe.PromptEOL(build_config(pe.PromptEOL, {})).train([], ctx)
    base = tiny_decoder("llama")
    with pytest.raises(ConfigError, match="tp_start"):
        _tp(base, tp_start=3, tp_exit=3)
    with pytest.raises(ConfigError, match="tp_start"):
        _tp(base, tp_start=-1, tp_exit=2)
    assert _tp(base, tp_start=0, tp_exit=1).tp_start == 0  # prepending from the first layer is allowed
    with pytest.raises(ConfigError, match="<PST>"):
        tp.TokenPrependingEncoder(base.model, base.tokenizer, template="no {text} placeholder")
    with pytest.raises(ConfigError, match="pooling"):
        echo.Echo(build_config(echo.Echo, {"pooling": "max"})).train([], ctx)


@pytest.mark.parametrize("arch", ARCHS)
def test_each_method_builds_the_readout_its_reference_comparison_checks(arch, tmp_path):
    """The equality tests above build each encoder by hand (llm_reference.py); the methods' ``train`` must
    build the same readout: its settings, and the same vectors as the hand-built encoder on the same
    weights (texts of unequal lengths, so pooling and padding matter)."""
    ctx = TrainContext(model=f"tiny-{arch}", seed=1, output_dir=tmp_path, progress=False, device="cpu")
    texts = ["a man plays a guitar on the stage", "hi", 'is "it" here?']
    got = pe.PromptEOL(build_config(pe.PromptEOL, {})).train([], ctx)
    assert (got.pooling, got.padding_side, got.template, got.layer) == ("last", "left", pe.TEMPLATE, -1)
    assert (got.attention, got.max_seq_length, got.normalize) == ("causal", 512, False)
    want = pe.PromptEOLEncoder(got.model, got.tokenizer, pooling="last", template=pe.TEMPLATE, padding_side="left")
    assert abs(got.encode(texts) - want.encode(texts)).max() == 0

    got = echo.Echo(build_config(echo.Echo, {})).train([], ctx)
    assert (got.pooling, got.padding_side, got.layer, got.template) == ("mean", "right", -1, None)
    assert (got.echo_template, got.prompt, got.piece_max_length) == (echo.TEMPLATE, echo.PROMPT, 300)
    want = echo.EchoEncoder(got.model, got.tokenizer, pooling="mean", echo_template=echo.TEMPLATE, prompt=echo.PROMPT)
    assert abs(got.encode(texts) - want.encode(texts)).max() == 0

    got = tp.TokenPrepending(build_config(tp.TokenPrepending, {"layer": "1"})).train([], ctx)
    assert (got.pooling, got.padding_side, got.template, got.layer) == ("last", "left", tp.TEMPLATE, 1)
    assert (got.tp_start, got.tp_exit, got.pst_seed, got.max_seq_length) == (1, 7, 3407, 512)
    want = tp.TokenPrependingEncoder(
        got.model, got.tokenizer, pooling="last", template=tp.TEMPLATE, padding_side="left", layer=1
    )
    assert abs(got.encode(texts) - want.encode(texts)).max() == 0


def test_the_encoding_batch_size_is_a_speed_knob_outside_the_result_key():
    """``batch_size`` (texts per forward pass at encoding) changes no vector (every pooling reads the
    attention mask), so it is left out of the option hash that keys stored results; the other options are in."""
    import dataclasses

    from benchbench import config_hash

    for cfg in (pe.PromptEOLConfig(), echo.EchoConfig(), tp.TokenPrependingConfig()):
        assert cfg.batch_size == 16
        assert config_hash(cfg) == config_hash(dataclasses.replace(cfg, batch_size=3)), cfg
        assert config_hash(cfg) != config_hash(dataclasses.replace(cfg, layer=1)), cfg
    base = tiny_decoder("llama")
    texts = ["a man plays a guitar on the stage", "hi", 'is "it" here?']
    one = pe.PromptEOLEncoder(base.model, base.tokenizer, pooling="last", template=pe.TEMPLATE, padding_side="left")
    one.batch_size = 1
    many = pe.PromptEOLEncoder(base.model, base.tokenizer, pooling="last", template=pe.TEMPLATE, padding_side="left")
    assert abs(one.encode(texts) - many.encode(texts)).max() < 1e-5


@pytest.mark.parametrize("cls", [pe.PromptEOL, echo.Echo, tp.TokenPrepending])
def test_the_trained_free_encoder_saves_and_reloads_with_its_readout(cls, tmp_path):
    overrides = {"layer": "-1"} if cls is tp.TokenPrepending else {}
    ctx = TrainContext(model="tiny-llama", seed=1, output_dir=tmp_path, progress=False, device="cpu")
    enc = cls(build_config(cls, overrides)).train([], ctx)
    enc.save(tmp_path / "saved")
    back = load_encoder(str(tmp_path / "saved"))
    assert type(back) is type(enc) and back.fingerprint == enc.fingerprint
    texts = ["a cat sits on the mat", 'is "it" here?']
    assert abs(back.encode(texts) - enc.encode(texts)).max() == 0


def test_cli_run_on_the_fixture_task(env, monkeypatch):
    import json

    from benchbench.cli.main import main

    monkeypatch.chdir(env)
    args = ["run", "--method", "prompteol", "--model", "tiny-llama", "--tasks", "sts-mini"]
    assert main([*args, "--output", "out", "--json"]) == 0
    rec = next(json.loads(p.read_text()) for p in (env / "out").rglob("sts-mini.json"))
    assert rec["method"] == "prompteol" and rec["model"] == "tiny-llama"
