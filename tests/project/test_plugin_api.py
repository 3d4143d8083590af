"""The plugin author's helpers in ``benchbench``'s public API: the fingerprint follows the settings
an encoder is handed back with, and the one linear decay every SimCSE-family method schedules with."""

from __future__ import annotations

import torch

from benchbench import linear_decay, tiny_bert, trainer_defaults


def test_the_fingerprint_follows_max_seq_length_without_a_refresh():
    enc = tiny_bert(16, 1, 2, 32, max_seq_length=32)
    at_32 = enc.fingerprint  # memoised here
    enc.max_seq_length = 8  # a method's training length...
    assert enc.fingerprint != at_32
    enc.max_seq_length = 32  # ...handed back at the start's: the fingerprint is the start's again
    assert enc.fingerprint == at_32
    enc.pooling = "mean"  # tiny_bert pools [CLS]
    assert enc.fingerprint != at_32


def test_linear_decay_is_one_minus_step_over_steps_to_the_last_bit():
    for steps in (1, 3, 7, 250):
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        sched = linear_decay(opt, steps)
        got = []
        for _ in range(steps + 2):
            got.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        assert got == [max(0.0, 1 - s / steps) for s in range(steps + 2)]  # exact: stored results depend on it
    # transformers' (steps - s) / steps differs in the last bit here: the reason the helper exists
    assert 1 - 1 / 3 != (3 - 1) / 3


def test_trainer_defaults_is_adamw_without_decay_on_trainable_parameters_and_the_linear_decay():
    """The recipe eight methods share: AdamW, weight decay 0, frozen parameters left out, the lr decayed
    by ``linear_decay`` over ``steps`` (a change here moves every one of their stored results)."""
    from helpers import lrs_over

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    model[0].weight.requires_grad_(False)
    kw = trainer_defaults(2e-3, 4)
    assert set(kw) == {"make_optimizer", "make_scheduler"}
    opt = kw["make_optimizer"](model)
    (group,) = opt.param_groups
    assert isinstance(opt, torch.optim.AdamW) and group["lr"] == 2e-3 and group["weight_decay"] == 0.0
    assert {id(p) for p in group["params"]} == {id(p) for p in model.parameters() if p.requires_grad}
    assert len(group["params"]) == 3  # the frozen weight is not one of them
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    assert lrs_over(opt, kw["make_scheduler"](opt), 5) == [2e-3 * max(0.0, 1 - s / 4) for s in range(5)]


def test_a_training_only_max_length_cuts_in_training_mode_only(tmp_path):
    from benchbench import TrainContext

    ctx = TrainContext(model="tiny-bert:16:1:2:32", seed=1, output_dir=tmp_path, progress=False, device="cpu")
    start = ctx.load_encoder()
    enc = ctx.load_encoder(train_max_seq_length=8)
    long = [" ".join(["word"] * 40)]
    enc.train()
    assert enc.seq_length == 8 and enc.tokenize(long)["input_ids"].shape[1] == 8
    enc.eval()
    assert enc.tokenize(long)["input_ids"].shape[1] == start.tokenize(long)["input_ids"].shape[1] > 8
    enc.train()  # encode() evaluates at the start's length even while the encoder is in training mode
    assert enc.max_seq_length == start.max_seq_length and enc.fingerprint == start.fingerprint
    assert (enc.encode(long) == start.encode(long)).all() and enc.training
    enc.save(tmp_path / "saved")
    assert (
        '"max_seq_length": %d' % start.max_seq_length in (tmp_path / "saved" / "sentence_bert_config.json").read_text()
    )
