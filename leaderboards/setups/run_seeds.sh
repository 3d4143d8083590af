#!/bin/sh
# TwitterPara over 3 seeds, CPU (2 cores shared by 8 people, load ~20; OMP_NUM_THREADS=1), from all-MiniLM-L6-v2.
# Budget per trained method and seed: 30 optimizer steps, batch 8 (a CPU smoke budget, far below the paper's).
# Seeds are the OUTER loop so that whatever finishes first is a complete per-seed comparison.
# Evaluation (10,236 tweets) is the bottleneck here: ~12 min per trained encoder at this load.
set -x
export OMP_NUM_THREADS=1 BENCHBENCH_DATA=${BENCHBENCH_DATA:-../shared/data}
OUT=leaderboards/setups/records
benchbench run --method sbert --tasks twitterpara --seeds 1,2,3 --output $OUT --model all-MiniLM-L6-v2
for s in 1 2 3; do
  for m in tsdae ct simcse; do
    benchbench run --method $m --model all-MiniLM-L6-v2 --tasks twitterpara --seeds $s --output $OUT --steps 30 --batch-size 8
  done
done
