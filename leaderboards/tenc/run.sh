#!/usr/bin/env bash
# The exact commands behind leaderboards/tenc/ (CPU budget: 2 shared cores; two chains in parallel,
# one thread each). Results go to $OUT (run folders hold saved encoders: not committed); the JSON
# records are copied into leaderboards/tenc/records/ and tabulated with `benchbench table`.
set -euo pipefail
export BENCHBENCH_DATA=${BENCHBENCH_DATA:-../shared/data} OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
OUT=${OUT:-/tmp/tenc-results}
M=all-MiniLM-L6-v2
# budget (paper: 3/5 cycles, bi 10/15 epochs, cross 1/3 epochs, all pairs): see README.md
B="--set pooling=mean --set cycles=2 --set bi_epochs=2 --set cross_epochs=1 --set max_pairs=2000 --set dev_max_pairs=300"
chain1() {
  benchbench run --method plm-mean --model $M --tasks sts,qnli,mrpc-pairs --output $OUT
  # STS pool (STS12-16 + STS-B + SICK-R pairs, labels unread), evaluated on STS and (Table 3 transfer) on pairs
  benchbench run --method trans-encoder --model $M --tasks sts,qnli,mrpc-pairs --output $OUT $B --set train_pairs=sts
  benchbench run --method trans-encoder --model $M --tasks sts,qnli,mrpc-pairs --output $OUT $B --set train_pairs=sts --score cross
}
chain2() {
  # each pair task's own pairs
  benchbench run --method trans-encoder --model $M --tasks qnli,mrpc-pairs --output $OUT $B
  benchbench run --method trans-encoder --model $M --tasks qnli,mrpc-pairs --output $OUT $B --score cross
  # mutual MiniLM + mpnet (mpnet costs ~5x MiniLM: one cycle, 1000 pairs), reporting MiniLM
  MB="--set pooling=mean --set cycles=1 --set bi_epochs=2 --set cross_epochs=1 --set max_pairs=1000 --set dev_max_pairs=300"
  benchbench run --method trans-encoder-mutual --model $M --tasks sts --output $OUT $MB --set train_pairs=sts \
    --set models=$M,all-mpnet-base-v2
  benchbench run --method trans-encoder-mutual --model $M --tasks sts --output $OUT $MB --set train_pairs=sts \
    --set models=$M,all-mpnet-base-v2 --score cross
}
case "${1:-all}" in
  chain1) chain1 ;; chain2) chain2 ;;
  all) chain1 & chain2 & wait ;;
esac
