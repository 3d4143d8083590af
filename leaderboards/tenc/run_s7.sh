#!/usr/bin/env bash
# Session-7 Trans-Encoder runs (CPU, 2 cores, one thread per run; README.md "Session 7"): the MUTUAL
# setting (all-MiniLM-L6-v2 + all-mpnet-base-v2, MiniLM reported) on the whole `sts` suite and on qnli,
# with self-distillation at the SAME 300-pair budget beside each, so the two differ only in the labeller.
# Budget as the session-6 mutual run: one cycle, 300 training pairs (seeded subset), bi 2 epochs,
# cross 1 epoch, dev selection on 200 dev pairs, mean pooling.
set -euo pipefail
export BENCHBENCH_DATA=${BENCHBENCH_DATA:-../shared/data} OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
OUT=${OUT:-/tmp/tenc-results}
M=all-MiniLM-L6-v2
B="--set pooling=mean --set cycles=1 --set bi_epochs=2 --set cross_epochs=1 --set max_pairs=300 --set dev_max_pairs=200"
T() { /usr/bin/time -f "%e s: $*" benchbench run --model $M --output $OUT $B "$@"; }
sts() {
  T --method trans-encoder-mutual --tasks sts --set train_pairs=sts --set models=$M,all-mpnet-base-v2
  T --method trans-encoder-mutual --tasks sts --set train_pairs=sts --set models=$M,all-mpnet-base-v2 --score cross
  T --method trans-encoder --tasks sts --set train_pairs=sts
  T --method trans-encoder --tasks sts --set train_pairs=sts --score cross
}
qnli() {
  T --method trans-encoder-mutual --tasks qnli --set models=$M,all-mpnet-base-v2
  T --method trans-encoder-mutual --tasks qnli --set models=$M,all-mpnet-base-v2 --score cross
  T --method trans-encoder --tasks qnli
  T --method trans-encoder --tasks qnli --score cross
}
parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(sts qnli)
for part in "${parts[@]}"; do "$part"; done
