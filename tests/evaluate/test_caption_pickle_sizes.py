"""A damaged SentEval COCO pickle is a DataError naming the file, never a memory blow-up.

pickle's C loader allocates what a length field claims before reading, and grows its memo to any index
a PUT names. Found by fuzzing ``load_senteval_pickle``: 5 bytes claiming a 3.2 GB BINBYTES, or a
LONG_BINPUT of 2^31 - 1 (a 32 GB zero-filled memo), got the process killed for memory or leaked a
MemoryError. ``_check_pickle_sizes`` walks the opcodes first. Each case runs in a child process
capped at 2 GB of address space, so a regression fails the test instead of killing the runner."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest

from benchbench.core.errors import DataError
from benchbench.evaluate.adapters import caption

CASES = {
    "BINBYTES claims 3.2 GB": b"B\xfcw\xf4\xbe",
    "BINBYTES8 claims 16 GB": b"\x80\x04\x8e" + (16 << 30).to_bytes(8, "little") + b"xx",
    "BYTEARRAY8 claims 8 GB": b"\x80\x05\x96" + (8 << 30).to_bytes(8, "little"),
    "LONG_BINPUT 2^31-1": b"\x80\x02]r\xff\xff\xff\x7f.",
    "FRAME claims 1 TB": b"\x80\x04\x95" + (1 << 40).to_bytes(8, "little") + b"}.",
    "unknown protocol": b"\x80w\n",
    "unparsable FLOAT": b"]F:d\n.",
}

CHILD = """
import json, resource, sys, tracemalloc
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from pathlib import Path
from benchbench.core.errors import DataError
from benchbench.evaluate.adapters import caption
out = {}
for path in sys.argv[1:]:
    tracemalloc.start()
    try:
        caption.load_senteval_pickle(Path(path))
        got = "returned"
    except DataError as e:
        got = "DataError" if path in str(e) else "DataError without the file"
    except BaseException as e:
        got = type(e).__name__
    out[path] = [got, tracemalloc.get_traced_memory()[1]]
    tracemalloc.stop()
print(json.dumps(out))
"""


def test_damaged_sizes_are_data_errors_without_allocating_them(tmp_path):
    paths = {}
    for i, (name, data) in enumerate(CASES.items()):
        p = tmp_path / f"coco-{i}.pkl"
        p.write_bytes(data)
        paths[str(p)] = name
    run = subprocess.run([sys.executable, "-c", CHILD, *paths], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    for path, name in paths.items():
        outcome, peak = got[path]
        assert outcome == "DataError", (name, outcome)
        assert peak < 1 << 20, (name, peak)  # traced Python allocations stay under 1 MB


@pytest.mark.parametrize("protocol", [2, 4])
def test_a_genuine_pickle_still_loads(tmp_path, protocol):
    data = {
        "features": np.arange(12, dtype=np.float32).reshape(3, 4),
        "image_to_caption_ids": [[0, 1], [2, 3], [4, 5]],
        "captions": [{"cleaned_caption": f"a caption {i}"} for i in range(6)],
    }
    p = tmp_path / "coco.pkl"
    p.write_bytes(pickle.dumps(data, protocol=protocol))
    feats, texts = caption.load_senteval_pickle(p, captions_per_image=2)
    assert feats.shape == (6, 4) and texts[3] == "a caption 3 ." and (feats[2] == data["features"][1]).all()


def test_a_truncated_genuine_pickle_names_the_file(tmp_path):
    p = tmp_path / "coco.pkl"
    p.write_bytes(pickle.dumps({"features": np.zeros((50, 8), np.float32)}, protocol=2)[:-40])
    with pytest.raises(DataError, match="coco.pkl"):
        caption.load_senteval_pickle(p)
