"""Learning, not just running: train a tiny BERT FROM SCRATCH (random init, bundled uncased vocab)
with each unsupervised method on the same budget on Wikipedia sentences, and evaluate the
untrained start and each trained encoder on STSb (test, Spearman x100) and TwitterPara (test, AP
x100) through the harness's own adapters.

    BENCHBENCH_DATA=/path/to/data python bench/small_scale_repro.py --steps 300 --batch-size 16

Every method gets the same number of optimizer steps, batch size and corpus; the learning rate is
one common value suited to a from-scratch tiny model (the papers' 1e-5..5e-5 are fine-tuning rates
for a pre-trained BERT and move a random model too little in a few hundred steps); each method
keeps its own optimizer and schedule shape. A trained encoder is compared with the untrained start
under the SAME pooling (TSDAE and SimCSE use [CLS]; MLM, CT and BERT-flow mean pooling).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


class WordOverlap:
    """A reference scorer with no model: Jaccard overlap of the two sentences' lower-cased word sets
    (through the adapters' pair-scorer protocol). A random-init encoder's pooled vectors behave much
    like a noisy version of this, which is why the untrained start is not a weak baseline."""

    fingerprint = "word-overlap"

    def encode(self, texts):
        raise NotImplementedError("word overlap scores pairs; it has no vectors")

    def score_pairs(self, a, b):
        import re

        import numpy as np

        words = lambda s: set(re.findall(r"\w+", s.lower()))  # noqa: E731
        return np.array([len(words(x) & words(y)) / max(1, len(words(x) | words(y))) for x, y in zip(a, b)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="tiny-bert:128:2:2:512", help="tiny-bert:H:L:A:I (random init)")
    ap.add_argument("--methods", default="tsdae,mlm,ct,simcse,bertflow")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--max-seq-length", type=int, default=64)
    ap.add_argument("--corpus-size", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data-dir", default=os.environ.get("BENCHBENCH_DATA"))
    ap.add_argument(
        "--eval-every",
        type=int,
        default=0,
        help="learning curve: every N steps evaluate the encoder as it stands on STSb dev (and, as a "
        "diagnostic, both test sets); also report the test scores at the best STSb-dev step",
    )
    ap.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="METHOD.KEY=VALUE",
        help="override one method option for this probe, e.g. simcse.pooling=mean (repeatable)",
    )
    ap.add_argument(
        "--position-init",
        choices=["random", "zero"],
        default="random",
        help="experiment: 'zero' starts the tiny BERT's position embeddings at zero (the untrained start "
        "and every method alike), which takes the random init's length code out of the start",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if not args.data_dir:
        sys.exit("set BENCHBENCH_DATA or pass --data-dir")
    os.environ["BENCHBENCH_DATA"] = args.data_dir

    import numpy as np
    from tabulate import tabulate

    from benchbench.core.methods import build_config
    from benchbench.core.registry import get_registry, make_adapter
    from benchbench.encode.cache import EmbeddingCache
    from benchbench.encode.encoding import Embedder
    from benchbench.encode.models import load_encoder
    from benchbench.store.data import DataStore
    from benchbench.train.context import TrainContext

    if args.position_init == "zero":
        import torch

        import benchbench.encode.models as models

        random_init = models.tiny_bert

        def zero_position_tiny_bert(*a, **k):
            enc = random_init(*a, **k)
            with torch.no_grad():
                enc.model.embeddings.position_embeddings.weight.zero_()
            return enc

        models.tiny_bert = zero_position_tiny_bert  # every load_encoder("tiny-bert:...") in this process

    reg = get_registry()
    data = DataStore(args.data_dir)
    tasks = {"stsb": make_adapter(reg, "stsb", data), "twitterpara": make_adapter(reg, "twitterpara", data)}
    wiki = Path(args.data_dir) / "corpora" / "wiki" / "wiki_sentences.txt"
    corpus = []
    with open(wiki, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                corpus.append(line.strip())
            if len(corpus) >= args.corpus_size:
                break

    tmp = Path(tempfile.mkdtemp(prefix="bb-repro-"))
    # one embedding cache for this process, keyed by the weights' fingerprint: the scores and the
    # length diagnostic of one curve point, and the final evaluation after its last point, share vectors
    cache = EmbeddingCache(tmp / "embeddings")

    def evaluate(encoder) -> dict[str, float]:
        emb = Embedder(encoder, cache=cache, progress=False)
        return {t: round(a.evaluate(emb, "test").main_score, 2) for t, a in tasks.items()}

    ((sts_a, sts_b, sts_gold),) = tasks["stsb"].load("test").values()  # STSb is one subset

    def length_rho(encoder, scores=None) -> float:
        """Diagnostic: Spearman x100 between the encoder's cosines on STSb test pairs (or ``scores``)
        and minus the pair's difference in token count (as the encoder sees it, after truncation).
        The gold scores hardly depend on it (printed as a reference), so an encoder with a high value
        ranks pairs by how alike their LENGTHS are, not their meaning."""
        from scipy.stats import spearmanr

        la, lb = np.array(encoder.lengths(sts_a)), np.array(encoder.lengths(sts_b))
        if scores is None:
            scores = Embedder(encoder, cache=cache, progress=False).cosine_pairs(sts_a, sts_b)
        return round(float(100 * spearmanr(scores, -np.abs(la - lb))[0]), 2)

    def stsb_dev(encoder) -> float:
        return round(tasks["stsb"].evaluate(Embedder(encoder, cache=cache, progress=False), "dev").main_score, 2)

    def curve_point(step, encoder) -> dict[str, float]:
        return {"stsb_dev": stsb_dev(encoder), **evaluate(encoder), "length_rho": length_rho(encoder)}

    untrained = {}
    for p in ("cls", "mean"):
        start = load_encoder(args.model, pooling=p, max_seq_length=args.max_seq_length)
        untrained[p] = {
            **evaluate(start),
            "length_rho": length_rho(start),
            **({"stsb_dev": stsb_dev(start)} if args.eval_every else {}),
        }
    print(f"untrained {args.model}: cls {untrained['cls']}  mean {untrained['mean']}", flush=True)
    gold_length_rho = length_rho(start, sts_gold)  # the tokenizer's lengths; pooling does not matter
    lexical = evaluate(WordOverlap())
    print(f"reference, no model: word-overlap (Jaccard of lower-cased word sets) {lexical}", flush=True)
    rows, records, curves = [], [], []
    for name in args.methods.split(","):
        cls = reg.method(name)
        overrides = {
            "steps": args.steps,
            "batch_size": args.batch_size,
            "lr": args.lr,
            "max_seq_length": args.max_seq_length,
        }
        if name == "simcse":
            overrides["checkpoint_every"] = 0
        for opt in args.option:
            target, _, kv = opt.partition(".")
            key, eq, value = kv.partition("=")
            if not (target and key and eq):
                sys.exit(f"--option {opt!r}: expected METHOD.KEY=VALUE")
            if target == name:
                overrides[key] = value  # build_config coerces the string to the option's type
        config = build_config(cls, overrides)
        ctx = TrainContext(model=args.model, seed=args.seed, output_dir=tmp / name, progress=False, device="cpu")
        if args.eval_every and name != "bertflow":  # BERT-flow trains a flow on cached vectors: no encoder to watch
            ctx.monitor, ctx.monitor_every = curve_point, args.eval_every
        t0 = time.perf_counter()
        encoder = cls(config).train(corpus, ctx)
        secs = time.perf_counter() - t0
        scores = evaluate(encoder)
        scores["length_rho"] = length_rho(encoder)
        pooling = getattr(config, "pooling", "mean")
        base = untrained[pooling]
        curve = ctx.accounting.get("loss_curve", [])
        rows.append(
            [
                name,
                pooling,
                ctx.accounting["steps"],
                round(secs),
                f"{curve[0][1]:.3f} -> {curve[-1][1]:.3f}" if curve else "",
                base["stsb"],
                scores["stsb"],
                round(scores["stsb"] - base["stsb"], 2),
                base["twitterpara"],
                scores["twitterpara"],
                round(scores["twitterpara"] - base["twitterpara"], 2),
                f"{base['length_rho']} -> {scores['length_rho']}",
            ]
        )
        records.append(
            {
                "method": name,
                "config": config.__dict__,
                "seconds": secs,
                "untrained": base,
                "trained": scores,
                "accounting": {k: v for k, v in ctx.accounting.items() if k != "loss_curve"},
                "loss_curve": curve,
            }
        )
        print(tabulate(rows[-1:], tablefmt="plain"), flush=True)
        if ctx.accounting.get("monitor"):
            points = ctx.accounting["monitor"]
            print(
                tabulate(
                    [[s, d["stsb_dev"], d["stsb"], d["twitterpara"], d["length_rho"]] for s, d in points],
                    headers=["step", "STSb dev", "STSb test", "TwitterPara test", "length rho"],
                    tablefmt="github",
                )
            )
            best_step, best = max(points, key=lambda p: p[1]["stsb_dev"])  # the first step reaching the best dev score
            records[-1]["dev_selected"] = {"step": best_step, **best}
            curves.append(
                [
                    name,
                    pooling,
                    base["stsb_dev"],
                    best_step,
                    best["stsb_dev"],
                    best["stsb"],
                    round(best["stsb"] - base["stsb"], 2),
                    best["twitterpara"],
                    round(best["twitterpara"] - base["twitterpara"], 2),
                ]
            )
    print()
    print(
        f"tiny BERT from scratch ({args.model}, {args.position_init} position init), {args.steps} steps x batch {args.batch_size}, lr {args.lr}, "
        f"{len(corpus)} wiki sentences, seed {args.seed}"
    )
    print(
        tabulate(
            rows,
            headers=[
                "method",
                "pooling",
                "steps",
                "train s",
                "loss first -> last",
                "STSb untrained",
                "STSb trained",
                "delta",
                "TwitterPara untrained",
                "TwitterPara trained",
                "delta",
                "length rho (diagnostic)",
            ],
            tablefmt="github",
        )
    )
    if curves:
        print(
            f"\nselected on STSb dev (the best of steps {args.eval_every}, {2 * args.eval_every}, ... and the last; "
            f"not step 0), scored on test:"
        )
        print(
            tabulate(
                curves,
                headers=[
                    "method",
                    "pooling",
                    "STSb dev untrained",
                    "best step",
                    "STSb dev",
                    "STSb test",
                    "delta",
                    "TwitterPara test",
                    "delta",
                ],
                tablefmt="github",
            )
        )
    print(f"reference, no model: word overlap {lexical}")
    print(
        f"length rho: Spearman x100 of the encoder's STSb-test cosines with minus the pairs' token-count difference "
        f"(the gold scores: {gold_length_rho}); high = the encoder ranks pairs by length"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "args": vars(args),
                    "untrained": untrained,
                    "word_overlap": lexical,
                    "gold_length_rho": gold_length_rho,
                    "methods": records,
                },
                indent=2,
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
