"""Write leaderboards/bsl/README-table.md from the records under leaderboards/bsl/results and the
stored start (plm-mean of all-MiniLM-L6-v2) under leaderboards/results. Run from the repo root."""
import glob
import json
from pathlib import Path

rows = []
for f in sorted([g for g in glob.glob("leaderboards/bsl/results/**/*.json", recursive=True) if "/runs/" not in g]
                + glob.glob("leaderboards/results/plm-mean/sentence-transformers__all-MiniLM-L6-v2/**/stsb.json", recursive=True)
                + glob.glob("leaderboards/results/plm-mean/sentence-transformers__all-MiniLM-L6-v2/**/sts17-*.json", recursive=True)):
    d = json.loads(Path(f).read_text())
    sp = d["splits"].get("test") or next(iter(d["splits"].values()))
    tr = d.get("train") or {}
    cfg = d.get("config", {})
    rows.append((d["model"].split("/")[-1], d["method"], cfg.get("augmenter", "-"), cfg.get("two_view", "-"),
                 tr.get("steps", 0), d["task"], round(sp["main_score"], 2), f))
tasks = sorted({r[5] for r in rows})
keys = sorted({r[:5] for r in rows})
out = ["| model | method | augmenter | two_view | steps | " + " | ".join(tasks) + " |",
       "|---|---|---|---|---|" + "---|" * len(tasks)]
for k in keys:
    sc = {r[5]: r[6] for r in rows if r[:5] == k}
    out.append("| " + " | ".join(map(str, k)) + " | " + " | ".join(str(sc.get(t, "")) for t in tasks) + " |")
Path("leaderboards/bsl/table.md").write_text("\n".join(out) + "\n")
print("\n".join(out))
