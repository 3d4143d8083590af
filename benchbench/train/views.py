"""An on-disk cache of text views, keyed by (augmenter, config, text).

Some views are expensive (back-translation through two MT systems, a masked LM's substitutions) and
deterministic for a given configuration, so a corpus should be transformed once and every later epoch,
run or seed should read the result. The cache is one SQLite file (the standard library's sqlite3:
safe under several concurrent writers across processes, with WAL journalling and a busy timeout;
values are plain UTF-8 text, nothing is pickled). Location: ``$BENCHBENCH_VIEW_CACHE``, else
``~/.cache/benchbench/views.sqlite``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def default_view_cache_path() -> Path:
    env = os.environ.get("BENCHBENCH_VIEW_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "benchbench" / "views.sqlite"


class ViewCache:
    """``get``/``put`` many views at once; ``map`` transforms only the texts not yet cached.

    ``misses`` counts texts handed to a transform by this object (a second ``map`` over the same
    texts adds nothing: the measurable proof that a corpus is transformed once)."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_view_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self.misses = 0
        self.hits = 0
        con = self._con()
        con.execute(
            "CREATE TABLE IF NOT EXISTS views (augmenter TEXT NOT NULL, config TEXT NOT NULL, "
            "text TEXT NOT NULL, view TEXT NOT NULL, PRIMARY KEY (augmenter, config, text))"
        )
        con.commit()

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(str(self.path), timeout=60.0)
            con.execute("PRAGMA journal_mode=WAL")
            self._local.con = con
        return con

    @staticmethod
    def config_key(config: dict[str, Any]) -> str:
        """The config as canonical JSON (sorted keys): equal configs share their views."""
        return json.dumps(config, sort_keys=True, default=str)

    def get(self, augmenter: str, config: dict[str, Any], texts: Sequence[str]) -> dict[str, str]:
        """text -> stored view, for the texts that have one under (``augmenter``, ``config``)."""
        key, con, out = self.config_key(config), self._con(), {}
        uniq = list(dict.fromkeys(texts))
        for i in range(0, len(uniq), 500):  # SQLite's bound-parameter limit
            chunk = uniq[i : i + 500]
            q = f"SELECT text, view FROM views WHERE augmenter=? AND config=? AND text IN ({','.join('?' * len(chunk))})"
            out.update(con.execute(q, [augmenter, key, *chunk]).fetchall())
        return out

    def configs(self, augmenter: str) -> list[dict[str, Any]]:
        """Every config ``augmenter``'s views are stored under (JSON objects as written by ``put``)."""
        rows = self._con().execute("SELECT DISTINCT config FROM views WHERE augmenter=?", [augmenter]).fetchall()
        return [json.loads(r[0]) for r in rows]

    def put(self, augmenter: str, config: dict[str, Any], pairs: dict[str, str]) -> None:
        """Store text -> view pairs in one transaction; a view already stored is kept, never replaced."""
        key, con = self.config_key(config), self._con()
        with con:  # one transaction; a concurrent writer of the same key wrote the same view: keep the first
            con.executemany(
                "INSERT OR IGNORE INTO views VALUES (?, ?, ?, ?)", [(augmenter, key, t, v) for t, v in pairs.items()]
            )

    def map(
        self,
        augmenter: str,
        config: dict[str, Any],
        texts: Sequence[str],
        transform: Callable[[list[str]], list[str]],
        chunk: int = 2000,
    ) -> list[str]:
        """``transform`` applied to ``texts``, computing only the uncached ones, ``chunk`` texts a call.
        Each chunk is stored as soon as it is done, so an interrupted run (a large corpus's
        back-translation takes hours) resumes where it stopped instead of starting over. Views must
        not depend on the chunk a text came in (the augmenters seed per text)."""
        found = self.get(augmenter, config, texts)
        todo = [t for t in dict.fromkeys(texts) if t not in found]
        self.hits += len(texts) - len(todo)
        step = max(1, chunk)
        for i in range(0, len(todo), step):
            part = todo[i : i + step]
            new = transform(part)
            if len(new) != len(part):
                raise RuntimeError(f"augmenter {augmenter!r} returned {len(new)} views for {len(part)} texts.")
            self.misses += len(part)
            fresh = dict(zip(part, new))
            self.put(augmenter, config, fresh)
            found.update(fresh)
        return [found[t] for t in texts]

    def count(self, augmenter: str | None = None) -> int:
        """How many views are stored, for ``augmenter`` or for all."""
        con = self._con()
        if augmenter is None:
            return con.execute("SELECT COUNT(*) FROM views").fetchone()[0]
        return con.execute("SELECT COUNT(*) FROM views WHERE augmenter=?", (augmenter,)).fetchone()[0]
