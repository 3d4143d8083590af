#!/usr/bin/env bash
# QT learning check on the Jane Austen corpus (CPU, small budget): uni-QT, bi-QT, mc-qt trained for
# 2 epochs (2 x 50 windows of 400 contiguous sentences), their untrained starts (steps=0), and glove-avg;
# evaluated on senteval-proto (the prototyping SentEval setting, for CPU time), sick-r and sts14.
# Usage: OMP_NUM_THREADS=1 bash bench/qt_learning_check.sh  (records under leaderboards/qt/results)
set -u
OUT=${OUT:-leaderboards/qt/results}
TASKS=${TASKS:-senteval-proto,sick-r,sts14}
SMALL="--set epochs=2 --set hidden=256 --set emb_dim=100 --set vocab_size=20000 --set max_tokens=40"
export BENCHBENCH_DATA=${BENCHBENCH_DATA:-../shared/data}
run() { echo "== $*"; /usr/bin/time -f "%e s" benchbench run --output "$OUT" --tasks "$TASKS" "$@" || echo "FAILED: $*"; }
run --method qt $SMALL --set encoder=gru
run --method qt $SMALL --set encoder=gru --set steps=0
run --method qt $SMALL --set encoder=bigru
run --method qt $SMALL --set encoder=bigru --set steps=0
run --method glove-avg
run --method mc-qt $SMALL
run --method mc-qt $SMALL --set steps=0
