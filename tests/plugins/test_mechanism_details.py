"""Tests that kill the mutants bench/mutation_tool.py (cosmic-ray) found surviving the mechanism tests.
Each test is named after what it pins and checks it at parameter values where the broken
variant differs (a momentum of 0.5 would hide a swapped EMA; clipping at 1.0 would hide a wrongly
scaled loss), through the path a run takes (``Method.train`` up to ``fit``, ``train_loop``), with the
reference's protocol constants. docs/fidelity.md ("Mutation testing") lists each survivor and the test
here that kills it, or why it is equivalent. One class a module set: the tool selects them by class."""

from __future__ import annotations

import contextlib
import importlib

import numpy as np
import pytest
import torch

from benchbench import ConfigError, TrainContext
from benchbench.train.loop import (
    ItemStream,
    LoopConfig,
    LoopState,
    Objective,
    _optimizer_step,
    resolve_steps,
    train_loop,
)

TINY = "tiny-bert:16:1:2:32"
CORPUS = [f"sentence number {i} talks about topic {i % 5} with quite a few extra words {i * 7}" for i in range(24)]


CLASSES = {"esimcse": "ESimCSE", "mirror_bert": "MirrorBERT", "promptbert": "PromptBERT", "sncse": "SNCSE"}
CLASSES["diffcse"] = "DiffCSE"
CLASSES |= {"simcse": "SimCSE", "whitenedcse": "WhitenedCSE"}


def _ctx(tmp_path) -> TrainContext:
    return TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")


def _build(name: str, tmp_path, monkeypatch, probe=None, **overrides) -> dict:
    """What ``<Method>.train`` hands to ``fit`` with the DEFAULT config (plus ``overrides``): the
    objective, the loop budget, and the optimizer and scheduler factories; no training is run.
    ``probe(objective)`` runs where training would (its value: ``caught["probe"]``); what ``train``
    returns is ``caught["returned"]``."""
    mod = importlib.import_module(f"benchbench_plugins.{name}")
    caught: dict = {}

    def catch(method, objective, items, ctx, **kw):
        caught.update(kw, obj=objective, items=items, probe=probe(objective) if probe else None)
        return objective

    monkeypatch.setattr(mod, "fit", catch)
    if name == "sncse":  # spaCy is not what is tested here
        monkeypatch.setattr(mod, "negations", lambda texts, *a, **k: ["not " + t for t in texts])
    cls = getattr(mod, CLASSES[name])
    caught["returned"] = cls(cls.Config(**overrides)).train(CORPUS * 20, _ctx(tmp_path))
    return caught


def _lrs(caught: dict, steps: int) -> list[float]:
    """The learning rate at each of ``steps`` optimizer steps, from the method's own factories."""
    opt = caught["make_optimizer"](caught["obj"])
    sched = caught["make_scheduler"](opt) if caught.get("make_scheduler") else None
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        if sched is not None:
            sched.step()
    return out


# the reference's recipe per method: batch, lr, weight decay, clipping, linear decay to 0 (else constant)
RECIPES = {
    "esimcse": (64, 3e-5, 0.0, 1.0, True),
    "mirror_bert": (200, 2e-5, 0.01, 0.0, False),
    "promptbert": (256, 1e-5, 0.0, 1.0, True),
    "sncse": (256, 1e-5, 0.0, 1.0, True),
    "diffcse": (64, 7e-6, 0.0, 1.0, True),
}


def check_recipe(name: str, tmp_path, monkeypatch, **overrides) -> None:
    """The defaults as a run uses them: one micro-batch an update, the reference's clipping, AdamW's
    lr and weight decay, linear decay to 0 without warm-up (or a constant lr)."""
    batch, lr, wd, clip, decay = RECIPES[name]
    caught = _build(name, tmp_path, monkeypatch, steps=8, **overrides)
    loop = caught["loop"]
    assert (loop.steps, loop.batch_size, loop.grad_accum, loop.max_grad_norm) == (8, batch, 1, clip)
    opt = caught["make_optimizer"](caught["obj"])
    assert isinstance(opt, torch.optim.AdamW)
    assert (opt.param_groups[0]["lr"], opt.param_groups[0]["weight_decay"]) == (lr, wd)
    lrs = _lrs(caught, 8)
    expected = [lr * (1 - s / 8) for s in range(8)] if decay else [lr] * 8
    assert np.allclose(lrs, expected, rtol=1e-9, atol=0), lrs


def check_speed_knob(name: str) -> None:
    """``checkpoint_every`` decides when a checkpoint is written, never what is trained: it stays out
    of the result key (``config_hash``), so a resumed run with another interval finds its records."""
    check_speed_knob_of(getattr(importlib.import_module(f"benchbench_plugins.{name}"), CLASSES[name]).Config)


def check_speed_knob_of(config_cls) -> None:
    from benchbench import config_hash

    assert config_hash(config_cls(checkpoint_every=7)) == config_hash(config_cls())
    assert config_hash(config_cls(batch_size=7)) != config_hash(config_cls())


def check_training_length_only_in_training(name: str, tmp_path, monkeypatch, **overrides) -> None:
    """The option ``max_seq_length`` (8 here) cuts the inputs while the objective trains, and only
    then: the encoder ``train`` returns and the copy a learning-curve monitor scores (``result()``)
    encode at the start's max length (tiny BERT's 128). Two sentences that share their first 12 words
    get different vectors only if encoding reads past the training cut."""
    head = " ".join(f"w{i}" for i in range(12))
    a, b = f"{head} the cat sat on the mat", f"{head} stocks fell sharply today"

    def probe(objective):
        objective.train()  # as the loop trains it
        return objective.encoder.tokenize([a])["input_ids"].shape[1]

    caught = _build(name, tmp_path, monkeypatch, probe=probe, steps=1, max_seq_length=8, **overrides)
    assert caught["probe"] == 8
    for enc in (caught["returned"], caught["obj"].result()):
        assert enc.max_seq_length == 128
        va, vb = enc.encode([a, b])
        assert not np.allclose(va, vb, atol=1e-5)


def check_mlp(name: str, tmp_path, monkeypatch) -> None:
    """The reference's ``--mlp_only_train``: the objective a run builds puts dense + tanh (dim x dim)
    on the training vectors by default, nothing with ``mlp=False``."""
    obj = _build(name, tmp_path, monkeypatch, steps=1)["obj"]
    assert isinstance(obj.mlp, torch.nn.Sequential) and [type(m).__name__ for m in obj.mlp] == ["Linear", "Tanh"]
    assert obj.mlp[0].weight.shape == (obj.encoder.dim, obj.encoder.dim)
    off = _build(name, tmp_path / "off", monkeypatch, steps=1, mlp=False)["obj"]
    assert isinstance(off.mlp, torch.nn.Identity)


class TestESimCSE:
    def test_default_recipe_reaches_the_loop_and_the_optimizer(self, tmp_path, monkeypatch):
        check_recipe("esimcse", tmp_path, monkeypatch)

    def test_training_mlp_is_on_by_default_and_off_on_request(self, tmp_path, monkeypatch):
        check_mlp("esimcse", tmp_path, monkeypatch)

    def test_training_views_are_cut_at_the_training_max_length_before_the_repetition(self, tmp_path, monkeypatch):
        """The reference tokenizes with truncation at 32 (the training length the run sets), then
        repeats tokens: the original view is 32 tokens ending in [SEP], its repetition may be longer."""
        long = " ".join(f"word{i}" for i in range(80))
        probe = lambda o: (o.encoder.train_max_seq_length, o.collate([long, "short"], np.random.default_rng(0)))  # noqa: E731
        caught = _build("esimcse", tmp_path, monkeypatch, probe=probe, steps=1)
        length, b = caught["probe"]
        mask, ids = b["attention_mask"], b["input_ids"]
        assert (
            length == 32
            and int(mask[0].sum()) == 32
            and int(ids[0, 31]) == caught["obj"].encoder.tokenizer.sep_token_id
        )
        assert int(mask[2].sum()) >= 32  # the repeated view of the cut sentence
        assert caught["obj"].encoder.max_seq_length == 128  # the returned encoder: the start's length

    def test_checkpoint_interval_is_not_in_the_result_key(self):
        check_speed_knob("esimcse")

    def test_the_training_length_holds_in_training_only(self, tmp_path, monkeypatch):
        check_training_length_only_in_training("esimcse", tmp_path, monkeypatch)

    def test_a_queue_of_one_keeps_the_newest_key_and_no_queue_keeps_nothing(self):
        from benchbench_plugins.esimcse import ESimCSEObjective

        from benchbench import tiny_bert

        enc = tiny_bert(16, 1, 2, 32, pooling="cls")
        one = ESimCSEObjective(enc, temperature=0.05, dup_rate=0.32, momentum=0.9, queue_size=1)
        keys = torch.arange(3 * 16, dtype=torch.float32).reshape(3, 16)
        one.enqueue(keys)
        assert torch.equal(one.negatives(), keys[-1:])
        none = ESimCSEObjective(enc, temperature=0.05, dup_rate=0.32, momentum=0.9, queue_size=0)
        none.enqueue(keys)  # the reference's neg_size 0: nothing queued, no error
        assert none.negatives().shape == (0, 16)

    def test_short_sentences_repeat_only_their_inner_tokens(self):
        """At dup_rate 1, a 3-token input ([CLS] w [SEP]) may repeat its word; a 4-token input repeats
        at most its 2 inner tokens however many the draw asks for (the reference's cap N - 2)."""
        from benchbench_plugins.esimcse import repetition_positions

        rng = np.random.default_rng(0)
        three = [repetition_positions(3, 1.0, rng) for _ in range(200)]
        assert {tuple(p) for p in three} == {(), (1,)}
        four = [repetition_positions(4, 1.0, rng) for _ in range(400)]
        assert max(len(p) for p in four) == 2 and all(set(p) <= {1, 2} for p in four)
        assert sum(len(p) == 2 for p in four) > 150  # draws of 2 and 3 both give the two inner tokens


class TestMirrorBERT:
    def test_default_recipe_reaches_the_loop_and_the_optimizer(self, tmp_path, monkeypatch):
        check_recipe("mirror_bert", tmp_path, monkeypatch)

    def test_the_training_length_holds_in_training_only(self, tmp_path, monkeypatch):
        check_training_length_only_in_training("mirror_bert", tmp_path, monkeypatch)

    def test_the_30_character_threshold_is_inclusive(self):
        """The reference masks a string of 30 characters and leaves one of 29 (``len(s) < 30``)."""
        from benchbench_plugins.mirror_bert import mask_span

        rng = np.random.default_rng(0)
        assert mask_span("y" * 29, 5, rng) == "y" * 29
        assert mask_span("y" * 30, 5, rng) == " [MASK] " + "y" * 25  # cut at the first "yyyyy"
        s = "abcdefghijklmnopqrstuvwxyz0123"  # 30 distinct characters: a span of 1 masks exactly one
        outs = {mask_span(s, 1, np.random.default_rng(i)) for i in range(100)}
        assert {len(o) for o in outs} == {29 + len(" [MASK] ")} and len(outs) > 10

    def test_collate_counts_the_tokens_of_both_views(self, tmp_path, monkeypatch):
        obj = _build("mirror_bert", tmp_path, monkeypatch, steps=1)["obj"]
        b = obj.collate(CORPUS[:4], np.random.default_rng(0))
        assert b["n_tokens"] == int(b["a_attention_mask"].sum()) + int(b["b_attention_mask"].sum())
        assert int(b["b_attention_mask"].sum()) > 0

    def test_checkpoint_interval_is_not_in_the_result_key(self):
        check_speed_knob("mirror_bert")

    def test_a_span_as_long_as_the_string_masks_nothing(self):
        from benchbench_plugins.mirror_bert import mask_span

        s = "abcdefghijklmnopqrstuvwxyz0123"  # 30 characters
        assert mask_span(s, 30, np.random.default_rng(0)) == s
        assert mask_span(s, 29, np.random.default_rng(0)) != s

    def test_drophead_is_off_at_p_0_and_at_evaluation_and_drops_heads_when_training(self):
        """At p = 0 the hook returns the output untouched and draws nothing (dropout's later draws, on
        the same seed, stay the same); at evaluation it is off; at p = 0.9 in training it drops heads."""
        from benchbench_plugins.mirror_bert import drophead_hook

        from benchbench import tiny_bert

        enc = tiny_bert(16, 1, 2, 32, pooling="mean")
        attn = next(m for n, m in enc.model.named_modules() if n.endswith("attention.self"))
        ids = enc.tokenize(["a cat sits on the mat"])

        def run(p, training):
            handle = attn.register_forward_hook(drophead_hook(p)) if p is not None else None
            try:
                enc.train(training)
                torch.manual_seed(0)
                with torch.no_grad():
                    return enc(**ids)["sentence_embedding"]
            finally:
                if handle is not None:
                    handle.remove()

        assert torch.equal(run(0.0, True), run(None, True))  # dropout (0.1) on: the same draws
        assert torch.equal(run(0.9, False), run(None, False))
        assert not torch.allclose(run(0.9, True), run(None, True), atol=1e-4)


class TestPromptBERT:
    def test_default_recipe_reaches_the_loop_and_the_optimizer(self, tmp_path, monkeypatch):
        check_recipe("promptbert", tmp_path, monkeypatch)

    def test_training_mlp_is_on_by_default_and_off_on_request(self, tmp_path, monkeypatch):
        check_mlp("promptbert", tmp_path, monkeypatch)

    def test_training_never_cuts_past_what_the_model_holds(self, tmp_path, monkeypatch):
        """``max_seq_length`` (32) counts SENTENCE tokens; None or more than the model holds gives the
        model's length minus the longer template."""
        long = " ".join(f"word{i}" for i in range(300))
        for cfg_len in (None, 500):
            obj = _build("promptbert", tmp_path / str(cfg_len), monkeypatch, steps=1, max_seq_length=cfg_len)["obj"]
            room = obj.encoder.max_seq_length - max(t.overhead for t in obj.templates)
            b = obj.collate([long], np.random.default_rng(0))
            assert obj.limit == room and int(b["attention_mask"].sum(1).max()) == obj.encoder.max_seq_length == 128
        obj = _build("promptbert", tmp_path / "32", monkeypatch, steps=1)["obj"]
        assert obj.limit == 32 and int(obj.collate([long], None)["n_sentence"][0]) == 32

    def test_an_encoder_with_no_room_keeps_the_template_and_no_sentence_token(self, tmp_path, monkeypatch):
        """Encoding cuts the SENTENCE to ``max_seq_length - overhead`` tokens, none when the template
        alone fills (or overfills) the length: the template and its [MASK] always stay whole."""
        enc = _build("promptbert", tmp_path, monkeypatch, steps=1)["obj"].encoder
        t, tok = enc.template, enc.tokenizer
        for room in (1, 0, -3):
            enc.max_seq_length = t.overhead + room
            b = enc.tokenize(["a cat sits on the mat"])
            assert b["input_ids"][0].tolist() == t.wrap(tok("a", add_special_tokens=False)["input_ids"][: max(room, 0)])
            assert int(b["mask_pos"][0]) == t.mask_index(max(room, 0))

    def test_checkpoint_interval_is_not_in_the_result_key(self):
        check_speed_knob("promptbert")

    def test_evaluation_with_denoising_subtracts_the_template_alone_vector(self, tmp_path, monkeypatch):
        """``denoise_eval``: the [MASK] vector minus the template-alone vector at the sentence's length."""
        from benchbench_plugins.promptbert import PromptEncoder

        enc = _build("promptbert", tmp_path, monkeypatch, steps=1)["obj"].encoder
        den = PromptEncoder(enc, enc.template.text, denoise=True).eval()
        b = den.tokenize(["a cat sits on the mat", "dogs bark"])
        with torch.no_grad():
            raw = PromptEncoder(enc, enc.template.text, denoise=False).eval()(**b)["sentence_embedding"]
            bias = den.template.bias(den.model, b["n_sentence"])
            out = den(**b)["sentence_embedding"]
        assert bias.abs().max() > 0.1 and torch.allclose(out, raw - bias, atol=1e-5)


class TestSNCSE:
    def test_default_recipe_reaches_the_loop_and_the_optimizer(self, tmp_path, monkeypatch):
        check_recipe("sncse", tmp_path, monkeypatch)

    def test_training_mlp_is_on_by_default_and_off_on_request(self, tmp_path, monkeypatch):
        check_mlp("sncse", tmp_path, monkeypatch)

    def test_rows_are_sentence_positive_then_negated_one(self, tmp_path, monkeypatch):
        """``embed`` reads the batch as collate lays it out: sentence i's x at row 3i, x+ at 3i+1, x- at 3i+2."""
        import benchbench_plugins.sncse as mod

        obj = _build("sncse", tmp_path, monkeypatch, steps=1)["obj"]
        obj.mlp = torch.nn.Identity()
        rows = torch.arange(9, dtype=torch.float32)[:, None].repeat(1, 4)
        monkeypatch.setattr(mod, "mask_vectors", lambda model, ids, mask, pos: (rows, None))
        z1, z2, z3 = obj.embed(torch.zeros(9, 2, dtype=torch.long), torch.ones(9, 2), torch.zeros(9))
        assert z1[:, 0].tolist() == [0, 3, 6] and z2[:, 0].tolist() == [1, 4, 7] and z3[:, 0].tolist() == [2, 5, 8]

    def test_prompt_batch_refuses_a_template_list_of_another_length(self, tmp_path, monkeypatch):
        from benchbench_plugins.sncse import prompt_batch

        obj = _build("sncse", tmp_path, monkeypatch, steps=1)["obj"]
        with pytest.raises(ValueError):
            prompt_batch(obj.encoder.tokenizer, ["a cat .", "a dog ."], [obj.templates[0]], 32)

    def test_checkpoint_interval_is_not_in_the_result_key(self):
        check_speed_knob("sncse")

    def test_a_prompt_with_no_room_keeps_the_template_and_no_sentence_token(self, tmp_path, monkeypatch):
        """``prompt_batch`` cuts the SENTENCE to ``max_length - overhead`` tokens, none when the template
        alone fills (or overfills) the length: the template and its [MASK] always stay whole."""
        from benchbench_plugins.sncse import prompt_batch

        obj = _build("sncse", tmp_path, monkeypatch, steps=1)["obj"]
        t = obj.templates[0]
        tok = obj.encoder.tokenizer
        for room in (1, 0, -3):
            b = prompt_batch(tok, ["a cat sits on the mat ."], [t], t.overhead + room)
            assert b["input_ids"][0].tolist() == t.wrap(tok("a", add_special_tokens=False)["input_ids"][: max(room, 0)])
            assert int(b["mask_pos"][0]) == t.mask_index(max(room, 0))


class TestDiffCSE:
    def test_default_recipe_reaches_the_loop_and_the_optimizer(self, tmp_path, monkeypatch, generator_dir):
        check_recipe("diffcse", tmp_path, monkeypatch, generator=str(generator_dir))

    def test_checkpoint_interval_is_not_in_the_result_key(self):
        check_speed_knob("diffcse")

    def test_the_training_length_holds_in_training_only(self, tmp_path, monkeypatch, generator_dir):
        check_training_length_only_in_training("diffcse", tmp_path, monkeypatch, generator=str(generator_dir))

    def test_the_run_builds_the_papers_objective(self, tmp_path, monkeypatch, generator_dir):
        """The objective ``DiffCSE.train`` builds: lambda 0.005, masking 0.30, temperature 0.05, the
        BatchNorm projection, a frozen generator outside the optimizer, the training length 32."""
        probe = lambda o: o.encoder.train_max_seq_length  # noqa: E731  (the training-only cut; it evaluates at 128)
        caught = _build("diffcse", tmp_path, monkeypatch, probe=probe, steps=1, generator=str(generator_dir))
        obj = caught["obj"]
        assert (obj.lambda_weight, obj.masking_ratio, obj.temperature) == (0.005, 0.30, 0.05)
        assert [type(m).__name__ for m in obj.mlp][1] == "BatchNorm1d" and obj.condition_before_mlp is False
        assert caught["probe"] == 32 and caught["returned"].max_seq_length == 128
        opt = caught["make_optimizer"](obj)
        in_opt = {id(p) for g in opt.param_groups for p in g["params"]}
        assert not any(id(p) in in_opt for p in obj.generator.parameters())
        assert all(id(p) in in_opt for p in obj.discriminator.parameters())
        assert all(id(p) in in_opt for p in obj.electra_head.parameters())

    def test_the_objectives_own_defaults_are_the_papers(self):
        """Direct constructions (the benches, other code) get the same recipe as a run."""
        import inspect

        from benchbench_plugins.diffcse import DiffCSEConfig, DiffCSEObjective

        c, sig = DiffCSEConfig(), inspect.signature(DiffCSEObjective).parameters
        for name in ("temperature", "lambda_weight", "masking_ratio", "batchnorm", "condition_before_mlp", "replace"):
            assert sig[name].default == getattr(c, name), name

    def test_the_projection_starts_as_bert_initialises_a_linear_layer(self):
        from types import SimpleNamespace

        from benchbench_plugins.diffcse import make_projection

        torch.manual_seed(0)
        for config, std in ((SimpleNamespace(), 0.02), (SimpleNamespace(initializer_range=0.5), 0.5)):
            enc = SimpleNamespace(dim=200, device="cpu", model=SimpleNamespace(config=config))
            for lin in (make_projection(enc)[0], make_projection(enc, batchnorm=False)[0]):
                assert float(lin.weight.detach().std()) == pytest.approx(std, rel=0.03)

    def test_the_run_counts_real_tokens_edits_and_right_answers_exactly(self, generator_dir):
        from benchbench_plugins.diffcse import DiffCSEObjective, load_generator

        from benchbench import tiny_bert

        torch.manual_seed(0)
        enc = tiny_bert(16, 1, 2, 32, pooling="cls", max_seq_length=32)
        obj = DiffCSEObjective(enc, load_generator(str(generator_dir), enc), lambda_weight=1.0)
        for m in obj.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
        obj.train()
        b = obj.collate(["a cat sits on the mat", "two words", CORPUS[3]], np.random.default_rng(0))
        b.pop("n_tokens")
        obj(**b)
        ids, mask = torch.cat([b["input_ids"]] * 2), torch.cat([b["attention_mask"]] * 2)
        with torch.no_grad():
            h = obj.mlp(obj.encoder(input_ids=ids, attention_mask=mask)["sentence_embedding"])
            edited, replaced = obj.edit(b["mlm_input_ids"], ids, mask)
            guess = obj.electra_head(obj.discriminate(edited, mask, h)).argmax(-1)
        real = mask.bool()
        assert obj.stats == {
            "tokens": int(real.sum()),
            "replaced": int(replaced[real].sum()),
            "correct": int((guess == replaced)[real].sum()),
        }
        assert 0 < obj.stats["replaced"] < obj.stats["tokens"]
        assert obj.stats["correct"] != obj.stats["tokens"] - obj.stats["correct"]  # == and != differ here


class TestPrompt:
    """plugins/_prompt.py, shared by PromptBERT and SNCSE."""

    def test_templates_need_one_x_and_one_mask_after_it(self):
        from benchbench_plugins._prompt import Template

        from benchbench import tiny_bert

        tok = tiny_bert(16, 1, 2, 32).tokenizer
        assert Template.parse('This sentence : "[X]" means [MASK] .', tok).suffix[-2] == tok.mask_token_id
        for bad in ('"[X]" [X] means [MASK] .', '"[X]" means [MASK] [MASK] .', '[MASK] means "[X]" .', "[X] only"):
            with pytest.raises(ConfigError, match=r"one \[X\] \(the sentence\) and one \[MASK\] after it"):
                Template.parse(bad, tok, "who")

    def test_the_mlp_starts_as_bert_initialises_a_linear_layer(self):
        """Weights normal with the config's initializer_range (0.02 where the config has none), bias 0."""
        from types import SimpleNamespace

        from benchbench_plugins._prompt import make_mlp

        torch.manual_seed(0)
        for config, std in ((SimpleNamespace(), 0.02), (SimpleNamespace(initializer_range=0.5), 0.5)):
            enc = SimpleNamespace(dim=200, device="cpu", model=SimpleNamespace(config=config))
            lin, act = make_mlp(enc)
            assert isinstance(act, torch.nn.Tanh) and lin.weight.shape == (200, 200)
            assert float(lin.weight.detach().std()) == pytest.approx(std, rel=0.02) and not lin.bias.any()


class TestSimCSE:
    """plugins/simcse.py as ``SimCSE.train`` builds it."""

    def test_defaults_are_the_tsdae_papers_appendix_b_run_of_simcse(self):
        from benchbench_plugins.simcse import SimCSEConfig

        c = SimCSEConfig()
        assert (c.epochs, c.batch_size, c.lr, c.temperature, c.max_seq_length) == (1.0, 512, 5e-5, 0.05, 32)
        assert (c.select_on_stsb_dev, c.eval_every, c.grad_accum, c.max_grad_norm) == (False, 125, 1, 1.0)
        check_speed_knob_of(SimCSEConfig)

    def test_the_mlp_starts_as_bert_initialises_a_linear_layer(self):
        from types import SimpleNamespace

        from benchbench_plugins.simcse import make_mlp

        torch.manual_seed(0)
        for config, std in ((SimpleNamespace(), 0.02), (SimpleNamespace(initializer_range=0.5), 0.5)):
            enc = SimpleNamespace(dim=200, device="cpu", model=SimpleNamespace(config=config))
            lin = make_mlp(enc)[0]
            assert float(lin.weight.detach().std()) == pytest.approx(std, rel=0.02) and not lin.bias.any()

    def test_collate_counts_the_tokens_of_both_views_and_result_keeps_the_mlp_only_when_asked(self):
        from benchbench_plugins.simcse import SimCSEObjective

        from benchbench import tiny_bert

        obj = SimCSEObjective(tiny_bert(16, 1, 2, 32, pooling="cls"), 0.05, mlp=True)
        b = obj.collate(["a cat", "a dog sits on the mat"], np.random.default_rng(0))
        assert b["n_tokens"] == 2 * int(b["attention_mask"].sum())
        assert obj.keep_mlp is False and type(obj.result()).__name__ == "TransformerEncoder"
        obj.keep_mlp = True
        assert type(obj.result()).__name__ == "MLPEncoder"

    def test_the_training_length_holds_in_training_only(self, tmp_path, monkeypatch):
        check_training_length_only_in_training("simcse", tmp_path, monkeypatch)


class TestWhitenedCSE:
    """plugins/whitenedcse.py as ``WhitenedCSE.train`` builds it."""

    def test_the_training_length_holds_in_training_only(self, tmp_path, monkeypatch):
        # groups that divide tiny BERT's 16 dimensions
        check_training_length_only_in_training("whitenedcse", tmp_path, monkeypatch, num_groups=8)


class TestViews:
    """benchbench/train/views.py: the augmented-view cache."""

    def test_a_config_is_one_key_whatever_its_order_and_every_cached_text_comes_back(self, tmp_path):
        from benchbench.train.views import ViewCache

        assert ViewCache.config_key({"a": 1, "b": 2}) == ViewCache.config_key({"b": 2, "a": 1})
        cache = ViewCache(tmp_path / "v.sqlite")
        texts = [f"text {i}" for i in range(1234)]  # more than one 500-text query
        cache.put("aug", {"r": 1}, {t: t.upper() for t in texts})
        assert cache.get("aug", {"r": 1}, texts) == {t: t.upper() for t in texts}

    def test_cache_map_with_a_chunk_of_zero_still_runs_one_text_at_a_time(self, tmp_path):
        from benchbench.train.views import ViewCache

        cache = ViewCache(tmp_path / "v.sqlite")
        sizes = []
        out = cache.map("aug", {}, ["a", "b", "c"], lambda part: sizes.append(len(part)) or [t * 2 for t in part], 0)
        assert out == ["aa", "bb", "cc"] and sizes == [1, 1, 1]


class TestAugmenters:
    """plugins/augmenters.py: the cached augmenters' shared machinery."""

    def test_words_keep_leading_whitespace(self):
        from benchbench_plugins.augmenters import _detok, _tokens

        for text in ("  two spaces first", "\tword and more", "plain start"):
            assert _detok(_tokens(text)) == text
        assert _tokens("  two")[0] == ("two", "  ")

    def test_the_single_view_is_variant_0_and_views_pair_the_original_with_it(self, tmp_path):
        from benchbench_plugins.augmenters import CachedAugmenter

        from benchbench.train.views import ViewCache

        class Tag(CachedAugmenter):
            name = "tag"

            def config(self):
                return {}

            def transform(self, texts, variant):
                return [f"{t}#{variant}" for t in texts]

        aug = Tag(ViewCache(tmp_path / "v.sqlite"))
        assert aug(["a", "b"]) == ["a#0", "b#0"] == aug.apply(["a", "b"])
        assert aug.views(["a"]) == (["a"], ["a#0"])
        assert aug.views(["a"], two_view=True) == (["a#0"], ["a#1"])


class TestTSDAE:
    """plugins/tsdae.py as ``TSDAE.train`` builds it."""

    def test_recipe_defaults_beyond_the_papers_table(self):
        from benchbench_plugins.tsdae import TSDAEConfig

        c = TSDAEConfig()
        assert (c.weight_decay, c.grad_accum, c.max_grad_norm, c.fast_cross_attention) == (0.0, 1, 1.0, True)
        check_speed_knob_of(TSDAEConfig)

    def test_length_groups_are_trimmed_to_their_own_longest_member(self):
        """A lone long sentence beside short ones: its group is trimmed to ITS length (not to the
        group's size), so the grouped loss equals the plain one."""
        from benchbench_plugins.tsdae import TSDAEObjective, build_decoder

        from benchbench import tiny_bert
        from benchbench.train.noise import WordNoise

        enc = tiny_bert(16, 1, 2, 32, pooling="cls", seed=1)
        obj = TSDAEObjective(enc, build_decoder(enc, tie=True), WordNoise("delete", 0.1)).eval()
        torch.manual_seed(0)
        with torch.no_grad():  # weights large enough that the sentence vector visibly steers the decoder
            for prm in obj.parameters():
                prm.normal_(0.0, 0.5)
        long = " ".join(f"word{i}" for i in range(25))
        b = obj.collate(["a cat", "dogs bark", "it rains", long], np.random.default_rng(0))
        b.pop("n_tokens")
        with torch.no_grad():
            plain = obj(**b)
            obj.group_by_length = True
            grouped = obj(**b)
        assert abs(plain.item() - grouped.item()) < 1e-4

    def test_the_one_vector_shortcut_drops_heads_without_bias_in_training(self):
        """Averaged over many dropout draws, the shortcut's training output is its evaluation output:
        each kept head scaled by 1 / (1 - p), the dense bias added once (checked before LayerNorm, with
        random weights and biases so that a wrong scale or sign shows)."""
        from benchbench_plugins.tsdae import OneVectorCrossAttention, TSDAEObjective, build_decoder

        from benchbench import tiny_bert
        from benchbench.train.noise import WordNoise

        torch.manual_seed(0)
        enc = tiny_bert(16, 1, 2, 32, pooling="cls", seed=1)
        obj = TSDAEObjective(enc, build_decoder(enc, tie=True, fast_cross_attention=True), WordNoise("delete", 0.6))
        blk = next(m for m in obj.modules() if isinstance(m, OneVectorCrossAttention))
        blk.output.LayerNorm, blk.output.dropout = torch.nn.Identity(), torch.nn.Identity()
        blk.self.dropout.p = 0.5
        with torch.no_grad():
            blk.self.value.weight.normal_(0.0, 0.5)
            blk.output.dense.weight.normal_(0.0, 0.5)
            blk.output.dense.bias.normal_(0.0, 2.0)
        hidden, memory = torch.zeros(8000, 3, 16), torch.randn(1, 1, 16).expand(8000, 1, 16)
        with torch.no_grad():
            evaluated = blk.eval()(hidden[:1], encoder_hidden_states=memory[:1])[0][0]
            trained = blk.train()(hidden, encoder_hidden_states=memory)[0].mean(0)
            no_bias = evaluated - blk.output.dense.bias
        assert no_bias.abs().max() > 1.0 and blk.output.dense.bias.abs().max() > 1.0
        assert (trained - evaluated).abs().max() < 0.25, (trained - evaluated).abs().max()


class TestCT:
    """plugins/ct.py as ``CT.train`` builds it."""

    def test_defaults_are_the_papers(self):
        from benchbench_plugins.ct import CTConfig

        c = CTConfig()
        assert (c.steps, c.batch_size, c.lr, c.negatives, c.segment_steps) == (100_000, 8, 1e-5, 7, 500)
        assert (c.grad_accum, c.dropout, c.max_grad_norm) == (1, True, 1.0)
        check_speed_knob_of(CTConfig)

    def test_the_segmented_schedule_steps_down_every_500_updates_and_stays_at_0_2(self):
        from benchbench_plugins.ct import segmented_lr

        f = segmented_lr()
        got = [f(s) for s in (0, 499, 500, 999, 1000, 1499, 1500, 1999, 2000, 2500, 10_000)]
        assert got == [1.0, 1.0, 0.8, 0.8, 0.6, 0.6, 0.4, 0.4, 0.2, 0.2, 0.2]

    def test_collate_counts_the_tokens_of_both_encoders(self):
        from benchbench_plugins.ct import CTObjective

        from benchbench import tiny_bert

        obj = CTObjective(tiny_bert(16, 1, 2, 32, pooling="mean"), CORPUS, negatives=3)
        b = obj.collate(CORPUS[:2], np.random.default_rng(0))
        assert b["n_tokens"] == int(b["a_attention_mask"].sum() + b["b_attention_mask"].sum())
        assert int(b["b_attention_mask"].sum()) != 0


class TestBSL:
    """plugins/bsl.py as ``BSL.train`` builds it."""

    def test_defaults_are_the_papers(self):
        from benchbench_plugins.bsl import BSLConfig

        c = BSLConfig()
        assert (c.epochs, c.batch_size, c.two_view, c.max_seq_length, c.grad_accum, c.max_grad_norm) == (
            1.0,
            64,
            True,
            64,
            1,
            1.0,
        )
        check_speed_knob_of(BSLConfig)

    def test_the_target_moves_by_ema_on_parameters_and_float_buffers_and_copies_the_rest(self):
        from types import SimpleNamespace

        from benchbench_plugins.bsl import BSLObjective

        def net(value: float) -> torch.nn.Module:
            m = torch.nn.Linear(2, 2)
            with torch.no_grad():
                m.weight.fill_(value)
                m.bias.fill_(value)
            m.register_buffer("stat", torch.full((2,), value))
            m.register_buffer("count", torch.tensor(int(value)))
            return m

        target, online = net(1.0), net(3.0)
        BSLObjective.ema_update(SimpleNamespace(momentum=0.75, target=target, encoder=online))
        expected = 0.75 * 1.0 + 0.25 * 3.0  # m * target + (1 - m) * online (a swapped EMA would give 2.5)
        assert torch.allclose(target.weight, torch.full((2, 2), expected))
        assert torch.allclose(target.stat, torch.full((2,), expected)) and int(target.count) == 3

    def test_the_reference_schedule_at_its_edges(self):
        from benchbench_plugins.bsl import schedule

        for steps, want in ((2, [0.0, 1.0, 0.0]), (1, [0.0, 0.0]), (20, [0.0, 0.5, 1.0, 0.5, 0.0])):
            opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
            f = schedule(opt, "reference", steps).lr_lambdas[0]
            at = [0, 1, 2, 11, 20] if steps == 20 else list(range(steps + 1))
            assert [f(s) for s in at] == pytest.approx(want), steps

    def test_collate_counts_the_tokens_of_both_views(self):
        from benchbench_plugins.bsl import BSLObjective

        from benchbench import tiny_bert

        class Views:
            def views(self, items, rng, two_view=True):
                return list(items), [t + " and a much longer second view" for t in items]

        obj = BSLObjective(tiny_bert(16, 1, 2, 32, pooling="mean"), Views(), 0.9, 2, True)
        b = obj.collate(["a cat", "a dog"], np.random.default_rng(0))
        assert b["n_tokens"] == int(b["view1"]["attention_mask"].sum() + b["view2"]["attention_mask"].sum())


class TestTransEncoder:
    """plugins/trans_encoder.py's protocol constants."""

    def test_defaults_are_the_papers_or_named_departures(self):
        from benchbench_plugins.trans_encoder import TransEncoderConfig

        c = TransEncoderConfig()
        assert (c.cross_max_length, c.bi_max_length, c.weight_decay, c.eval_every, c.dev_max_pairs) == (
            64,
            32,
            0.01,
            200,
            1000,
        )
        assert c.select is True and c.eval_full_length is True


class _Constant(Objective):
    """Loss = the sum of the micro-batch's items (+ 0 * w: a parameter for the optimizer); records the
    items it was given and one draw of each micro-batch's rng."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.seen, self.draws = [], []

    def collate(self, items, rng):
        self.seen.append(list(items))
        self.draws.append(float(rng.random()))
        return {"x": torch.tensor(items, dtype=torch.float32), "n_tokens": 5 * len(items)}

    def forward(self, x):
        return x.sum() + 0.0 * self.w.sum()


class _TwoProcesses:
    """Accelerate's view from process 1 of 2 (no second process can run here): what
    ``_optimizer_step`` reads of it."""

    num_processes, process_index, device, sync_gradients = 2, 1, torch.device("cpu"), True

    def accumulate(self, _model):
        return contextlib.nullcontext()

    def autocast(self):
        return contextlib.nullcontext()

    def backward(self, loss):
        loss.backward()

    def clip_grad_norm_(self, params, norm):
        torch.nn.utils.clip_grad_norm_(params, norm)


class TestLoop:
    """benchbench/train/loop.py: the loss curve, the counters and the stream positions a run records."""

    def _run(self, tmp_path, items, **loop):
        ctx = TrainContext(model="none", seed=3, output_dir=tmp_path, progress=False, device="cpu")
        obj = _Constant()
        cfg = LoopConfig(**{"checkpoint_every": 0, "checkpoint_minutes": 0, **loop})
        train_loop(obj, items, ctx, cfg, lambda m: torch.optim.SGD(m.parameters(), lr=0.0), fingerprint="k")
        return obj, ctx.accounting

    def test_loss_curve_is_the_mean_step_loss_every_twentieth_and_at_the_end(self, tmp_path):
        _, a = self._run(tmp_path, [1.0] * 30, steps=45, batch_size=3, grad_accum=2)
        # each micro-batch's loss is 3.0; a step's loss is the mean over its 2 micro-batches, not their sum
        assert a["loss_curve"] == [[s, 3.0] for s in [*range(2, 45, 2), 45]]  # every 45 // 20 = 2 steps, and 45
        assert (a["steps"], a["examples"], a["tokens"], a["grad_accum"]) == (45, 45 * 6, 45 * 6 * 5, 2)
        _, b = self._run(tmp_path / "b", [1.0] * 30, steps=7, batch_size=1, log_every=3)
        assert b["loss_curve"] == [[3, 1.0], [6, 1.0], [7, 1.0]]
        _, c = self._run(tmp_path / "c", [1.0] * 30, steps=3, batch_size=1)
        assert [p[0] for p in c["loss_curve"]] == [1, 2, 3]  # fewer than 20 steps: a point each step

    def test_a_non_finite_loss_stops_the_run_and_says_what_to_do(self, tmp_path):
        with pytest.raises(
            FloatingPointError, match=r"k-run: loss became (nan|inf) at step 0; lower the learning rate"
        ):
            ctx = TrainContext(model="none", seed=3, output_dir=tmp_path, progress=False, device="cpu")
            train_loop(
                _Constant(),
                [float("nan")] * 4,
                ctx,
                LoopConfig(steps=2, batch_size=2, checkpoint_every=0, checkpoint_minutes=0),
                lambda m: torch.optim.SGD(m.parameters(), lr=0.0),
                fingerprint="k",
                desc="k-run",
            )

    def test_process_r_of_w_draws_its_own_stream_positions_and_noise(self):
        """Micro-batch m of process r takes stream positions from (m * w + r) * batch and its rng from
        (seed, m, r); the counters count all w processes."""
        obj, state = _Constant(), LoopState()
        stream = ItemStream(100, seed=5)
        items = [float(i) for i in range(100)]
        loop = LoopConfig(steps=1, batch_size=3, grad_accum=2)
        opt = torch.optim.SGD(obj.parameters(), lr=0.0)
        loss = _optimizer_step(_TwoProcesses(), obj, obj, opt, items, stream, state, loop, 7, "t")
        assert obj.seen == [[items[i] for i in stream.take(3, 3)], [items[i] for i in stream.take(9, 3)]]
        assert obj.draws == [float(np.random.default_rng([7, m, 1]).random()) for m in (0, 1)]
        assert (state.micro, state.items, state.tokens) == (2, 2 * 3 * 2, 2 * 15 * 2)
        assert loss == pytest.approx(sum(map(sum, obj.seen)) / 2)

    def test_budget_edges(self):
        assert (resolve_steps(1, 100, 8), resolve_steps(None, 3, 8), resolve_steps(None, 100, 8, 2.5)) == (1, 1, 32)
        assert resolve_steps(None, 16, 8) == 2 and resolve_steps(None, 17, 8) == 3
        assert ItemStream(10, seed=1, shuffle=False).take(7, 8) == [7, 8, 9, 0, 1, 2, 3, 4]
        assert ItemStream(1, seed=1).take(0, 3) == [0, 0, 0]
        with pytest.raises(ConfigError, match="empty"):
            ItemStream(0, seed=1)
        c = LoopConfig.from_config(type("C", (), {"steps": 9, "batch_size": 4, "grad_accum": 3, "lr": 1.0})(), steps=5)
        assert (c.steps, c.batch_size, c.grad_accum, c.max_grad_norm, c.log_every) == (5, 4, 3, 1.0, 0)
        assert resolve_steps(None, 1, 8, 0.01) == 1  # a tiny share of an epoch is still one step
        assert resolve_steps(None, 10, 8, 0.0) == 1  # and so is none
        assert LoopConfig(steps=1, batch_size=1).keep_checkpoints is False  # a finished run removes its checkpoints

    def test_a_parameter_without_a_gradient_in_a_step_is_not_moved_by_adams_momentum(self, tmp_path):
        """Gradients are reset to None, not 0, after each update: AdamW skips a parameter no loss reached
        in a step instead of moving it on its running moments."""

        class FirstStepOnly(_Constant):
            def __init__(self):
                super().__init__()
                self.v = torch.nn.Parameter(torch.ones(1))
                self.calls = 0

            def forward(self, x):
                self.calls += 1
                used = self.v.sum() if self.calls == 1 else 0.0
                return x.sum() + self.w.sum() + used

        obj = FirstStepOnly()
        ctx = TrainContext(model="none", seed=3, output_dir=tmp_path, progress=False, device="cpu")
        cfg = LoopConfig(steps=3, batch_size=1, checkpoint_every=0, checkpoint_minutes=0, max_grad_norm=0.0)
        seen = []
        train_loop(
            obj,
            [1.0] * 4,
            ctx,
            cfg,
            lambda m: torch.optim.AdamW(m.parameters(), lr=0.1, weight_decay=0.0),
            fingerprint="k",
            on_step=lambda st: seen.append(float(obj.v.detach())),
        )
        assert seen[0] != 1.0 and seen[1] == seen[0] == seen[2]

    def test_every_budget_field_has_its_floor(self, tmp_path):
        """steps >= 0 (0 is the step-0 row: no update), batch_size >= 1, grad_accum >= 1."""
        for bad in ({"steps": -1}, {"batch_size": 0}, {"grad_accum": 0}):
            cfg = {"steps": 1, "batch_size": 1, "grad_accum": 1, **bad}
            with pytest.raises(ConfigError, match="training budget must be steps >= 0, batch_size >= 1"):
                self._run(tmp_path / str(bad), [1.0] * 4, **cfg)
        _, a = self._run(tmp_path / "ok", [1.0] * 4, steps=1, batch_size=1, grad_accum=1)
        assert a["steps"] == 1

    def test_a_batch_without_a_token_count_counts_none_and_non_tensors_pass_as_they_are(self, tmp_path):
        class NoCount(_Constant):
            def collate(self, items, rng):
                return {"x": torch.tensor(items, dtype=torch.float32), "tag": ["kept"]}

            def forward(self, x, tag):
                assert tag == ["kept"]
                return x.sum() + 0.0 * self.w.sum()

        ctx = TrainContext(model="none", seed=3, output_dir=tmp_path, progress=False, device="cpu")
        cfg = LoopConfig(steps=2, batch_size=2, checkpoint_every=0, checkpoint_minutes=0)
        train_loop(NoCount(), [1.0] * 4, ctx, cfg, lambda m: torch.optim.SGD(m.parameters(), lr=0.0), fingerprint="k")
        assert (ctx.accounting["tokens"], ctx.accounting["examples"]) == (0, 4)

    def test_the_default_log_interval_is_a_twentieth_of_the_budget(self, tmp_path):
        _, a = self._run(tmp_path / "38", [1.0] * 4, steps=38, batch_size=1)
        assert len(a["loss_curve"]) == 38  # 38 // 20 = 1: a point every step
        _, b = self._run(tmp_path / "40", [1.0] * 4, steps=40, batch_size=1)
        assert [p[0] for p in b["loss_curve"]] == list(range(2, 41, 2))

    def test_the_monitor_runs_every_n_steps_and_at_the_end_and_its_time_is_not_training_time(self, tmp_path):
        import time as _time

        class WithResult(_Constant):
            def result(self):
                return "encoder"

        calls = []

        def monitor(step, encoder):
            calls.append(step)
            _time.sleep(0.25)
            return {"score": float(step)}

        ctx = TrainContext(model="none", seed=3, output_dir=tmp_path, progress=False, device="cpu")
        ctx.monitor, ctx.monitor_every = monitor, 3
        cfg = LoopConfig(steps=7, batch_size=1, checkpoint_every=0, checkpoint_minutes=0)
        train_loop(
            WithResult(), [1.0] * 4, ctx, cfg, lambda m: torch.optim.SGD(m.parameters(), lr=0.0), fingerprint="k"
        )
        assert calls == [3, 6, 7]
        assert [p[0] for p in ctx.accounting["monitor"]] == [3, 6, 7]
        assert 0.0 <= ctx.accounting["seconds"] < 0.5  # 0.75 s of monitoring left out, nothing added


class TestNoise:
    """TSDAE's word noise (benchbench/train/noise.py) as the registry hands it to a run."""

    def test_registered_augmenters_have_the_tsdae_paper_ratios(self, registry):
        from benchbench.train.noise import WordNoise

        got = {k: (v.kind, v.ratio, v.mask_token) for k, v in registry.augmenters.items() if k.startswith("word-")}
        assert got == {
            "word-delete": ("delete", 0.6, "[MASK]"),  # Table 6
            **{f"word-{k}": (k, 0.3, "[MASK]") for k in ("swap", "mask", "replace", "add")},  # Table 5
        }
        assert all(isinstance(v, WordNoise) for k, v in registry.augmenters.items() if k.startswith("word-"))

    def test_words_and_join_keep_the_spacing(self):
        from benchbench.train.noise import WordNoise, join, words

        text = "Hello, world!  It's a re-test."
        ws = words(text)
        assert ws == [
            ("Hello", False),
            (",", False),
            ("world", True),
            ("!", False),
            ("It's", True),
            ("a", True),
            ("re-test", True),
            (".", False),
        ]
        assert join(ws) == "Hello, world! It's a re-test."
        assert join(words("  leading space")) == "leading space"  # the first word never gets one
        assert words("a b ") == [("a", False), ("b", True)]  # a trailing space is no space before "a"
        assert words("a x,") == [("a", False), ("x", True), (",", False)]  # the comma follows "x", not " "
        assert WordNoise() == WordNoise("delete", 0.6)  # the TSDAE paper's default noise

    def test_bounds_of_the_ratio(self):
        from benchbench import ConfigError
        from benchbench.train.noise import WordNoise

        for ok in (0.0, 1.0):
            WordNoise("delete", ok)
        for bad in (-0.01, 1.01):
            with pytest.raises(ConfigError, match="ratio"):
                WordNoise("delete", bad)

    def test_empty_text_is_returned_as_is(self):
        from benchbench.train.noise import NOISE_KINDS, WordNoise

        for kind in NOISE_KINDS:
            assert WordNoise(kind, 1.0)(["", "   "], np.random.default_rng(0)) == ["", "   "]

    def test_ratio_zero_changes_nothing_and_ratio_one_changes_every_word(self):
        from benchbench.train.noise import WordNoise, words

        text = "w0 w1 w2 w3, w4 w5 w6 w7 w8 w9."
        for kind in ("swap", "mask", "replace", "add", "delete"):
            assert WordNoise(kind, 0.0)([text] * 5, np.random.default_rng(1)) == [text] * 5, kind
        rng = np.random.default_rng(2)
        masked = " ".join(["[MASK]"] * 4) + "[MASK] " + " ".join(["[MASK]"] * 6) + "[MASK]"  # w0-w3 , w4-w9 .
        assert WordNoise("mask", 1.0)([text], rng) == [masked]
        toks = [w for w, _ in words(WordNoise("add", 1.0)([text], rng)[0])]
        orig = [w for w, _ in words(text)]
        assert len(toks) == 2 * len(orig) == 24 and toks[::2] == orig  # one drawn word after each word
        assert WordNoise("delete", 1.0)([text], rng)[0].count(" ") == 0  # all dropped: exactly one word is kept

    def test_replacement_and_inserted_words_are_drawn_from_the_batch(self):
        from benchbench.train.noise import WordNoise

        batch = ["alpha beta", "gamma delta"]
        for kind in ("replace", "add"):
            outs = [
                w for _ in range(20) for o in WordNoise(kind, 1.0)(batch, np.random.default_rng(_)) for w in o.split()
            ]
            assert set(outs) == {"alpha", "beta", "gamma", "delta"}, kind  # all four, nothing else
        assert WordNoise("replace", 1.0)(["!?"], np.random.default_rng(0)) == ["thethe"]  # no word at all: "the"

    def test_swap_keeps_each_positions_spacing_and_a_one_word_text_draws_nothing(self):
        from benchbench.train.noise import WordNoise, words

        swap = WordNoise("swap", 1.0)
        text = "first, second, third and fourth."
        out = swap([text], np.random.default_rng(0))[0]
        assert out != text and sorted(w for w, _ in words(out)) == sorted(w for w, _ in words(text))
        assert [sp for _, sp in words(out)] == [sp for _, sp in words(text)]
        long = "one two three four five six seven eight"
        alone = WordNoise("swap", 0.5)([long], np.random.default_rng(1))[0]
        assert WordNoise("swap", 0.5)(["word", long], np.random.default_rng(1))[1] == alone

    def test_swap_of_a_small_ratio_still_moves_two_words(self):
        from benchbench.train.noise import WordNoise

        text = " ".join(f"w{i}" for i in range(10))
        outs = WordNoise("swap", 0.01)([text] * 200, np.random.default_rng(3))
        moved = {sum(a != b for a, b in zip(o.split(), text.split())) for o in outs}
        assert moved == {0, 2}  # round(0.1) = 0 -> at least two positions, shuffled (may stay in place)


class TestClassifier:
    """SentEval (facebookresearch/SentEval at 5d6dc11) as ``run_protocol`` gets it from ``get_setting``:
    the README's two configurations, ``PyTorchClassifier``'s defaults, the L2 grid of
    ``innerKFoldClassifier`` and the torch default learning rates its optimizer strings get."""

    def test_settings_are_senteval_readme_configs(self):
        from benchbench.evaluate.adapters import _classifier as C

        common = {"nhid": 0, "max_epoch": 200, "seed": 1111, "l2_grid": [1e-5, 1e-4, 1e-3, 1e-2]}
        assert C.get_setting("default").describe() == {
            **common,
            **{"kfold": 10, "optim": "adam", "batch_size": 64, "tenacity": 5, "epoch_size": 4},
        }
        assert C.get_setting("prototyping").describe() == {
            **common,
            **{"kfold": 5, "optim": "rmsprop", "batch_size": 128, "tenacity": 3, "epoch_size": 2},
        }
        assert C.get_setting("default").l2_grid == tuple(10.0**t for t in range(-5, -1))  # SentEval's own expression
        assert C.get_setting("default").validation_split == 0.05 == C.get_setting("prototyping").validation_split

    def test_settings_are_frozen_so_an_override_never_leaks_into_the_shared_ones(self):
        import dataclasses

        from benchbench.evaluate.adapters import _classifier as C

        with pytest.raises(dataclasses.FrozenInstanceError):
            C.get_setting("default").kfold = 3
        custom = C.with_overrides("default", kfold=3)
        assert custom.kfold == 3 and C.get_setting("default").kfold == 10

    def test_optimizer_strings_get_torch_default_learning_rates(self):
        from benchbench.evaluate.adapters import _classifier as C

        p = [torch.nn.Parameter(torch.zeros(1))]
        assert {
            "adam": torch.optim.Adam(p).defaults["lr"],
            "rmsprop": torch.optim.RMSprop(p).defaults["lr"],
        } == C.OPTIM_LR
        assert C.OPTIM_LR == {"adam": 1e-3, "rmsprop": 1e-2}

    @pytest.mark.parametrize("n", [20, 59, 100])
    def test_validation_split_is_senteval_prepare_split(self, n):
        """``PyTorchClassifier.prepare_split`` after ``np.random.seed(1111)``: a permutation of the rows,
        the first int(0.05 n) are the dev rows (none below 20 rows), the rest the training rows in
        permutation order."""
        from benchbench.evaluate.adapters import _classifier as C

        rows = np.arange(n) * 3 + 7
        state = np.random.get_state()
        try:
            np.random.seed(1111)
            permutation = np.random.permutation(n)
        finally:
            np.random.set_state(state)
        cut = int(0.05 * n)
        st = C.validation_split_stream(rows, 1e-3, C.get_setting("default"))
        assert st.train.tolist() == rows[permutation[cut:]].tolist()
        assert st.dev.tolist() == rows[permutation[:cut]].tolist()
        assert (st.l2, st.split_from, len(st.dev)) == ((1e-3,), n, n // 20)
