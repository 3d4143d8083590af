"""Small fakes shared by the core tests."""
from __future__ import annotations

import numpy as np

# cosine(a_i, b_i) in the sts_mini fixture
FIXTURE_COS = {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.9, 4: 0.8}


class CosineFixtureEncoder:
    """Maps 'a<i>' to e1 and 'b<i>' to a unit vector whose cosine with e1 is FIXTURE_COS[i];
    counts what it is asked to encode."""

    fingerprint = "fixture-cos-v1"
    batch_size = 2

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = []
        for t in texts:
            if t.startswith("a"):
                out.append([1.0, 0.0])
            elif t.startswith("b"):
                c = FIXTURE_COS[int(t[1:])]
                out.append([c, (1 - c * c) ** 0.5])
            else:
                out.append([0.5, 0.5])
        return np.asarray(out, dtype=np.float32)

    @property
    def n_encoded(self) -> int:
        return sum(len(c) for c in self.calls)


from pathlib import Path  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"
