#!/usr/bin/env bash
# Session-6 Trans-Encoder runs (CPU, 2 cores, one thread per run; see README.md "Session 6").
# Same small budget as run.sh: ONE cycle, 1000 training pairs (seeded subset), bi 2 epochs, cross 1 epoch,
# dev selection on 200 dev pairs, start all-MiniLM-L6-v2 with mean pooling. Records go to $OUT and are
# copied into records/ by make_tables.sh.
set -euo pipefail
export BENCHBENCH_DATA=${BENCHBENCH_DATA:-../shared/data} OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
OUT=${OUT:-/tmp/tenc-results}
M=all-MiniLM-L6-v2
B="--set pooling=mean --set cycles=1 --set bi_epochs=2 --set cross_epochs=1 --set max_pairs=1000 --set dev_max_pairs=200"
sts() {  # the whole sts suite (STS12-16, STS-B, SICK-R), trained once on the STS pool
  benchbench run --method plm-mean --model $M --tasks sts,qnli --output $OUT
  benchbench run --method trans-encoder --model $M --tasks sts --output $OUT $B --set train_pairs=sts
  benchbench run --method trans-encoder --model $M --tasks sts --output $OUT $B --set train_pairs=sts --score cross
}
pairs() {  # qnli on its own unlabelled pairs (mrpc-pairs: run.sh)
  benchbench run --method trans-encoder --model $M --tasks qnli --output $OUT $B
  benchbench run --method trans-encoder --model $M --tasks qnli --output $OUT $B --score cross
}
mutual() {  # MiniLM + mpnet (mpnet costs ~5x MiniLM: 300 pairs), reporting MiniLM, on mrpc-pairs
  MB="--set pooling=mean --set cycles=1 --set bi_epochs=2 --set cross_epochs=1 --set max_pairs=300 --set dev_max_pairs=200"
  benchbench run --method trans-encoder-mutual --model $M --tasks mrpc-pairs --output $OUT $MB --set models=$M,all-mpnet-base-v2
  benchbench run --method trans-encoder-mutual --model $M --tasks mrpc-pairs --output $OUT $MB --set models=$M,all-mpnet-base-v2 --score cross
}
parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(sts pairs mutual)
for part in "${parts[@]}"; do "$part"; done
