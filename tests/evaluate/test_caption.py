"""Caption retrieval: the rank metrics on hand-built embeddings, a known projection that gives
R@1 = 100, training from scratch on synthetic features, and both data layouts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import FIXTURES

from benchbench.core.errors import DataError
from benchbench.core.tasks import TaskSpec
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters.caption import (
    CaptionRetrievalAdapter,
    JointProjection,
    fold_metrics,
    load_npy,
    load_senteval_pickle,
    margin_loss,
    retrieval_metrics,
    train_projection,
)
from benchbench.store.data import DataStore


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_metrics_perfect_and_hand_computed():
    ims = np.eye(8)[:4]  # orthonormal images: different images score 0
    img = np.repeat(ims, 5, axis=0)
    m = retrieval_metrics(img, img.copy())  # every caption equals its image: all ranks 0
    assert m["i2t_r1"] == m["t2i_r1"] == 100.0 and m["i2t_medr"] == m["t2i_medr"] == 1.0
    # swap the captions of images 0 and 1. Annotation: images 0 and 1 see the other's 5 captions first
    # (ranks 5, 5, 0, 0); search: each of those 10 captions finds the other image first (rank 1)
    sent = img.copy()
    sent[0:5], sent[5:10] = img[5:10], img[0:5]
    m = retrieval_metrics(img, sent)
    assert (m["i2t_r1"], m["i2t_r5"], m["i2t_r10"], m["i2t_medr"]) == (50.0, 50.0, 100.0, 3.0)
    assert (m["t2i_r1"], m["t2i_r5"], m["t2i_medr"]) == (50.0, 100.0, 1.0)
    assert m["recall_mean"] == pytest.approx((50 + 50 + 100 + 50 + 100 + 100) / 6)
    with pytest.raises(DataError, match="needs 5 folds"):
        fold_metrics(img, img, fold_images=1000)


def _synthetic(n_img, rng, A, noise=0.05):
    ims = rng.randn(n_img, 6).astype(np.float32)
    img_rows = np.repeat(ims, 5, axis=0)
    sent = img_rows @ A + noise * rng.randn(len(img_rows), A.shape[1]).astype(np.float32)
    return img_rows, sent.astype(np.float32)


def test_known_projection_gives_r1_100():
    rng = np.random.RandomState(1)
    A = rng.randn(6, 6).astype(np.float32)
    img, sent = _synthetic(8, rng, A)
    net = JointProjection(6, 6, 6)
    with torch.no_grad():  # images as they are; captions mapped back through A^-1: the two spaces coincide
        net.imgproj.weight.copy_(torch.eye(6))
        net.imgproj.bias.zero_()
        net.sentproj.weight.copy_(torch.as_tensor(np.linalg.inv(A).T))
        net.sentproj.bias.zero_()
        pi = net.image(torch.as_tensor(img)).numpy()
        ps = net.sentence(torch.as_tensor(sent)).numpy()
    m = fold_metrics(pi, ps, fold_images=4, folds=2)
    assert m["i2t_r1"] == 100.0 and m["t2i_r1"] == 100.0 and m["i2t_medr"] == 1.0


def test_margin_loss_hand_computed():
    img = torch.tensor([[1.0, 0.0]])
    sent = torch.tensor([[1.0, 0.0]])
    sent_c = torch.tensor([[[0.0, 1.0], [0.95, 0.3122499]]])  # cos 0 and 0.95 with the image
    img_c = torch.tensor([[[1.0, 0.0], [-1.0, 0.0]]])  # cos 1 and -1 with the caption
    # caption side: max(0, .2 - 1 + 0) + max(0, .2 - 1 + .95) = 0.15; image side: max(0, .2 - 1 + 1) = 0.2
    assert margin_loss(img, sent, img_c, sent_c, 0.2).item() == pytest.approx(0.35, abs=1e-5)


def test_training_from_scratch_learns_the_map():
    rng = np.random.RandomState(2)
    A = rng.randn(6, 5).astype(np.float32)
    train, dev, test = (_synthetic(n, rng, A) for n in (200, 8, 8))
    net, dev_score, epochs = train_projection(
        train, dev, projdim=32, batch_size=64, ncontrast=10, max_epoch=30, fold_images=4, folds=2, device="cpu"
    )
    with torch.no_grad():
        m = fold_metrics(
            net.image(torch.as_tensor(test[0])).numpy(), net.sentence(torch.as_tensor(test[1])).numpy(), 4, 2
        )
    # chance: R@1 = 25 with 4 images a fold; the learnt maps must be close to the true one
    assert m["t2i_r1"] >= 75 and m["i2t_r1"] >= 75 and m["recall_mean"] >= 90
    assert dev_score == 600.0 and 5 <= epochs <= 31  # perfect dev (6 recalls x 100), then 4 epochs without gain


def test_loaders_both_layouts(tmp_path):
    img, caps = load_senteval_pickle(FIXTURES / "coco/senteval/valid.pkl")
    assert len(caps) == 10 and img.shape == (10, 3)  # first 5 captions per image; the 6th is ignored
    assert caps[0] == "a valid cat number 0 ." and caps[5] == "a valid cat number 5 ."
    np.testing.assert_array_equal(img[0], img[4])
    img, caps = load_npy(FIXTURES / "coco/test.npy", FIXTURES / "coco/test.txt")
    assert img.shape == (40, 6) and caps[6] == "te1 picture caption 1"
    (tmp_path / "x.txt").write_text("one\ntwo\n")
    with pytest.raises(DataError, match="expected 5 per image"):
        load_npy(FIXTURES / "coco/test.npy", tmp_path / "x.txt")
    import pickle

    (tmp_path / "evil.pkl").write_bytes(pickle.dumps({"features": [], "x": print}))
    with pytest.raises(DataError, match="refusing to load builtins.print"):
        load_senteval_pickle(tmp_path / "evil.pkl")


class ImageEchoEncoder:
    """Caption 'teK picture caption j' -> the features of image K of its split (+ jitter), so the
    right projection exists."""

    fingerprint = "coco-echo-v1"

    def __init__(self):
        self.feats = {p: np.load(FIXTURES / f"coco/{p}.npy") for p in ("train", "dev", "test")}

    def encode(self, texts):
        prefix = {"tr": "train", "dv": "dev", "te": "test"}
        out = []
        for t in texts:
            head = t.split()[0]
            f = self.feats[prefix[head[:2]]][int(head[2:])]
            out.append(f[::-1] + 0.01 * int(t.split()[-1]))
        return np.asarray(out, dtype=np.float32)


def test_adapter_end_to_end_npy_layout():
    spec = TaskSpec(
        name="coco-mini",
        kind="caption-retrieval",
        main_metric="recall_mean",
        params={
            "layout": "npy",
            "dir": "coco",
            "projdim": 32,
            "ncontrast": 10,
            "batch_size": 64,
            "max_epoch": 30,
            "fold_images": 4,
            "folds": 2,
            "device": "cpu",
        },
    )
    res = CaptionRetrievalAdapter(spec, DataStore(FIXTURES, allow_download=False)).evaluate(
        Embedder(ImageEchoEncoder()), "test"
    )
    assert res.scores["i2t_r1"] >= 75 and res.scores["t2i_r1"] >= 75 and res.main_score >= 85  # chance R@1: 25
    assert res.details["n_captions"] == {"train": 500, "dev": 40, "test": 40}
