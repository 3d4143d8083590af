#!/usr/bin/env bash
# Session-6 BSL runs (CPU, 2 cores shared with 3 other jobs; one thread per run). Budget and reading:
# leaderboards/bsl/README.md, "Session 6". Views come from the view cache (BENCHBENCH_VIEW_CACHE) when present.
set -uo pipefail
export BENCHBENCH_DATA=${BENCHBENCH_DATA:-../shared/data} OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
export BENCHBENCH_VIEW_CACHE=${BENCHBENCH_VIEW_CACHE:-leaderboards/bsl/.views.sqlite}
OUT=leaderboards/bsl/results
EVAL=sts,sts17,senteval-proto
TINY_MLM=${TINY_MLM:-$HOME/.cache/benchbench/tiny-mlm-nli}
learning() {
  # from all-MiniLM-L6-v2 (start: plm-mean, the same weights and pooling) and from a random tiny BERT
  benchbench run --method plm-mean --model all-MiniLM-L6-v2 --tasks $EVAL --output $OUT
  benchbench run --method bsl --model all-MiniLM-L6-v2 --tasks $EVAL --steps 10 --set max_sentences=1280 --output $OUT
  benchbench run --method plm-mean --model tiny-bert:64:2:2:128 --tasks $EVAL --output $OUT
  benchbench run --method bsl --model tiny-bert:64:2:2:128 --tasks $EVAL --steps 20 --set max_sentences=1280 --output $OUT
}
ablation() {
  # Table 4's four views from ONE start that has an MLM head: a tiny BERT pre-trained by MLM on the NLI
  # sentences (bench/pretrain_tiny_mlm.py); the mlm view uses that start's own head
  [ -d "$TINY_MLM" ] || python bench/pretrain_tiny_mlm.py --out "$TINY_MLM" --steps 600 --batch-size 32 --max-length 32 --lr 1e-3
  benchbench run --method plm-mean --model "$TINY_MLM" --tasks stsb,sickr --output $OUT
  for A in backtranslate synonym mlm nli-entail; do
    benchbench run --method bsl --model "$TINY_MLM" --tasks stsb,sickr --steps 20 --set max_sentences=1280 \
      --set augmenter=$A --output $OUT
  done
}
parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(learning ablation)
for part in "${parts[@]}"; do "$part"; done
