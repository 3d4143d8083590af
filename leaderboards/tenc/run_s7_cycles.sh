#!/usr/bin/env bash
# Session 7: self-distillation on qnli with the paper's 3 cycles (README.md "Three cycles on qnli").
set -euo pipefail
export BENCHBENCH_DATA=${BENCHBENCH_DATA:-../shared/data} OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
OUT=${OUT:-/tmp/tenc-results}
B="--set pooling=mean --set bi_epochs=2 --set cross_epochs=1 --set max_pairs=1000 --set dev_max_pairs=200"
benchbench run --method trans-encoder --model all-MiniLM-L6-v2 --tasks qnli --output $OUT $B --set cycles=3
benchbench run --method trans-encoder --model all-MiniLM-L6-v2 --tasks qnli --output $OUT $B --set cycles=3 --score cross
