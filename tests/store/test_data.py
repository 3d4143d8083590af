"""Finding data: data dir, cache, checksummed download from a local HTTP server; clear errors."""

from __future__ import annotations

import hashlib
import http.server
import threading
from functools import partial

import pytest
from helpers import FIXTURES

from benchbench.core.errors import DataError
from benchbench.store.data import DataStore, FileEntry

REL = "sts_mini/STS.gs.A.txt"
SHA = hashlib.sha256((FIXTURES / REL).read_bytes()).hexdigest()


@pytest.fixture
def http_server():
    """Serves tests/fixtures on 127.0.0.1 (what a user online downloads from)."""
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(FIXTURES))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_data_dir_first(tmp_path):
    store = DataStore(FIXTURES, cache_dir=tmp_path / "cache")
    assert store.fetch(FileEntry(REL, SHA)) == FIXTURES / REL
    assert store.used[REL] == SHA


def test_env_var_sets_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCHBENCH_DATA", str(FIXTURES))
    assert DataStore(cache_dir=tmp_path).locate(REL) == FIXTURES / REL


def test_missing_file_error_names_file_sha_and_place(tmp_path):
    (tmp_path / "data").mkdir()
    store = DataStore(tmp_path / "data", cache_dir=tmp_path / "cache", allow_download=False)
    with pytest.raises(DataError) as e:
        store.fetch(FileEntry("useb/x/test.txt", "ab" * 32))
    msg = str(e.value)
    assert "useb/x/test.txt" in msg and "ab" * 32 in msg and str(tmp_path / "data" / "useb/x/test.txt") in msg


def test_corrupt_file_is_an_error(tmp_path):
    (tmp_path / "sts_mini").mkdir()
    (tmp_path / REL).write_text("1\n2\n999\n\n")
    with pytest.raises(DataError, match=rf"{REL} is corrupt.*expected {SHA}"):
        DataStore(tmp_path, cache_dir=tmp_path / "cache").fetch(FileEntry(REL, SHA))


def test_nonexistent_data_dir_is_an_error(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        DataStore(tmp_path / "nope")


def test_download_verifies_and_caches(http_server, tmp_path):
    store = DataStore(None, cache_dir=tmp_path / "cache")
    path = store.fetch(FileEntry(REL, SHA, f"{http_server}/{REL}"))
    assert path == tmp_path / "cache" / REL and path.read_bytes() == (FIXTURES / REL).read_bytes()
    # second time it is found in the cache, no server needed
    assert DataStore(None, cache_dir=tmp_path / "cache", allow_download=False).fetch(FileEntry(REL, SHA)) == path


def test_download_with_wrong_checksum_is_not_kept(http_server, tmp_path):
    store = DataStore(None, cache_dir=tmp_path / "cache")
    with pytest.raises(DataError, match="sha256 .* expected 00+; not kept"):
        store.fetch(FileEntry(REL, "0" * 64, f"{http_server}/{REL}"))
    assert not (tmp_path / "cache" / REL).exists()
    assert not list((tmp_path / "cache").rglob(".download-*"))


def test_failed_download_says_where_to_put_the_file(http_server, tmp_path):
    with pytest.raises(DataError, match=r"download from .*/nothing-here.txt failed.*Put it at"):
        DataStore(None, cache_dir=tmp_path / "cache").fetch(
            FileEntry("x/nothing-here.txt", "1" * 64, f"{http_server}/nothing-here.txt")
        )


def test_gz_reading_roundtrips_and_a_broken_file_is_named(tmp_path):
    import gzip

    from benchbench.store.data import open_text, read_bytes

    text = "id\tt\u00edtulo\n" * 1000
    f = tmp_path / "x.txt.gz"
    with gzip.open(f, "wt", encoding="utf-8") as g:
        g.write(text)
    assert read_bytes(f).decode("utf-8") == text
    with open_text(f) as h:
        assert h.read() == text
    plain = tmp_path / "x.txt"
    plain.write_text(text, encoding="utf-8")
    assert read_bytes(plain) == text.encode("utf-8")
    bad = tmp_path / "bad.jsonl.gz"
    whole = gzip.compress(bytes(range(256)) * 64)
    bad.write_bytes(whole[: len(whole) // 2])  # truncated
    with pytest.raises(DataError, match="bad.jsonl.gz"):
        read_bytes(bad)
    bad.write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match="bad.jsonl.gz"):
        read_bytes(bad)
