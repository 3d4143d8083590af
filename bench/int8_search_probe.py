"""An exact int8 two-stage top-k search, measured against benchbench's faiss search on CQADupStack.

This is a probe for issue 27's "CQADupStack >= 5x useb". ``leaderboards/speed/cqadupstack_vs_useb.md``
showed that an exact fp32 search cannot reach it on this CPU. That document also recorded a lead:
torch._int_mm computes int8 products at about 4x the fp32 rate.

``two_stage_topk`` below follows that lead. It is exact and returns faiss's own float32 scores:
1. an int8 product with a proven error bound (Cauchy-Schwarz on each side's quantisation error);
2. a faiss float32 rescore of every document whose int8 score plus the bound reaches a lower bound
   on the query's k-th score.

It was not adopted: on this 2-core CPU it ran at parity with faiss's fp32 BLAS search. The time the
int8 product saves goes to work the fp32 search does not have:
- the quantisation;
- the segment maxima;
- the candidate gather;
- the rescoring's random reads of 255-480 candidate rows per query from DRAM.

The numbers are in the CQADupStack document. The code stays here so that the measurement can be
rerun (on another CPU, or with AMX, the balance may differ).

Every forum of the offline CQADupStack is searched with random bag-of-words vectors (d = 384; see
``bench/useb_fidelity.py --vectors bow``). Both searches run alternately, ``--repeats`` times, and the
best of each is kept. Each two-stage result is checked against a float64 brute force: every returned
row must score within 1e-6 of the query's true top k, and no score may differ from faiss's by more
than a float32 rounding.

    BENCHBENCH_DATA=/work/shared/data python bench/int8_search_probe.py [--block 16384] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


# The exact search (``search_topk``) scores in two stages.
#
# 1. An int8 matrix product (torch._int_mm: exact int32 sums, 3-5x the fp32 rate of this kind of
#    CPU). The int8 vectors differ from the float vectors by an error whose norm is known per vector,
#    so each int8 score lies within a proven bound of the true score.
# 2. A float32 rescore of only the documents that could still be in a query's top k: those whose int8
#    score plus the bound reaches a lower bound on the query's k-th best score.
#
# faiss has no such search (its scalar quantiser scores without BLAS and returns approximate scores),
# so stage 1 is built here from torch's int8 product. faiss does the rest: the rescoring is
# faiss.fvec_inner_products_by_idx (its own inner-product kernel, per (query, document) pair, the
# kernel of its non-BLAS search), and the merge across blocks is faiss's ResultHeap.
#
# Sizes, measured on this 2-core CPU (32 MB L3) at d = 384: _int_mm runs at 600-750 GOP/s into
# (1024 x 2048) int32 tiles written in place, and at 260 GOP/s into one (512 x 16384) result.
_QUERY_TILE = 1024  # queries per product
_DOC_TILE = 2048  # documents per product: one (1024 x 2048) int32 tile is 8 MB
# _SEGMENT: documents per segment (a power of two dividing _DOC_TILE). The k-th largest segment
# maximum bounds the k-th score from below, because k segment maxima are k distinct documents.
# Candidates are then found by one comparison of the whole int32 tile with the threshold (measured
# faster here than gathering the flagged segments: 1.54 s against 1.88-1.93 s for all forums).
_SEGMENT = 32
# _MAX_INT8_DIM: dimensions for which 128 * 128 * d cannot overflow an int32 sum.
_MAX_INT8_DIM = (2**31 - 1) // (128 * 128)
_U32 = 2.0**-24  # float32's unit roundoff


def _quantise(x, per_row: bool, work=None, codes=None):
    """Symmetric int8 codes of ``x`` (a float32 torch matrix) and what the bound needs.

    The scale is per row, or one scale for the whole matrix. Scales are float32 numbers, so the
    product of two scales is exact in float64. ``work`` (float32, x's shape) and ``codes`` (int8,
    x's shape) are reused buffers: on a VM, touching fresh pages costs more than the arithmetic.

    Returns (codes, scales, error norms, norms of the dequantised rows, row norms), the last four as
    float64 tensors. The error norm is an upper bound on |x - scale * codes| for the codes actually
    kept. It is computed in float32 and then widened by more than that computation's rounding can
    reach: float32 norms err by at most d u / (1 - d u) of themselves (2.3e-5 at d = 384), so they
    are widened by 1e-3, and the error norm gets 1e-6 of the row's norm on top (float32's unit
    roundoff, 6e-8, of the dequantised row)."""
    import torch

    if per_row:
        amax = x.abs().amax(dim=1)
    else:
        lo, hi = torch.aminmax(x)
        amax = torch.maximum(-lo, hi).expand(len(x))
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    work = torch.empty_like(x) if work is None else work
    codes = torch.empty(x.shape, dtype=torch.int8) if codes is None else codes
    torch.div(x, scale[:, None], out=work)
    codes.copy_(work.round_().clamp_(-127, 127))
    work.mul_(scale[:, None])
    widen = 1 + 1e-3
    deq_norm = torch.linalg.vector_norm(work, dim=1).double() * widen
    norms = torch.linalg.vector_norm(x, dim=1).double() * widen
    err = torch.linalg.vector_norm(work.sub_(x), dim=1).double() * widen + 1e-6 * norms
    return codes, scale.double(), err, deq_norm, norms


def two_stage_topk(
    queries: np.ndarray, corpus_blocks, k: int, pairs: list[int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k inner products of ``queries`` against a corpus given as successive blocks of rows.

    Returns (scores, corpus row indices). Rows are sorted best first, with k' = min(k, corpus size)
    columns.

    - **Scores.** Each score is faiss's float32 inner product of the two vectors (its kernel per
      pair). It depends on the two vectors alone, wherever a row sits, so equal vectors tie.
    - **Exact.** No document that scores above a returned one is missed.
    - **Equal scores.** Within a tie, the later row comes first (faiss's heap order). Where a tie group
      is cut at k, the rows that stay follow the heap's history.
    - **Memory.** The full queries x corpus score matrix never exists. What is held is one block,
      one query tile's int32 scores against it, and the (queries x k) heap.

    Each block is searched in two stages (see ``_QUERY_TILE``): an int8 product with a proven error
    bound, then a float32 rescore of every document whose int8 score plus the bound reaches a lower
    bound on the query's k-th score. That lower bound is the larger of two values:
    - the block's k-th largest segment maximum, less the bound;
    - the heap's k-th score from earlier blocks.

    A block that is not finite, or has too many dimensions for an exact int32 sum, has every pair
    rescored. The scores are the same."""
    import faiss

    q = np.ascontiguousarray(queries, dtype=np.float32)
    heap = faiss.ResultHeap(len(q), k, keep_max=True)
    search = _TwoStage(q, k, heap) if len(q) else None
    rescored = 0
    offset = 0
    for block in corpus_blocks:
        block = np.ascontiguousarray(block, dtype=np.float32)
        if len(block) and search is not None:
            rescored += search.add(block, offset)
        offset += len(block)
    heap.finalize()
    if pairs is not None:
        pairs.append(rescored)
    kk = min(k, offset)
    return heap.D[:, :kk].copy(), heap.I[:, :kk].copy()


class _TwoStage:
    """The state of one ``search_topk``: the quantised queries, the heap and reused buffers."""

    def __init__(self, q: np.ndarray, k: int, heap: Any):
        import torch

        self.q, self.k, self.heap = q, k, heap
        self.int8 = q.ndim == 2 and q.shape[1] <= _MAX_INT8_DIM and bool(np.isfinite(q).all())
        if self.int8:
            self.codes, self.scale, self.err, self.deq_norm, self.norm = _quantise(torch.from_numpy(q), per_row=True)
        self._buffers: dict[str, Any] = {}

    def _buffer(self, name: str, shape: tuple[int, ...], dtype: Any):
        """A reused buffer of at least ``shape``'s size, viewed as ``shape``."""
        import torch

        size = int(np.prod(shape))
        buf = self._buffers.get(name)
        if buf is None or buf.dtype != dtype or buf.numel() < size:
            buf = self._buffers[name] = torch.empty(size, dtype=dtype)
        return buf[:size].view(shape)

    def _rescore(self, s: int, e: int, block: np.ndarray, ids: np.ndarray, offset: int) -> None:
        """faiss's float32 inner products of queries s..e with their candidate rows (``ids``, -1 =
        none: scored -inf, which never enters the heap), added to the heap."""
        import faiss

        ip = np.empty(ids.shape, dtype=np.float32)
        qs = np.ascontiguousarray(self.q[s:e])
        faiss.fvec_inner_products_by_idx(
            faiss.swig_ptr(ip), faiss.swig_ptr(qs), faiss.swig_ptr(block), faiss.swig_ptr(ids),
            block.shape[1], e - s, ids.shape[1],
        )  # fmt: skip
        self.heap.add_result_subset(np.arange(s, e, dtype=np.int64), ip, np.where(ids >= 0, ids + offset, -1))

    def add(self, block: np.ndarray, offset: int) -> int:
        """Search one corpus block (rows offset.. of the corpus), merge it into the heap, return the
        number of (query, document) pairs rescored."""
        import torch

        nq, (n, dim) = len(self.q), block.shape
        if not (self.int8 and np.isfinite(block).all()):  # every pair rescored, tile by tile
            # (a non-finite block: the int8 bound would be meaningless)
            tile = max(1, (_QUERY_TILE * _DOC_TILE) // n)
            for s in range(0, nq, tile):
                e = min(nq, s + tile)
                self._rescore(s, e, block, np.broadcast_to(np.arange(n, dtype=np.int64), (e - s, n)).copy(), offset)
            return nq * n
        k = self.k
        # segments of a power of two rows (at least 4k of them where the block allows), in tiles of
        # whole segments; the rows are padded to whole tiles with zero codes
        seg = 1 << max(0, min(_SEGMENT.bit_length() - 1, (n // (4 * k)).bit_length() - 1))
        dt = min(_DOC_TILE, -(-n // seg) * seg)
        n_pad = -(-n // dt) * dt
        n_sub, nsg = n_pad // dt, dt // seg
        x = torch.from_numpy(block)
        d_codes = self._buffer("codes", (n_pad, dim), torch.int8)
        d_codes[n:] = 0
        _, d_scale, d_err, _, d_norms = _quantise(
            x, per_row=False, work=self._buffer("work", (n, dim), torch.float32), codes=d_codes[:n]
        )
        scale, d_norm, d_err_max = float(d_scale[0]), float(d_norms.max()), float(d_err.max())
        lowest = torch.iinfo(torch.int32).min
        # The bound, for every document of the block (Cauchy-Schwarz):
        #     |true - int8 score| <= |(q - q~).d| + |q~.(d - d~)| <= e_q |d| + |q~| e_d.
        # The slack covers the rescoring's float32 rounding, twice (the k-th score's and the
        # document's): a float32 sum of d products errs by at most gamma_d = d u / (1 - d u) of
        # sum |q_i d_i|, which is at most |q| |d|.
        bound = self.err * d_norm + self.deq_norm * d_err_max
        gamma = dim * _U32 / (1 - dim * _U32)
        slack = 2 * gamma * self.norm * d_norm * (1 + 1e-6) + 1e-30
        qt = min(nq, max(1, (_QUERY_TILE * _DOC_TILE * 8) // n_pad), _QUERY_TILE)
        scores = self._buffer("scores", (n_sub, qt, dt), torch.int32)
        segmax = self._buffer("segmax", (n_sub, qt, nsg), torch.int32)
        done = 0
        for s in range(0, nq, qt):
            e = min(nq, s + qt)
            m = e - s
            for j in range(n_sub):  # each tile written in place, its segment maxima taken while in cache
                out = scores[j, :m]
                torch._int_mm(self.codes[s:e], d_codes[j * dt : (j + 1) * dt].t(), out=out)
                if (j + 1) * dt > n:
                    out[:, n - j * dt :] = lowest  # padded rows: never a maximum, never a candidate
                torch.amax(out.view(m, nsg, seg), dim=2, out=segmax[j, :m])
            unit = self.scale[s:e] * scale  # one int8 unit of score, per query (exact: two float32 scales)
            by_query = segmax[:, :m].permute(1, 0, 2)  # (query, tile, segment)
            # A lower bound on the k-th best score of the block, and of everything searched so far
            # (the heap holds rescored scores once it is full). A padded segment's maximum is the
            # lowest int32, so it can only weaken the bound.
            floor = torch.full((m,), -torch.inf, dtype=torch.float64)
            if n_sub * nsg >= k:
                kth = torch.topk(by_query.reshape(m, -1), k, dim=1, sorted=False).values.amin(dim=1)
                floor = torch.where(kth > lowest, kth.double() * unit - bound[s:e], floor)
            top = torch.from_numpy(self.heap.D[s:e, 0]).double()
            floor = torch.where(torch.from_numpy(self.heap.I[s:e, 0] >= 0), torch.maximum(floor, top), floor)
            # A candidate is any document with int8 score + bound >= floor - slack. The threshold
            # never drops below lowest + 1, so a padded row is never a candidate. Candidates come out
            # by query, then by row: the heap sees each query's rows in order.
            need = (floor - slack[s:e] - bound[s:e]) / unit
            thr = torch.floor(torch.nan_to_num(need, nan=-torch.inf).clamp(lowest + 1, 2**31 - 1)).to(torch.int32)
            r, j, c = torch.nonzero(scores[:, :m].permute(1, 0, 2) >= thr[:, None, None], as_tuple=True)
            if len(r) == 0:
                continue
            cols = j * dt + c
            counts = torch.bincount(r, minlength=m)
            rows = torch.repeat_interleave(torch.arange(m), counts)
            ids = torch.full((m, int(counts.max())), -1, dtype=torch.int64)
            ids[rows, torch.arange(len(rows)) - (torch.cumsum(counts, 0) - counts)[rows]] = cols
            self._rescore(s, e, block, ids.numpy(), offset)
            done += len(cols)
        return done


def capture_forums(root: Path) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(forum, query vectors, distinct corpus vectors) of every CQADupStack forum, as the adapter
    hands them to its search (bag-of-words vectors, normalised)."""
    import useb_fidelity as uf

    import benchbench.evaluate.adapters.cqadupstack as cq
    from benchbench.encode.encoding import Embedder

    seen: list[tuple[np.ndarray, np.ndarray]] = []
    real = cq.search_topk

    def capture(q, blocks, k):
        blocks = [np.array(b) for b in blocks]
        seen.append((np.array(q), np.concatenate(blocks)))
        return real(q, blocks, k)

    cq.search_topk = capture
    try:
        ad = uf._make_adapter("cqadupstack", root, False)
        forums = ad.available_forums("test")
        ad.spec = dataclasses.replace(ad.spec, params={**ad.spec.params, "forums": forums})
        ad.evaluate(Embedder(uf.BowEncoder(), progress=False), "test")
    finally:
        cq.search_topk = real
    return [(f, q, c) for f, (q, c) in zip(forums, seen, strict=True)]


def check_exact(
    q: np.ndarray, c: np.ndarray, got: tuple[np.ndarray, np.ndarray], want: tuple[np.ndarray, np.ndarray], k: int
):
    """Every returned row is within 1e-6 of the true k-th score (float64 brute force), and the scores
    agree with faiss's to a float32 rounding."""
    scores, idx = got
    for s in range(0, len(q), 256):
        true = q[s : s + 256].astype(np.float64) @ c.T.astype(np.float64)
        kth = np.sort(true, axis=1)[:, -k]
        picked = np.take_along_axis(true, idx[s : s + 256], axis=1)
        if not (picked >= kth[:, None] - 1e-6).all():
            raise AssertionError("the two-stage search missed a top-k row")
    worst = float(np.abs(scores - want[0]).max())
    if worst > 1e-5:
        raise AssertionError(f"scores differ from faiss's by {worst}")
    return worst, float((idx == want[1]).mean())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=os.environ.get("BENCHBENCH_DATA"))
    ap.add_argument("--block", type=int, default=16384, help="corpus rows per block (the adapter's: 16384 at d=384)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if not args.data_dir:
        print("set BENCHBENCH_DATA (or --data-dir)", file=sys.stderr)
        return 2
    import torch  # imported before any clock: a benchbench run has it loaded for its encoder
    from tabulate import tabulate

    from benchbench.evaluate.adapters.ranking import search_topk

    k = 100
    forums = capture_forums(Path(args.data_dir))
    load = os.getloadavg()
    rows, tot = [], {"faiss": 0.0, "two": 0.0}
    for name, q, c in forums:
        blocks = [c[i : i + args.block] for i in range(0, len(c), args.block)]
        best = {"faiss": np.inf, "two": np.inf}
        pairs: list[int] = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            want = search_topk(q, blocks, k)
            best["faiss"] = min(best["faiss"], time.perf_counter() - t)
            t = time.perf_counter()
            got = two_stage_topk(q, blocks, k, pairs=pairs)
            best["two"] = min(best["two"], time.perf_counter() - t)
        worst, same = check_exact(q, c, got, want, k)
        for key in tot:
            tot[key] += best[key]
        rows.append([name, len(q), len(c), f"{best['faiss']:.3f}", f"{best['two']:.3f}",
                     f"{best['faiss'] / best['two']:.2f}x", f"{pairs[-1] / len(q):.0f}", f"{worst:.1e}", f"{same:.4f}"])  # fmt: skip
    rows.append(
        ["all", "", "", f"{tot['faiss']:.2f}", f"{tot['two']:.2f}", f"{tot['faiss'] / tot['two']:.2f}x", "", "", ""]
    )
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, block {args.block} rows, best of {args.repeats}"
    )
    print(f"load average {load[0]:.2f} -> {os.getloadavg()[0]:.2f}")
    print(tabulate(rows, headers=["forum", "queries", "corpus", "faiss s", "two-stage s", "speed-up",
                                  "rescored/query", "max |score diff|", "same rows"]))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
