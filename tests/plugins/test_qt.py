"""Quick-Thoughts mechanism tests (tiny sizes, CPU, a few seconds)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from benchbench_plugins import qt

from benchbench import TrainContext, load_encoder


def _ctx(tmp_path, name="run", seed=0) -> TrainContext:
    return TrainContext(model=None, seed=seed, output_dir=tmp_path / name, progress=False)


def test_context_targets_are_the_true_neighbours_within_each_window():
    t = qt.context_targets([4, 3], context=3)
    want = torch.zeros(7, 7)
    for i, j in [(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2), (4, 5), (5, 4), (5, 6), (6, 5)]:
        want[i, j] = 1
    assert torch.equal(t, want)  # no target across windows (3 -> 4), none on the diagonal
    t5 = qt.context_targets([5], context=5)
    assert t5[2].tolist() == [1, 1, 0, 1, 1] and t5[0].tolist() == [0, 1, 1, 0, 0]
    with pytest.raises(Exception, match="odd"):
        qt.context_targets([5], context=4)


class _Spy(torch.nn.Module):
    """A tower recording what it was asked to encode (texts in order)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(1))
        self.seen: list[str] = []

    def features(self, texts):
        self.seen = list(texts)
        return {"ids": torch.tensor([[int(s[1:])] for s in texts]), "lengths": torch.ones(len(texts), dtype=torch.long)}


def test_a_batch_is_one_window_of_contiguous_sentences_and_windows_tile_the_corpus():
    corpus = [f"s{i}" for i in range(95)]
    starts = qt.window_starts(len(corpus), 10)
    assert starts == list(range(0, 90, 10))  # windows tile the corpus: every sentence in exactly one window
    f = _Spy()
    obj = qt.QTObjective(f, _Spy(), corpus, window=10, context=3)
    batch = obj.collate([30], np.random.default_rng(0))
    assert f.seen == [f"s{i}" for i in range(30, 40)]  # the candidates: exactly the contiguous window
    assert torch.equal(batch["targets"], qt.context_targets([10], 3))


def test_loss_uses_all_batch_sentences_as_candidates_and_neighbours_as_targets():
    # u_i . v_j is large exactly for true neighbours -> loss near 0; for non-neighbours -> large
    n = 6
    t = qt.context_targets([n], 3)
    good = qt.qt_loss(torch.eye(n) * 10, (t @ torch.eye(n)) * 10 / 1, t.T)  # v_j = sum of its neighbours' u
    bad = qt.qt_loss(torch.eye(n) * 10, torch.roll(torch.eye(n), 3, 0) * 10, t)
    assert good < 1.0 < bad
    # the diagonal (s itself) is never a candidate: identical f and g would otherwise make it trivial
    same = qt.qt_loss(torch.eye(n) * 10, torch.eye(n) * 10, t)
    assert same == pytest.approx(np.log(n - 1), rel=1e-4)


def _topic_corpus(n: int, seed: int) -> list[str]:
    """Ordered text where neighbouring sentences share a word: sentence i = 'w{a_i} w{a_{i+1}} x{r}'."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 300, n + 1)
    return [f"w{a[i]} w{a[i + 1]} x{rng.integers(0, 50)}" for i in range(n)]


def _context_accuracy(enc: qt.QTEncoder, sents: list[str], window: int) -> float:
    """Held-out context prediction: for each sentence, is the top-scored other sentence of its
    window, by f(s)·g(c), a true neighbour?"""
    f, g = enc.pairs[0]
    hits = total = 0
    with torch.no_grad():
        for a in range(0, len(sents) - window + 1, window):
            feats = f.features(sents[a : a + window])
            s = f(**feats) @ g(**feats).T
            s.fill_diagonal_(float("-inf"))
            top = s.argmax(1)
            hits += int((top - torch.arange(window)).abs().eq(1).sum())
            total += window
    return hits / total


def test_shuffled_text_trains_to_chance_ordered_text_does_not(tmp_path):
    train, held = _topic_corpus(3000, 0), _topic_corpus(400, 1)
    shuffled = list(np.random.default_rng(2).permutation(train))
    cfg = qt.QTConfig(encoder="bow", emb_dim=16, vocab_size=1000, batch_size=20, steps=200, lr=1e-2)
    accs = {}
    for name, corpus in (("ordered", train), ("shuffled", shuffled)):
        enc = qt.QT(cfg).train(corpus, _ctx(tmp_path, name))
        accs[name] = _context_accuracy(enc, held, 20)
    chance = 2 / 19
    assert accs["ordered"] > 0.5, accs
    assert accs["shuffled"] < 2 * chance, accs


def test_f_and_g_are_distinct_parameters_and_the_test_vector_is_f_then_g(tmp_path):
    corpus = [f"the cat {i % 5} sat on mat {i % 3} ." for i in range(60)]
    enc = qt.QT(qt.QTConfig(encoder="gru", hidden=8, emb_dim=6, vocab_size=50, batch_size=10, steps=2)).train(
        corpus, _ctx(tmp_path)
    )
    f, g = enc.pairs[0]
    fp = {p.data_ptr() for p in f.parameters()}
    assert fp.isdisjoint({p.data_ptr() for p in g.parameters()})
    assert not torch.equal(f.rnn.weight_hh_l0, g.rnn.weight_hh_l0)  # different init, trained apart
    texts = corpus[:4]
    with torch.no_grad():
        feats = f.features(texts)
        want = torch.cat([f(**feats), g(**feats)], -1).numpy()
    got = enc.encode(texts)
    assert got.shape == (4, 16)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not np.allclose(got[:, :8], got[:, 8:])


def test_bigru_is_forward_final_state_then_backward_final_state():
    vocab = qt.Vocab(["a", "b", "c", "d"])
    tower = qt.RNNTower(qt.TowerSpec(kind="bigru", hidden=8, emb_dim=5), vocab)
    texts = ["a b c d", "c a"]
    feats = tower.features(texts)
    out = tower(**feats)
    assert out.shape == (2, 8)
    uni = torch.nn.GRU(5, 4, batch_first=True)
    with torch.no_grad():
        for k in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(uni, k).copy_(getattr(tower.rnn, k))
        for i, t in enumerate(texts):
            x = tower.emb(torch.tensor([vocab.ids(t, 50)]))
            fwd = uni(x)[1][0, 0]
            for k in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
                getattr(uni, k).copy_(getattr(tower.rnn, k + "_reverse"))
            bwd = uni(x.flip(1))[1][0, 0]
            for k in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
                getattr(uni, k).copy_(getattr(tower.rnn, k))
            torch.testing.assert_close(out[i], torch.cat([fwd, bwd]))  # padding does not leak in


def test_gru_init_xavier_and_gate_biases_one_and_embeddings_uniform():
    tower = qt.RNNTower(qt.TowerSpec(kind="gru", hidden=6, emb_dim=4), qt.Vocab([f"w{i}" for i in range(300)]))
    b = tower.rnn.bias_ih_l0.detach()
    assert torch.equal(b[:12], torch.ones(12)) and torch.equal(b[12:], torch.zeros(6))
    assert torch.equal(tower.rnn.bias_hh_l0.detach(), torch.zeros(18))
    bound = (6 / (4 + 6)) ** 0.5  # xavier-uniform of each 6x4 gate block
    assert tower.rnn.weight_ih_l0.abs().max() <= bound and tower.rnn.weight_ih_l0.abs().max() > 0.5 * bound
    e = tower.emb.weight[1:]
    assert e.abs().max() <= 0.1 and e.abs().max() > 0.09


def test_vocabulary_is_case_sensitive_and_sized():
    v = qt.Vocab.from_corpus(["The the THE cat", "the dog"], size=3)
    assert v.words[4:] == ["the", "The", "THE"]
    assert v.ids("cat", 10) == [1]


def test_save_load_round_trip_through_load_encoder(tmp_path):
    corpus = [f"Sentence {i} ." for i in range(40)]
    for name, cfg in (
        ("qt", qt.QTConfig(encoder="bigru", hidden=8, emb_dim=4, vocab_size=30, batch_size=10, steps=1)),
        ("combine-qt", qt.QTConfig(hidden=8, emb_dim=4, vocab_size=30, batch_size=10, steps=1)),
    ):
        cls = qt.QT if name == "qt" else qt.CombineQT
        enc = cls(cfg).train(corpus, _ctx(tmp_path, name))
        enc.save(tmp_path / name / "encoder")
        back = load_encoder(str(tmp_path / name / "encoder"))
        assert isinstance(back, qt.QTEncoder) and back.fingerprint == enc.fingerprint
        np.testing.assert_array_equal(back.encode(corpus[:5]), enc.encode(corpus[:5]))


def test_skip_thought_trains_and_its_vector_is_the_encoder(tmp_path):
    corpus = [f"word{i % 7} word{(i + 1) % 7} ." for i in range(50)]
    ctx = _ctx(tmp_path)
    enc = qt.SkipThought(qt.SkipThoughtConfig(hidden=8, emb_dim=4, vocab_size=30, batch_size=8, steps=3)).train(
        corpus, ctx
    )
    assert enc.pairs[0][1] is None and enc.encode(corpus[:3]).shape == (3, 8)
    assert ctx.accounting["flops"] > 0 and ctx.accounting["examples"] == 24


def test_skip_thought_decoder_reads_encoder_ids_and_predicts_output_vocabulary_ids():
    enc_vocab = qt.Vocab(["the", "cat", "sat"], lower=True)  # as GloVe's: uncased, its own order
    out_vocab = qt.Vocab(["sat", "The", "cat"])  # the corpus's words, case-sensitive
    f = qt.RNNTower(qt.TowerSpec(kind="gru", hidden=8, emb_dim=4), enc_vocab)
    obj = qt.SkipThoughtObjective(f, [], max_tokens=10, out_vocab=out_vocab)
    inp, tgt = obj._targets(["The cat sat", "cat dog"])
    assert inp.tolist() == [[2, 4, 5, 6], [2, 5, 1, 0]]  # BOS + encoder ids (dog: UNK), padded
    assert tgt.tolist() == [[5, 6, 4, 3], [6, 1, 3, 0]]  # output ids + EOS, padded
    assert obj.out.out_features == len(out_vocab) == 7
    same = qt.SkipThoughtObjective(f, [], max_tokens=2)  # default: the encoder's own vocabulary
    inp, tgt = same._targets(["The cat sat"])
    assert inp.tolist() == [[2, 4, 5]] and tgt.tolist() == [[4, 5, 3]] and same.out.out_features == 7


def test_accounting_states_flops_tokens_and_sentences(tmp_path):
    corpus = [f"a b c {i}" for i in range(40)]
    ctx = _ctx(tmp_path)
    qt.QT(qt.QTConfig(hidden=8, emb_dim=4, vocab_size=30, batch_size=10, steps=2)).train(corpus, ctx)
    a = ctx.accounting
    assert a["examples"] == 2 and a["steps"] == 2 and a["sentences"] == 20  # loop items are windows ...
    assert a["tokens"] == 2 * 10 * 4  # ... of 10 sentences of 4 tokens each
    assert a["flops"] > 2 * 3 * (2 * 3 * (4 * 8 + 8 * 8)) * a["tokens"] * 0.99


def test_neighbours_command_finds_the_sentence_itself_first(tmp_path, tmp_cache, capsys):
    from benchbench.cli.main import main

    corpus = [f"Line {i} talks about {w} ." for i, w in enumerate(["cats", "dogs", "ships", "rain", "tea"] * 8)]
    enc = qt.QT(qt.QTConfig(encoder="bow", emb_dim=8, vocab_size=100, batch_size=10, steps=1)).train(
        corpus, _ctx(tmp_path)
    )
    enc.save(tmp_path / "enc")
    f = tmp_path / "corpus.txt"
    f.write_text("\n".join(corpus) + "\n")
    assert (
        main(
            [
                "neighbours",
                "--model",
                str(tmp_path / "enc"),
                "--corpus",
                str(f),
                "--query",
                corpus[7],
                "-k",
                "3",
                "--batch-size",
                "7",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"query: {corpus[7]}" and len(out) == 4
    assert out[1].split("  ", 2)[2] == corpus[7] and out[1].strip().startswith("1.0000")


def test_table_columns_show_training_cost():
    from benchbench.report.leaderboard import summarise

    rec = {
        "method": "qt",
        "model": "-",
        "task": "mr",
        "config_hash": "x",
        "train": {"seconds": 12.0, "flops": 3e12},
        "splits": {"test": {"main_score": 70.0, "scores": {"acc": 70.0}, "main_metric": "acc"}},
    }
    headers, rows, _ = summarise([rec], ["mr"], columns=["train.seconds", "train.flops"])
    assert headers[-2:] == ["train.seconds", "train.flops"] and rows[0][-2:] == ["12", "3e+12"]


def test_transformer_towers_are_two_copies_and_round_trip(tmp_path):
    sents = [f"sentence {i} about topic {i % 7} ." for i in range(40)]
    ctx = TrainContext(model="tiny-bert", seed=0, output_dir=tmp_path / "r", progress=False)
    enc = qt.QT(qt.QTConfig(encoder="transformer", batch_size=10, steps=2, max_tokens=32)).train(sents, ctx)
    f, g = enc.pairs[0]
    assert isinstance(f, qt.TransformerTower) and f.enc is not g.enc
    assert {p.data_ptr() for p in f.parameters()}.isdisjoint({p.data_ptr() for p in g.parameters()})
    v = enc.encode(sents[:3])
    enc.save(tmp_path / "e")
    np.testing.assert_allclose(load_encoder(str(tmp_path / "e")).encode(sents[:3]), v, atol=1e-6)
    assert v.shape == (3, 64)
