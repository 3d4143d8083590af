#!/usr/bin/env bash
# Regenerate leaderboards/qt/learning_check.md from the stored records (benchbench table).
set -eu
OUT=leaderboards/qt
{
  echo "# Quick-Thoughts learning check (Jane Austen, CPU)"
  echo
  echo "Command: \`OMP_NUM_THREADS=1 bash bench/qt_learning_check.sh\` (records in leaderboards/qt/results)."
  echo "Budget: 2 epochs of the Jane Austen corpus (20,321 pysbd sentences; 2 x 50 windows of 400 contiguous"
  echo "sentences = 100 Adam steps, lr 5e-4) per QT model; f and g GRUs of 256 (bi: 2 x 128), 100-d"
  echo "from-scratch embeddings, vocabulary 20k, sentences cut at 40 tokens; mc-qt: bi-QT on fixed GloVe 6B-50d +"
  echo "bi-QT on scratch embeddings. steps=0 rows are the untrained encoders of the same architecture"
  echo "(same seed, same init). SentEval in the prototyping classifier setting (senteval-proto), SICK-R, STS14."
  echo "Device: shared 2-core CPU (load ~9: about 8 jobs at once), torch threads 1."
  echo
  benchbench table --output $OUT/results --tasks senteval-proto,sick-r,sts14 --columns train.steps,train.seconds,train.sentences,train.tokens,train.flops
  echo
  echo "Rows by config hash: see the provenance lines above (config.encoder, config.steps, config.embeddings)."
} > $OUT/learning_check.md
