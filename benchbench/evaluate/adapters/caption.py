"""Image-caption retrieval on COCO as SentEval runs it (Quick-Thoughts Table 3, Kiros et al. 2015's
setting): image vectors and sentence vectors are both FIXED; two linear maps project them into a
1000-d joint space (unit-normalised) and are trained with a margin ranking loss (margin 0.2) in
which each matching pair must beat 30 contrastive images and 30 contrastive captions drawn from
the rest of the epoch. Adam, minibatches of 128 captions, early stopping on the dev score (sum of
R@1/5/10 both ways, averaged over 5 dev folds; the 4th non-improving epoch stops; at most 20).
Test: 5 folds of 1,000 images x 5 captions; R@1/5/10 and median rank for image annotation
(image -> its best-ranked caption among 5,000) and image search (caption -> its image among 1,000),
averaged over folds.

Layouts (``params.layout``):
  ``senteval``  SentEval's ``{train,valid,test}.pkl``: dicts with ``features`` (one vector per
                image), ``image_to_caption_ids`` and ``captions`` (``cleaned_caption``); the first 5
                captions of each image are used, each with " ." appended, as SentEval does.
  ``npy``       ``{split}.npy`` (n_images, d) float features and ``{split}.txt``, one caption per
                line, ``captions_per_image`` (5) consecutive lines per image, in image order.
"""

from __future__ import annotations

import copy
import os
import pickle
import pickletools
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchbench.core.errors import ConfigError, DataError
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult
from benchbench.store.data import PARSE_ERRORS, read_lines

PARTS = {"train": "train", "dev": "valid", "test": "test"}  # our name -> SentEval's file stem
# what pickletools and pickle's loader raise on damaged bytes besides UnpicklingError (found by
# fuzzing: an unknown opcode, protocol or extension code, an unparsable FLOAT, a length beyond the file
# or sys.maxsize, a bad memo index)
_DAMAGED_PICKLE = (ValueError, OverflowError, IndexError, AttributeError, UnicodeDecodeError)


class _Bounded:
    """A binary file whose ``read(n)`` never asks for more than the file has left, so a damaged length
    costs no allocation beyond the file's size (``pickletools.genops`` reads through it)."""

    def __init__(self, f: Any):
        self.f, self.size = f, os.fstat(f.fileno()).st_size

    def tell(self) -> int:
        return self.f.tell()

    def read(self, n: int = -1) -> bytes:
        left = self.size - self.f.tell()
        return self.f.read(left if n is None or n < 0 else min(n, left))

    def readline(self) -> bytes:
        return self.f.readline()


def _check_pickle_sizes(f: Any) -> None:
    """Walk the pickle's opcodes without building anything, and refuse sizes the file cannot back.

    pickle's C loader allocates what a length field claims before it reads. It also grows its memo
    to whatever index a PUT names, zero-filling it. A damaged FRAME, BINBYTES8 or LONG_BINPUT could
    therefore ask for gigabytes, and the process would be killed instead of getting an error. Each
    size is checked against the bytes left in the file, and each memo index against the opcodes seen
    so far: a pickler numbers its memo from 0, one entry per opcode at most. Raises ValueError.

    The walk is pure Python, about 3 us per opcode: 0.8-1.0 s for a 5,000-image pickle in SentEval's
    layout (270,000 opcodes), against 0.23-0.27 s for the C loader itself (2-core CPU, quiet)."""
    src = _Bounded(f)
    for n, (op, arg, pos) in enumerate(pickletools.genops(src)):
        if op.name == "FRAME" and arg > src.size - pos - 9:
            raise ValueError(f"a frame of {arg} bytes at byte {pos}, beyond the file's end")
        if op.name in ("PUT", "BINPUT", "LONG_BINPUT") and int(arg) > n:
            raise ValueError(f"memo index {arg} at byte {pos}, after only {n} opcodes")


class _SafeUnpickler(pickle.Unpickler):
    """SentEval ships Python-2 pickles of dicts, lists and numpy arrays; refuse anything else
    (unpickling an arbitrary object runs code)."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("builtins", "set"),
        ("__builtin__", "set"),
        ("collections", "OrderedDict"),
        ("copy_reg", "_reconstructor"),
        ("copyreg", "_reconstructor"),
        ("__builtin__", "object"),
        ("builtins", "object"),
        ("_codecs", "encode"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a COCO pickle")


def load_senteval_pickle(path: Path, captions_per_image: int = 5) -> tuple[np.ndarray, list[str]]:
    """(image features repeated once per caption, captions) in SentEval's order."""
    try:
        with open(path, "rb") as f:
            _check_pickle_sizes(f)
            f.seek(0)
            data = _SafeUnpickler(f, encoding="latin1").load()
        feats, img2cap, caps = data["features"], data["image_to_caption_ids"], data["captions"]
    except (OSError, pickle.UnpicklingError, KeyError, EOFError, TypeError, *_DAMAGED_PICKLE) as e:
        raise DataError(
            f"{path}: not a SentEval COCO pickle (dict with features, image_to_caption_ids, captions): {e}"
        ) from e
    rows, texts = [], []
    i = None
    try:
        for i in range(len(feats)):
            ids = list(img2cap[i])
            if len(ids) < captions_per_image:
                raise DataError(f"{path}: image {i} has {len(ids)} captions, fewer than {captions_per_image}.")
            for cid in ids[:captions_per_image]:
                cap = caps[cid]["cleaned_caption"]
                if isinstance(cap, bytes):
                    cap = cap.decode("utf-8")
                texts.append(" ".join((cap + " .").split()))
                rows.append(i)
        i = None
        return np.asarray(feats, dtype=np.float32)[rows], texts
    except PARSE_ERRORS as e:  # a pickle has no lines: name the image whose entry is bad
        raise DataError(
            f"{path}: " + (f"image {i}: " if i is not None else "") + f"malformed SentEval COCO entry "
            f"({type(e).__name__}: {e})."
        ) from e


def load_npy(feat_path: Path, cap_path: Path, captions_per_image: int = 5) -> tuple[np.ndarray, list[str]]:
    try:
        feats = np.load(feat_path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise DataError(f"{feat_path}: not a .npy array of image features ({e}).") from e
    if feats.ndim != 2:
        raise DataError(f"{feat_path}: expected (n_images, d) features, got shape {feats.shape}.")
    caps = [" ".join(ln.split()) for ln in read_lines(cap_path)]
    if caps and not caps[-1]:
        caps.pop()
    if len(caps) != captions_per_image * len(feats):
        raise DataError(
            f"{cap_path}: {len(caps)} captions for {len(feats)} images in {feat_path}; expected "
            f"{captions_per_image} per image ({captions_per_image * len(feats)} lines)."
        )
    return np.repeat(feats.astype(np.float32), captions_per_image, axis=0), caps


def retrieval_metrics(img: np.ndarray, sent: np.ndarray, captions_per_image: int = 5) -> dict[str, float]:
    """SentEval's i2t/t2i on one fold. ``img``/``sent``: projected (unit) vectors, one row per caption
    (image rows repeated). Ranks are 0-based; R@K = % of queries with rank < K; medr = floor(median)+1."""
    k = captions_per_image
    ims = torch.as_tensor(img[::k], dtype=torch.float64)
    caps = torch.as_tensor(sent, dtype=torch.float64)
    scores = ims @ caps.T  # (images, captions)
    n = len(ims)
    own = scores.view(n, n, k)[torch.arange(n), torch.arange(n)]  # (n, k) scores of each image's captions
    # image annotation: rank of the best of its k captions among all captions
    r_i2t = (scores > own.max(1).values[:, None]).sum(1).numpy()
    # image search: rank of each caption's image among all images
    cap_img = torch.arange(len(caps)) // k
    r_t2i = (scores.T[torch.arange(len(caps)), cap_img][:, None] < scores.T).sum(1).numpy()

    def summary(r: np.ndarray) -> tuple[float, float, float, float]:
        return (
            100.0 * (r < 1).mean(),
            100.0 * (r < 5).mean(),
            100.0 * (r < 10).mean(),
            float(np.floor(np.median(r)) + 1),
        )

    a, s = summary(r_i2t), summary(r_t2i)
    return {
        "i2t_r1": a[0],
        "i2t_r5": a[1],
        "i2t_r10": a[2],
        "i2t_medr": a[3],
        "t2i_r1": s[0],
        "t2i_r5": s[1],
        "t2i_r10": s[2],
        "t2i_medr": s[3],
        "recall_mean": (a[0] + a[1] + a[2] + s[0] + s[1] + s[2]) / 6,
    }


def fold_metrics(
    img: np.ndarray, sent: np.ndarray, fold_images: int = 1000, folds: int = 5, captions_per_image: int = 5
) -> dict[str, float]:
    """Mean of ``retrieval_metrics`` over consecutive folds of ``fold_images`` images."""
    rows = fold_images * captions_per_image
    if len(img) < rows * folds:
        raise DataError(
            f"caption retrieval needs {folds} folds of {fold_images} images x {captions_per_image} captions "
            f"({rows * folds} rows); the split has {len(img)}."
        )
    per = [
        retrieval_metrics(img[f * rows : (f + 1) * rows], sent[f * rows : (f + 1) * rows], captions_per_image)
        for f in range(folds)
    ]
    return {m: float(np.mean([p[m] for p in per])) for m in per[0]}


class JointProjection(torch.nn.Module):
    """Two linear maps into a shared space, outputs L2-normalised (SentEval's COCOProjNet)."""

    def __init__(self, imgdim: int, sentdim: int, projdim: int):
        super().__init__()
        self.imgproj = torch.nn.Linear(imgdim, projdim)
        self.sentproj = torch.nn.Linear(sentdim, projdim)

    @staticmethod
    def _unit(x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt((x * x).sum(1, keepdim=True))

    def image(self, x: torch.Tensor) -> torch.Tensor:
        return self._unit(self.imgproj(x))

    def sentence(self, x: torch.Tensor) -> torch.Tensor:
        return self._unit(self.sentproj(x))


def margin_loss(
    img: torch.Tensor, sent: torch.Tensor, img_c: torch.Tensor, sent_c: torch.Tensor, margin: float
) -> torch.Tensor:
    """Summed hinge: each (image, caption) pair must beat every contrastive caption (for the image)
    and every contrastive image (for the caption) by ``margin``. ``*_c``: (B, ncontrast, dim)."""
    anchor = (img * sent).sum(1, keepdim=True)  # (B, 1)
    img_vs_c = (img.unsqueeze(1) * sent_c).sum(-1)  # (B, nc)
    sent_vs_c = (sent.unsqueeze(1) * img_c).sum(-1)
    return torch.clamp(margin - anchor + img_vs_c, min=0).sum() + torch.clamp(margin - anchor + sent_vs_c, min=0).sum()


def train_projection(
    train: tuple[np.ndarray, np.ndarray],
    dev: tuple[np.ndarray, np.ndarray],
    *,
    projdim: int = 1000,
    margin: float = 0.2,
    batch_size: int = 128,
    ncontrast: int = 30,
    max_epoch: int = 20,
    tenacity: int = 3,
    seed: int = 1111,
    fold_images: int = 1000,
    folds: int = 5,
    captions_per_image: int = 5,
    device: str | None = None,
) -> tuple[JointProjection, float, int]:
    """SentEval's ImageSentenceRankingPytorch training. ``train``/``dev``: (image rows, sentence rows).
    Returns (best model, its dev score, epochs run)."""
    dev_ = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rs = np.random.RandomState(seed)
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    model = JointProjection(train[0].shape[1], train[1].shape[1], projdim).to(dev_)
    torch.random.set_rng_state(state)
    opt = torch.optim.Adam(model.parameters())
    Xi = torch.as_tensor(train[0], device=dev_)
    Xs = torch.as_tensor(train[1], device=dev_)
    n = len(Xi)
    best, best_model, count, nepoch = -1.0, None, 0, 0
    while nepoch <= max_epoch:
        model.train()
        perm = rs.permutation(n)
        for i in range(0, n, batch_size):
            idx = perm[i : i + batch_size]
            b = len(idx)
            # np.random.choice(permutation[:i] + permutation[i+b:], size): a uniform index into the
            # epoch order with this batch cut out (same draws, without building the list)
            rest = n - b
            if rest <= 0:
                raise DataError(
                    f"caption retrieval: {n} training captions cannot fill a batch plus contrastive samples."
                )
            ci = rs.randint(0, rest, size=ncontrast * b)
            ci = perm[np.where(ci < i, ci, ci + b)]
            cs = rs.randint(0, rest, size=ncontrast * b)
            cs = perm[np.where(cs < i, cs, cs + b)]
            it = torch.as_tensor(idx, device=dev_)
            img = model.image(Xi[it])
            sent = model.sentence(Xs[it])
            img_c = model.image(Xi[torch.as_tensor(ci, device=dev_)]).view(b, ncontrast, -1)
            sent_c = model.sentence(Xs[torch.as_tensor(cs, device=dev_)]).view(b, ncontrast, -1)
            loss = margin_loss(img, sent, img_c, sent_c, margin)
            opt.zero_grad()
            loss.backward()
            opt.step()
        nepoch += 1
        m = _evaluate(model, dev, dev_, fold_images, folds, captions_per_image)
        score = 6 * m["recall_mean"]  # SentEval's dev score: the sum of the six recalls
        if score > best:
            best, best_model = score, copy.deepcopy(model)
        else:
            if count >= tenacity:
                break
            count += 1
    assert best_model is not None
    return best_model, best, nepoch


@torch.no_grad()
def _evaluate(
    model: JointProjection,
    data: tuple[np.ndarray, np.ndarray],
    device: torch.device,
    fold_images: int,
    folds: int,
    captions_per_image: int,
) -> dict[str, float]:
    model.eval()
    img = model.image(torch.as_tensor(data[0], device=device)).cpu().numpy()
    sent = model.sentence(torch.as_tensor(data[1], device=device)).cpu().numpy()
    return fold_metrics(img, sent, fold_images, folds, captions_per_image)


class CaptionRetrievalAdapter(TaskAdapter):
    """params: ``layout`` (senteval | npy), ``dir``, ``projdim``, ``margin``, ``ncontrast``, ``batch_size``,
    ``max_epoch``, ``fold_images``, ``folds``, ``captions_per_image``, ``seed``, ``device``."""

    kind = "caption-retrieval"

    def _paths(self, part: str) -> list[str]:
        d, layout = self.param("dir", "coco"), self.param("layout", "senteval")
        if layout == "senteval":
            return [f"{d}/{PARTS[part]}.pkl"]
        if layout == "npy":
            return [f"{d}/{part}.npy", f"{d}/{part}.txt"]
        raise ConfigError(
            f"Task {self.name!r} (spec {self.spec.source}): params.layout must be 'senteval' or 'npy', got {layout!r}."
        )

    def files_for(self, split: str) -> list[str]:
        return [p for part in ("train", "dev", split) for p in self._paths(part)]

    def load(self, part: str) -> tuple[np.ndarray, list[str]]:
        k = int(self.param("captions_per_image", 5))
        paths = [self.file(p) for p in self._paths(part)]
        if self.param("layout", "senteval") == "senteval":
            return load_senteval_pickle(paths[0], k)
        return load_npy(paths[0], paths[1], k)

    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        self.check_split(split)
        parts = {p: self.load(p) for p in dict.fromkeys(("train", "dev", split))}
        texts = [t for _, caps in parts.values() for t in caps]
        vecs = model.embed(texts, desc=self.name)
        data, pos = {}, 0
        for p, (img, caps) in parts.items():
            data[p] = (img, np.ascontiguousarray(vecs[pos : pos + len(caps)], dtype=np.float32))
            pos += len(caps)
        cfg = {
            k: self.param(k, v)
            for k, v in {
                "projdim": 1000,
                "margin": 0.2,
                "batch_size": 128,
                "ncontrast": 30,
                "max_epoch": 20,
                "tenacity": 3,
                "seed": 1111,
                "fold_images": 1000,
                "folds": 5,
                "captions_per_image": 5,
            }.items()
        }
        t0 = time.perf_counter()
        net, dev_score, epochs = train_projection(data["train"], data["dev"], device=self.param("device"), **cfg)
        scores = _evaluate(
            net, data[split], next(net.parameters()).device, cfg["fold_images"], cfg["folds"], cfg["captions_per_image"]
        )
        return TaskResult(
            main_metric=self.spec.main_metric,
            scores=scores,
            details={
                "protocol": "SentEval ImageSentenceRankingPytorch",
                "config": cfg,
                "epochs": epochs,
                "dev_score": dev_score,
                "classifier_seconds": round(time.perf_counter() - t0, 2),
                "layout": self.param("layout", "senteval"),
                "n_captions": {p: len(c) for p, (_, c) in parts.items()},
            },
        )

    def own_sentences(self) -> list[str]:
        return list(dict.fromkeys(self.load("train")[1]))
