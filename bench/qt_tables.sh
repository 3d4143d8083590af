#!/usr/bin/env bash
# Wrote section "Run 1" of leaderboards/qt/learning_check.md from the session-5 records (benchbench table).
# Run 2's table (trained vs untrained, per task) comes from bench/qt_learning_table.py; run now, this script
# would list every record under leaderboards/qt/results and overwrite the file: write to another path.
set -eu
OUT=leaderboards/qt
{
  echo "# Quick-Thoughts learning check (Jane Austen, CPU)"
  echo
  echo "Command: \`OMP_NUM_THREADS=1 bash bench/qt_learning_check.sh\` (records in leaderboards/qt/results)."
  echo "Budget: 2 epochs of the Jane Austen corpus (20,321 pysbd sentences; 2 x 50 windows of 400 contiguous"
  echo "sentences = 100 Adam steps, lr 5e-4) per QT model; f and g GRUs of 256 (bi: 2 x 128), 100-d"
  echo "from-scratch embeddings, vocabulary 20k, sentences cut at 40 tokens; mc-qt: bi-QT on fixed GloVe 6B-50d +"
  echo "bi-QT on scratch embeddings, 1 epoch (50 steps a model: CPU time). steps=0 rows are the untrained encoders of the same architecture"
  echo "(same seed, same init). SentEval in the prototyping classifier setting (senteval-proto), SICK-R, STS14."
  echo "Device: shared 2-core CPU (load ~9: about 8 jobs at once), torch threads 1."
  echo
  benchbench table --output $OUT/results --tasks senteval-proto,sick-r,sts14 --columns train.steps,train.seconds,train.sentences,train.tokens,train.flops
  echo
  echo "Legend (config hash -> what the row is):"
  python - <<'PY'
import json, pathlib
seen = {}
for f in sorted(pathlib.Path("leaderboards/qt/results").glob("*/*/*/*/seed1/*.json")):
    r = json.loads(f.read_text())
    c = r["config"]
    if r["method"] == "glove-avg":
        continue
    kind = {"qt": f"{c.get('encoder')}-QT", "mc-qt": "mc-qt (bi GloVe-fixed + bi scratch)"}.get(r["method"], r["method"])
    state = "UNTRAINED (steps=0)" if c.get("steps") == 0 else f"trained {c.get('epochs')} epoch(s)"
    seen[r["config_hash"]] = f"- {r['method']} [{r['config_hash']}]: {kind}, {state}"
print("\n".join(seen.values()))
PY
} > ${TARGET:-$OUT/learning_check_run1.md}
