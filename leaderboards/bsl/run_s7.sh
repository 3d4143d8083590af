#!/usr/bin/env bash
# Session-7 BSL runs (CPU, one thread per run, 2 cores shared by 2 jobs). Reading: README.md "Session 7".
# senteval: the session-6 learning-check encoders (reused from results/runs, not retrained) and their starts
# on the full `senteval` suite in SentEval's DEFAULT classifier setting (the session-6 table used the
# prototyping setting).
set -uo pipefail
export BENCHBENCH_DATA=${BENCHBENCH_DATA:-../shared/data} OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
export BENCHBENCH_VIEW_CACHE=${BENCHBENCH_VIEW_CACHE:-leaderboards/bsl/.views.sqlite}
OUT=leaderboards/bsl/results
senteval() {
  for M in tiny-bert:64:2:2:128 all-MiniLM-L6-v2; do
    S=20; [ "$M" = all-MiniLM-L6-v2 ] && S=10
    /usr/bin/time -f "%e s plm-mean $M" benchbench run --method plm-mean --model $M --tasks senteval --output $OUT
    /usr/bin/time -f "%e s bsl $M" benchbench run --method bsl --model $M --tasks senteval --steps $S \
      --set max_sentences=1280 --output $OUT
  done
}
epoch() {
  # the paper's budget: ONE epoch over the whole 35,740-sentence NLI corpus (558 steps of 64), back-translation
  # views of every sentence (es and ca pivots; the first run fills the view cache), from the MLM-pretrained
  # tiny BERT of the ablation (a start that has pre-training, as BERT in the paper) and from the random one
  TINY_MLM=${TINY_MLM:-$HOME/.cache/benchbench/tiny-mlm-nli}
  [ -d "$TINY_MLM" ] || python bench/pretrain_tiny_mlm.py --out "$TINY_MLM" --steps 600 --batch-size 32 --max-length 32 --lr 1e-3
  for M in "$TINY_MLM" tiny-bert:64:2:2:128; do
    /usr/bin/time -f "%e s bsl epoch $M" benchbench run --method bsl --model "$M" --tasks sts,sts17,senteval --output $OUT
    /usr/bin/time -f "%e s plm-mean $M" benchbench run --method plm-mean --model "$M" --tasks sts,sts17,senteval --output $OUT
  done
}
ablation() {
  # Table 4's views at the same one-epoch budget, from the MLM-pretrained tiny BERT (backtranslate: epoch())
  TINY_MLM=${TINY_MLM:-$HOME/.cache/benchbench/tiny-mlm-nli}
  for A in nli-entail synonym mlm; do
    benchbench run --method bsl --model "$TINY_MLM" --tasks sts --set augmenter=$A --output $OUT
  done
}
minilm() {
  # all-MiniLM-L6-v2: one epoch of a seeded 6,400-sentence subset (100 steps of 64; ~6 s a step here)
  benchbench run --method bsl --model all-MiniLM-L6-v2 --tasks sts,sts17,senteval --set max_sentences=6400 --output $OUT
}
parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(senteval epoch ablation minilm)
for part in "${parts[@]}"; do "$part"; done
