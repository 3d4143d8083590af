#!/bin/sh
# TwitterPara over 3 seeds, CPU (2 cores; OMP_NUM_THREADS=1 per run), from all-MiniLM-L6-v2, with per-item
# scores stored (--store-items) for the paired bootstrap between methods (leaderboards/setups/tables.py).
# Budget per trained method and seed: 100 optimizer steps, batch 8 (a CPU budget, far below the paper's).
# Seeds are the OUTER loop so that whatever finishes first is a complete per-seed comparison.
set -x
export OMP_NUM_THREADS=1 BENCHBENCH_DATA=${BENCHBENCH_DATA:-../shared/data}
OUT=${OUT:-leaderboards/setups/records}
benchbench run --method sbert --tasks twitterpara --seeds 1,2,3 --output $OUT --model all-MiniLM-L6-v2 --store-items
for s in 1 2 3; do
  for m in tsdae ct simcse; do
    benchbench run --method $m --model all-MiniLM-L6-v2 --tasks twitterpara --seeds $s --output $OUT \
      --steps 100 --batch-size 8 --store-items
  done
done
