"""SBERT-sup. upper bound on TwitterPara from TURL train (setup `supervised`), a CPU smoke budget:
cosine-MSE (sentence-transformers CosineSimilarityLoss) 20 steps x batch 32, dev = 10% of TURL train
(capped at 2000 pairs), dev checked at steps 0 and 20, best kept. Seed 1. The stage's budget is set
with stage options (``--set supervised.steps=20``), so it is part of the record's key.
    OMP_NUM_THREADS=1 BENCHBENCH_DATA=<your data dir> python leaderboards/setups/run_supervised.py"""

from benchbench.run.runner import RunOptions, run

STAGE = {"supervised.batch_size": "32", "supervised.steps": "20", "supervised.eval_every": "20"}
rep = run(RunOptions(method="sbert", model="all-MiniLM-L6-v2", tasks="twitterpara", seeds=[1], setup="supervised",
                     overrides=STAGE, output="leaderboards/setups/records", progress=False))
print({r["setup"]: r["splits"]["test"]["main_score"] for r in rep.records}, rep.records[0]["train"]["stages"])
