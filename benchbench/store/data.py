"""Finding a dataset file: the data dir, then the user cache, then a checksummed download."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from benchbench.core.env import env_bytes, env_flag
from benchbench.core.errors import DataError
from benchbench.core.paths import default_data_cache
from benchbench.core.tasks import FileEntry, data_path_problem, url_problem
from benchbench.store.files import atomic_writer, sha256_file

__all__ = ["DataStore", "FileEntry", "default_data_cache"]


def _gzip():
    """ISA-L's igzip when the ``isal`` package is installed (~3x faster decompression than zlib,
    the same bytes out), else the standard gzip module; both have ``open`` and ``decompress``."""
    try:
        from isal import igzip

        return igzip
    except ImportError:  # pragma: no cover - isal is a dependency; stay readable without it
        import gzip

        return gzip


def open_text(path, encoding: str = "utf-8"):
    """A text file, read through gzip when its name ends in .gz."""
    if not str(path).endswith(".gz"):
        return open(path, encoding=encoding)
    return _gzip().open(path, "rt", encoding=encoding)


# How much of a task file is read into memory. The default for a .gz is what its compressed size can
# honestly inflate to (real task data inflates 3-4x; a gzip bomb 1000x), never under the floor (small
# files) nor over the cap; a spec's declared ``size`` is exact; the environment variable overrides both.
READ_LIMIT_ENV = "BENCHBENCH_MAX_READ_BYTES"
GZ_RATIO = 20
READ_FLOOR = 64 << 20
READ_CAP = 4 << 30
_DECLARED_SIZES: dict[str, int] = {}  # absolute path -> the spec's declared size (DataStore.fetch fills it)


# Every data file benchbench reads (task spec files, HF copies' files, MTEB result files, archives) is
# read through this family, under one limit (``read_limit``) and one message (``_too_big``): a compressed
# file is inflated as a stream and counted as it inflates, so a bomb stops at the limit, not in memory;
# a plain file (text, JSON, parquet, Arrow) is measured before a byte of it is read.
COMPRESSED = (".gz", ".bz2", ".xz", ".zip")


def _compressed(path) -> bool:
    return str(path).lower().endswith(COMPRESSED)


def read_limit(path, default: tuple[int, str] | None = None) -> tuple[int, str]:
    """(the most bytes ``path``'s contents may have as read, where that limit comes from). Order: the
    environment's ``BENCHBENCH_MAX_READ_BYTES``, the task spec's declared size, then for a compressed
    file a multiple of its compressed size, else ``default`` (a caller reading small files, such as MTEB
    result JSON, gives a lower one) or the cap. A bad variable is a ``ConfigError`` naming it, never
    the task's fault."""
    env = env_bytes(READ_LIMIT_ENV, None)
    if env is not None:
        return env, f"{READ_LIMIT_ENV}={os.environ[READ_LIMIT_ENV].strip()}"
    declared = _DECLARED_SIZES.get(os.path.abspath(path))
    if declared is not None:
        return declared, "the size its task spec declares"
    if not _compressed(path):
        return default or (READ_CAP, "the default cap")
    compressed = Path(path).stat().st_size
    limit = min(READ_CAP, max(READ_FLOOR, GZ_RATIO * compressed))
    return limit, f"{GZ_RATIO}x its compressed size, at least {READ_FLOOR >> 20} MiB, at most {READ_CAP >> 30} GiB"


def declare_size(path, size: int) -> None:
    """The spec's declared size of ``path``'s contents: reading stops there."""
    _DECLARED_SIZES[os.path.abspath(path)] = int(size)


def _too_big(
    path, limit: int, why: str, size: int | None = None, so_far: int | None = None, at_least: bool = False
) -> DataError:
    """The one message of a read over the limit: the file, its size (or what it inflated to before the
    read stopped), the limit and its source, and the variable to raise."""
    if size is not None:
        got = f"holds {'at least ' if at_least else ''}{size:,} bytes, over"
    else:
        got = f"inflates past {so_far:,} bytes (reading stopped there), over" if so_far else "inflates past"
    return DataError(
        f"{path}: {got} the read limit of {limit:,} bytes ({why}). A data file this large is damaged or "
        f"not the published file (a compressed file that inflates this far is a decompression bomb). If it "
        f"is genuine, raise the limit: set {READ_LIMIT_ENV} (e.g. 8G) or declare its size in the task spec "
        f"(files.<path>.size)."
    )


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(path, mode: int) -> DataError:
    """The one message of a data file that is not a regular file (``/dev/zero`` behind a link, a FIFO):
    it has no size to check against the limit, and reading it never ends (or blocks)."""
    kind = next((what for test, what in _KINDS if test(mode)), "not a regular file")
    link = f", through a link to {os.readlink(path)}" if os.path.islink(path) else ""
    return DataError(
        f"{path}: is {kind}{link}, not a regular file. benchbench reads data only from regular files (a "
        f"device or a pipe has no size to bound the read: it reads forever or blocks). Put the file itself there."
    )


def _regular_size(path) -> int:
    """``path``'s size, after proving it is a regular file (links followed): else the ``DataError`` of
    :func:`_not_regular`, before anything opens it."""
    try:
        st = os.stat(path)
    except OSError as e:
        if not os.path.islink(path):
            raise
        raise DataError(
            f"{path}: is a link to {os.readlink(path)}, which cannot be read ({e.strerror or e}). Put the file "
            f"itself there."
        ) from e
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st.st_mode)
    return st.st_size


def _open_regular(path):
    """``path`` opened for binary reading, proven a regular file on the open descriptor (opened
    non-blocking, so a FIFO swapped in after any check cannot hang the open); the caller reads it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _decompressor(path):
    """``open(path, "rb")`` of the stream module for a compressed file's suffix (not zip)."""
    name = str(path).lower()
    if name.endswith(".gz"):
        return _gzip().open
    if name.endswith(".bz2"):
        import bz2

        return bz2.open
    import lzma

    return lzma.open


def _stream(path, limit: int, why: str, sink=None) -> int:
    """Inflate ``path`` 1 MiB at a time, counting: a ``DataError`` as soon as the count passes
    ``limit`` (memory stays at one chunk whatever the file inflates to). Each chunk goes to ``sink``
    when given. Returns the inflated size. A zip's members are counted together."""
    total = 0

    def drain(f) -> None:  # one stream's chunks, counted into ``total`` (a zip's members share it)
        nonlocal total
        while chunk := f.read(1 << 20):
            total += len(chunk)
            if total > limit:
                raise _too_big(path, limit, why, so_far=total)
            if sink is not None:
                sink(chunk)

    try:
        if str(path).lower().endswith(".zip"):
            import zipfile

            with _open_regular(path) as raw, zipfile.ZipFile(raw) as z:
                declared = sum(i.file_size for i in z.infolist())
                if declared > limit:  # the central directory already says so: nothing inflated
                    raise _too_big(path, limit, why, size=declared)
                for info in z.infolist():
                    with z.open(info) as f:
                        drain(f)
            return total
        with _open_regular(path) as raw, _decompressor(path)(raw, "rb") as f:
            drain(f)
    except DataError:
        raise
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except Exception as e:  # BadGzipFile, EOFError, zipfile.BadZipFile, lzma.LZMAError, zlib.error ...
        raise DataError(
            f"{path}: not a readable compressed file ({type(e).__name__}: {e}). Is it the published file, unmodified?"
        ) from e
    return total


def _columnar_size(path, limit: int, why: str) -> int | None:
    """A parquet or Arrow IPC file's size as read, counted batch by batch as it decodes (dictionary
    encoding and compression let a small file decode to far more than its size, so neither the file
    size nor a parquet footer bounds it): a ``DataError`` once the count passes ``limit``. None when
    the file does not open as that format (the reader that follows says why)."""
    import pyarrow as pa

    name = str(path).lower()
    try:
        if name.endswith(".parquet"):
            import pyarrow.parquet as pq

            batches = pq.ParquetFile(path).iter_batches(batch_size=1024)
        else:
            try:
                reader = pa.ipc.open_file(path)
                batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
            except pa.ArrowInvalid:
                batches = iter(pa.ipc.open_stream(pa.memory_map(str(path))))
        total = 0
        for batch in batches:
            total += batch.nbytes
            if total > limit:
                raise _too_big(path, limit, why, so_far=total)
        return total
    except DataError:
        raise
    except Exception:
        return None


COLUMNAR = (".parquet", ".arrow")


def check_size(path, limit: int | None = None, default: tuple[int, str] | None = None) -> int:
    """Prove that ``path``'s contents fit the read limit without holding them, before another library
    (``datasets``, ``pyarrow``, ``json``) reads it whole: a compressed file (gzip, bz2, xz, zip) is
    inflated as a stream and counted, stopping at the limit; a parquet or Arrow file by its size, then
    decoded a batch at a time and counted; any other (JSON, text) by its size. Returns the size as read;
    over the limit, the ``DataError`` of :func:`read_bytes`."""
    why = "the caller's limit"
    if limit is None:
        limit, why = read_limit(path, default)
    p = Path(path)
    if _compressed(p):
        return _stream(p, limit, why)
    size = _regular_size(p)
    if size > limit:
        raise _too_big(path, limit, why, size)
    if p.name.lower().endswith(COLUMNAR):
        return max(size, _columnar_size(p, limit, why) or 0)
    return size


def entries_under(folder) -> list[Path]:
    """Every entry under ``folder`` that is not a folder (files, links to files, and anything else a
    reader must refuse: a device, a FIFO, a dangling link), by its path inside ``folder``, symlinked
    subfolders followed: ``datasets`` reads through them, and ``Path.rglob`` does not descend into them,
    so a copy whose ``default/`` is a link had neither its rows fingerprinted nor their size checked (its
    rows changed, the old score and the old ``datasets`` cache were served). A link to a folder on its own
    way or above it (``..``, ``/``: a loop, or the whole disk) is not entered."""
    out: list[Path] = []

    def walk(d: Path, above: frozenset[str]) -> None:
        for q in d.rglob("*"):
            if q.is_symlink() and q.is_dir():
                real = os.path.realpath(q)
                if not any(a == real or a.startswith(real.rstrip(os.sep) + os.sep) for a in above):
                    walk(q, above | {real})
            elif not q.is_dir():
                out.append(q)

    walk(Path(folder), frozenset({os.path.realpath(folder)}))
    return out


_CHECKED: dict[tuple[str, int, int, str], int] = {}  # (path, size, mtime, limit source) -> size as read


def check_folder(folder, skip: tuple[str, ...] = (".cache",)) -> int:
    """:func:`check_size` for every file under ``folder`` (a Hugging Face copy, whose files
    ``datasets`` then reads whole), each file once per (size, mtime); folders named in ``skip`` (its
    own cache) are passed over. Returns the total size as read."""
    folder = Path(folder)
    total = 0
    # every entry but a folder: a link to a device or a FIFO among the files is refused, never skipped
    # (``datasets`` would list it and read it without end)
    entries = [q for q in entries_under(folder) if not set(skip) & set(q.relative_to(folder).parts)]
    for p in sorted(entries):
        _regular_size(p)
        st = p.stat()
        key = (str(p), st.st_size, st.st_mtime_ns, os.environ.get(READ_LIMIT_ENV, ""))
        if key not in _CHECKED:
            _CHECKED[key] = check_size(p)
        total += _CHECKED[key]
    return total


def read_bytes(path, limit: int | None = None, default: tuple[int, str] | None = None) -> bytes:
    """A file's bytes, decompressed when its name ends in .gz/.bz2/.xz (a .zip's members joined),
    never more than ``read_limit``: a bomb stops at the limit instead of inflating whole into memory
    (streamed 1 MiB at a time); a plain file over the limit is refused before it is read."""
    why = "the caller's limit"
    if limit is None:
        limit, why = read_limit(path, default)
    p = Path(path)
    if not _compressed(p):
        with _open_regular(p) as f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise _too_big(path, limit, why, size)
            data = f.read(limit + 1)  # never more than the limit, whatever the size said
        if len(data) > limit:  # its size said less (procfs, a file growing as it is read)
            raise _too_big(path, limit, why, len(data), at_least=True)
        return data
    chunks: list[bytes] = []
    _stream(p, limit, why, chunks.append)
    return b"".join(chunks)


def read_json(path, default: tuple[int, str] | None = None) -> Any:
    """A JSON file (compressed or not) read under the limit: over it, the one ``DataError``; bytes
    that are not JSON, a ``DataError`` naming the file."""
    import json

    raw = read_bytes(path, default=default)
    try:
        return json.loads(raw)
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
        raise DataError(f"{path}: not valid JSON ({e}). Is it the file you meant?") from e


def _decode_error_line(path, encoding: str) -> tuple[int, str] | None:
    """(line number, reason) of the first byte of ``path`` that ``encoding`` cannot decode."""
    try:
        raw = read_bytes(path)
        raw.decode(encoding)
    except UnicodeDecodeError as e:
        return raw.count(b"\n", 0, e.start) + 1, f"byte {raw[e.start : e.start + 1]!r} is not valid {encoding}"
    except (OSError, DataError):
        return None
    return None


def bad_line(path, line: int | None, error: BaseException, expected: str = "") -> DataError:
    """The ``DataError`` for a task file that does not parse: file and line, what was wrong and,
    when given, what a line should look like. Readers wrap their parse loop in
    ``except PARSE_ERRORS as e: raise bad_line(path, lineno, e, ...) from e`` so that a malformed
    file never surfaces as a bare ``ValueError``/``IndexError`` without its name and line."""
    if isinstance(error, UnicodeDecodeError):
        found = _decode_error_line(path, error.encoding or "utf-8")
        if found is not None:
            line, why = found
        else:
            why = str(error)
    elif isinstance(error, IndexError):
        why = "too few columns"
    elif isinstance(error, KeyError):
        why = f"missing field {error}"
    else:
        why = str(error) or type(error).__name__
    where = f"{path}:{line}" if line is not None else f"{path}"
    hint = f"; expected {expected}" if expected else ""
    return DataError(f"{where}: cannot parse ({why}){hint}. Is it the published file, unmodified?")


# what a parse loop over a task file may raise on a malformed line (UnicodeDecodeError is a ValueError)
PARSE_ERRORS = (ValueError, IndexError, KeyError, TypeError)


def parse_score(text: str) -> float:
    """A gold score: a finite number (``nan``/``inf`` would make every correlation NaN)."""
    import math

    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"score {text.strip()!r} is not a finite number")
    return v


def read_text(path, encoding: str = "utf-8") -> str:
    """A task file's text (gunzipped when .gz); a byte the encoding cannot decode is a ``DataError``
    naming the file and line, not a bare ``UnicodeDecodeError``."""
    try:
        raw = read_bytes(path)
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from e
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DataError(
            f"{path}:{line}: byte {raw[e.start : e.start + 1]!r} is not valid {encoding}. "
            f"Is it the published file, unmodified?"
        ) from e
    nul = text.find("\x00")
    if nul >= 0:  # no text data file holds one: a NUL is damage (or an attack), and it changes the tokens
        line = text.count("\n", 0, nul) + 1
        raise DataError(f"{path}:{line}: a NUL byte (\\x00) in a text data file. Is it the published file, unmodified?")
    return text


def read_lines(path, encoding: str = "utf-8") -> list[str]:
    """The file's lines without line ends, split at \\n only (a \\r before it, a CRLF line end, is
    dropped). Never ``str.splitlines()``, which also splits at U+0085, U+2028, U+2029, form feeds and
    other characters that can sit inside a sentence: it would turn one row into two, or a valid
    sentence into a "short row"; never universal newlines either, which split at a lone \\r."""
    text = read_text(path, encoding)
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the file's final newline ends the last line, it starts none
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def ensure_writable_dir(path: str | Path, what: str) -> Path:
    """Create ``path`` if needed and prove it writable (a real temp file, then removed), before
    any training or evaluation: a read-only or full output disk is an error up front, not a
    traceback after an hour of work. ``what`` names the option it came from."""
    import errno

    p = Path(path).expanduser().absolute()  # the message names the folder, not a relative stub
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p, prefix=".writable-", suffix=".tmp")
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
            os.unlink(tmp)
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise DataError(
                f"{what}: no space left on the device holding {p}. Free space there (old run folders, "
                f"embedding caches under $BENCHBENCH_CACHE or ~/.cache/benchbench) or choose another folder."
            ) from e
        raise DataError(
            f"{what}: {p} is not a writable folder ({e.strerror or e}). Choose a writable folder "
            f"or fix its permissions."
        ) from e
    return p


class DataStore:
    """Resolve relative dataset paths. Order: ``data_dir`` (``--data-dir`` or ``BENCHBENCH_DATA``),
    then the user cache, then download into the cache (verified against sha256 before it is kept)."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
        allow_download: bool = True,
        timeout: float = 60.0,
    ):
        d = data_dir or os.environ.get("BENCHBENCH_DATA")
        self.data_dir = Path(d).expanduser() if d else None
        if self.data_dir is not None and not self.data_dir.is_dir():
            raise DataError(
                f"Data dir {self.data_dir} (from {'--data-dir' if data_dir else 'BENCHBENCH_DATA'}) does not exist."
            )
        self.cache_dir = Path(cache_dir) if cache_dir else default_data_cache()
        self.allow_download = allow_download and not env_flag("BENCHBENCH_OFFLINE", False)
        self.timeout = timeout
        self._verified: dict[tuple[str, int, int], str] = {}
        self.used: dict[str, str] = {}  # relative path -> sha256 of every file handed out (for result records)

    def candidates(self, rel: str) -> list[Path]:
        """Where ``rel`` may be: under the data dir, then the cache. A path that would leave them
        (``..``, absolute) is an error before any file is touched, whatever built it (a spec's params,
        a plugin's ``FileEntry``): spec files are checked when they load, this is the last guard."""
        why = data_path_problem(rel)
        if why:
            raise DataError(f"Data path {rel!r} is refused: {why}. Name data files relative to the data dir.")
        roots = [r for r in (self.data_dir, self.cache_dir) if r is not None]
        return [r / rel for r in roots]

    def locate(self, rel: str) -> Path | None:
        """The first existing candidate, without verifying or downloading. A candidate that is a device or a
        pipe (or a link to one) is the ``DataError`` naming it, not a missing file."""
        for p in self.candidates(rel):
            if p.is_file():
                return p
            if p.exists() and not p.is_dir():
                raise _not_regular(p, p.stat().st_mode)
        return None

    def exists(self, rel: str) -> bool:
        """Is ``rel`` present in any place the store looks? Neither verifies nor downloads it."""
        return self.locate(rel) is not None

    def _check(self, path: Path, entry: FileEntry) -> None:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        digest = self._verified.get(key) or sha256_file(path)
        self._verified[key] = digest
        if entry.sha256 and digest != entry.sha256:
            raise DataError(
                f"Data file {path} is corrupt or a different version: sha256 {digest}, expected {entry.sha256}. "
                f"Replace it with the published file (see {entry.url or 'the task spec'})."
            )
        self.used[entry.path] = digest

    def fetch(self, entry: FileEntry | str) -> Path:
        """The path of the data file ``entry`` names, its sha256 verified: found locally, or downloaded
        when the entry has a URL and downloads are allowed. A wrong sha256 is a ``DataError`` naming
        the file; a missing file is one naming every place it was looked for and how to get it."""
        if isinstance(entry, str):
            entry = FileEntry(entry)
        path = self.locate(entry.path)
        if path is not None:
            self._check(path, entry)
            if entry.size is not None:
                declare_size(path, entry.size)
            return path
        if entry.url and self.allow_download:
            path = self._download(entry)
            if entry.size is not None:
                declare_size(path, entry.size)
            return path
        where = " or ".join(str(p) for p in self.candidates(entry.path)) or f"<data dir>/{entry.path}"
        how = (
            f" Download: {entry.url}"
            if entry.url
            else " It has no public download; obtain it as the task spec describes."
        )
        hint = "" if self.data_dir else " No data dir is set: pass --data-dir or set BENCHBENCH_DATA."
        raise DataError(
            f"Missing data file {entry.path!r} (sha256 {entry.sha256 or 'unknown'}). Put it at {where}.{how}{hint}"
        )

    def missing_help(self, entries: list[FileEntry]) -> str:
        """For files that are not there: each one's sha256, where to put it and where to get it
        (a file with no public download, such as STSb's, needs all three said)."""
        lines = []
        for e in entries:
            where = " or ".join(str(p) for p in self.candidates(e.path)) or f"<data dir>/{e.path}"
            src = f"download {e.url}" if e.url else "no public download: obtain it as the task spec describes"
            lines.append(f"  {e.path} (sha256 {e.sha256 or 'unknown'}): put it at {where}; {src}")
        hint = "" if self.data_dir else "\n  No data dir is set: pass --data-dir or set BENCHBENCH_DATA."
        return "\n".join(lines) + hint

    def _download(self, entry: FileEntry) -> Path:
        why = url_problem(entry.url)
        if why:  # urllib would also open file://, ftp:// and data: addresses
            raise DataError(f"Data file {entry.path!r}: download address {entry.url!r} is refused: {why}.")
        self.candidates(entry.path)  # refuses a path that would leave the cache
        target = self.cache_dir / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with (
                atomic_writer(target, root=self.cache_dir) as out,
                urllib.request.urlopen(entry.url, timeout=self.timeout) as resp,
            ):
                shutil.copyfileobj(resp, out)
                out.flush()
                digest = sha256_file(out.name)  # the temp file: a wrong download never takes the name
                if entry.sha256 and digest != entry.sha256:
                    raise DataError(
                        f"Downloaded {entry.url} for {entry.path!r} has sha256 {digest}, expected {entry.sha256}; "
                        f"not kept. Put a verified copy at {target}."
                    )
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            raise DataError(
                f"Missing data file {entry.path!r} (sha256 {entry.sha256 or 'unknown'}) and its download from "
                f"{entry.url} failed ({e}). Put it at {target}"
                + (f" or {self.data_dir / entry.path}" if self.data_dir else "")
                + "."
            ) from e
        self.used[entry.path] = digest
        return target
