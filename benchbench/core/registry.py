"""Plugin loading. Built-in methods and tasks load exactly like third-party ones: through the
``benchbench`` entry-point group, plus an optional ``benchbench_plugin.py`` in the working directory."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from benchbench.core import hookspecs
from benchbench.core.errors import ConfigError, PluginError, UnknownNameError

ENTRY_POINT_GROUP = "benchbench"
BUILTIN_ADAPTERS = "benchbench.evaluate.adapters"
# model folders saved by benchbench 0.1 named a plugin classmethod; they load through the names
# those plugins register today
LEGACY_LOADER_NAMES = {
    "benchbench_plugins.bertflow:FlowEncoder.load_flow": "bertflow",
    "benchbench_plugins.trans_encoder:TransEncoderResult.reload": "trans-encoder",
}
# loaders registered by the deprecated ``benchbench.register_encoder_loader`` (import time); merged
# into every registry as if a plugin had registered them
IMPORT_TIME_LOADERS: dict[str, Any] = {}
LOCAL_PLUGIN_FILE = "benchbench_plugin.py"
_REGISTER_HOOKS = {
    "benchbench_register_methods": "methods",
    "benchbench_register_tasks": "tasks",
    "benchbench_register_adapters": "adapters",
    "benchbench_register_augmenters": "augmenters",
    "benchbench_register_taggers": "taggers",
    "benchbench_register_loaders": "loaders",
}
DISABLE_ENV = "BENCHBENCH_DISABLE_PLUGINS"


def disabled_plugins() -> set[str]:
    """Plugin (entry point) names listed in ``BENCHBENCH_DISABLE_PLUGINS`` (comma separated): they are
    not imported at all, e.g. to get past a broken third-party plugin without uninstalling it."""
    import os

    return {n.strip() for n in os.environ.get(DISABLE_ENV, "").split(",") if n.strip()}


def _disable_hint(name: str) -> str:
    others = sorted(disabled_plugins() | {name})
    return f"disable it with {DISABLE_ENV}={','.join(others)} (or uninstall or fix it)"


@dataclass
class Registry:
    """Everything the loaded plugins registered, and who registered it."""

    methods: dict[str, Any] = field(default_factory=dict)
    tasks: dict[str, Any] = field(default_factory=dict)  # name -> TaskSpec | TaskAdapter subclass
    suites: dict[str, Any] = field(default_factory=dict)  # name -> Suite
    adapters: dict[str, type] = field(default_factory=dict)
    augmenters: dict[str, Any] = field(default_factory=dict)
    taggers: dict[str, Any] = field(default_factory=dict)
    loaders: dict[str, Any] = field(default_factory=dict)  # model-folder loader name -> fn(encoder, path)
    broken: dict[str, str] = field(default_factory=dict)  # plugin that failed to import -> why (the rest still work)
    broken_specs: dict[str, str] = field(default_factory=dict)  # task spec that does not parse -> why (disabled)
    broken_names: dict[str, str] = field(default_factory=dict)  # name a broken spec seems to define -> that spec
    disabled: list[str] = field(default_factory=list)  # plugins skipped through BENCHBENCH_DISABLE_PLUGINS
    owner: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) -> plugin
    plugins: dict[str, list[str]] = field(default_factory=dict)  # plugin -> ["method tsdae", ...]
    pm: pluggy.PluginManager | None = None

    def _unknown(self, what: str, name: str, known) -> Exception:
        """Unknown name; when some plugin failed to import or some task spec failed to parse, say so:
        it may be the one providing it (a name seen in a broken spec names that spec alone)."""
        if what != "method" and name in self.broken_names:
            spec = self.broken_names[name]
            return ConfigError(
                f"{what.capitalize()} {name!r} is defined in task spec {spec}, which does not parse: "
                f"{self.broken_specs[spec]}."
            )
        if self.broken:
            listing = "; ".join(f"{p!r}: {m}" for p, m in self.broken.items())
            return PluginError(
                f"Unknown {what} {name!r}. Plugins that failed to import (one of them may provide it): {listing}"
            )
        if what != "method" and self.broken_specs:
            listing = "; ".join(self.broken_specs.values())
            return ConfigError(
                f"{UnknownNameError(what, name, known)} Task specs that do not parse are disabled (one of them "
                f"may define it): {listing}."
            )
        return UnknownNameError(what, name, known)

    def method(self, name: str):
        if name not in self.methods:
            raise self._unknown("method", name, self.methods)
        return self.methods[name]

    def wrapper_loader(self, name: str, model: str | Path) -> Any:
        """The loader a model folder names (``benchbench_wrapper.json`` or ``benchbench_encoder.json``).
        Only loaders that plugins registered (``benchbench_register_loaders``) resolve: a model folder
        is data, and data must not choose what code runs. The two ``"module:Class.method"`` names
        that folders saved by benchbench 0.1's bertflow and trans-encoder carry are aliases of the
        names those plugins register now (a fixed table, never an import)."""
        name = LEGACY_LOADER_NAMES.get(name, name) if isinstance(name, str) else name
        if isinstance(name, str) and name in self.loaders:
            return self.loaders[name]
        from benchbench.core.errors import ConfigError

        raise ConfigError(
            f"Model {str(model)!r}: its folder names loader {name!r}, which no loaded plugin "
            f"registers (registered: {sorted(self.loaders) or 'none'}). Install the plugin that saved this "
            f"model; benchbench never imports what a model folder names."
        )

    def adapter(self, kind: str) -> type:
        if kind not in self.adapters:
            raise UnknownNameError("adapter kind", kind, self.adapters)
        return self.adapters[kind]

    def task(self, name: str):
        if name not in self.tasks and not self._prefixed(name):
            raise self._unknown("task", name, list(self.tasks) + list(self.suites))
        return self.tasks[name]

    def _prefixed(self, name: str) -> bool:
        """A task named ``<prefix>:<rest>`` (``mteb:STSBenchmark``) that an adapter class resolves
        (its ``task_prefix`` and ``prefixed_task(rest) -> TaskSpec``): catalogues too large to list as
        specs. Resolved once, then kept like a registered task; an unknown rest is the adapter's error."""
        prefix, sep, rest = name.partition(":")
        if not sep or not rest:
            return False
        if not self.adapters:  # ``registry_summary()`` (names only): the full registry resolves or refuses it
            return True
        for cls in self.adapters.values():
            if getattr(cls, "task_prefix", None) == prefix:
                self.tasks[name] = cls.prefixed_task(rest)
                return True
        return False

    def expand(self, names: str | list[str]) -> list[str]:
        """Expand a comma list of suite and task names into task names, keeping order, no repeats."""
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",") if n.strip()]
        out: list[str] = []
        for n in names:
            if n in self.suites:
                members = self.suites[n].tasks
            elif n in self.tasks or self._prefixed(n):
                members = [n]
            else:
                raise self._unknown("task or suite", n, list(self.tasks) + list(self.suites))
            out.extend(m for m in members if m not in out)
        return out

    def suites_of(self, task: str) -> list[str]:
        return [s for s, suite in self.suites.items() if task in suite.tasks]


def _plugin_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager("benchbench")
    pm.add_hookspecs(hookspecs)
    return pm


def _check_hook_names(plugin: Any, name: str) -> None:
    """Reject functions that look like hook implementations but match no hook (a misspelling
    would otherwise be silently ignored and the plugin would register nothing)."""
    valid = {n for n in dir(hookspecs) if n.startswith("benchbench_")}
    for attr, value in inspect.getmembers(plugin):
        if attr.startswith("benchbench_") and callable(value) and attr not in valid:
            import difflib

            close = difflib.get_close_matches(attr, valid, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise PluginError(f"Plugin {name!r} defines {attr!r}, which is not a benchbench hook.{hint}")


def _register_plugin(pm: pluggy.PluginManager, plugin: Any, name: str) -> None:
    _check_hook_names(plugin, name)
    try:
        pm.register(plugin, name=name)
    except (pluggy.PluginValidationError, ValueError) as e:
        raise PluginError(f"Plugin {name!r} is invalid: {e}") from e


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)


def load_registry(
    extra_plugins: list[tuple[str, Any]] | None = None, local_dir: str | Path | None = None, strict: bool = False
) -> Registry:
    """Load every plugin and collect what it registers. ``extra_plugins`` ((name, module) pairs)
    is for tests and embedding applications. A plugin that fails to import is reported (a warning
    naming it and how to disable it; ``Registry.broken``) and left out, so that commands that do
    not need it still work; ``strict`` makes it an error instead."""
    import logging
    import os

    pm = _plugin_manager()
    # the built-in task adapters are a plugin like any other: core knows it by module name only
    # (as it knows entry points), so the contract layer never imports an evaluation layer
    builtin_adapters = importlib.import_module(BUILTIN_ADAPTERS)

    broken: dict[str, str] = {}
    disabled = disabled_plugins()
    skipped: list[str] = []
    _register_plugin(pm, builtin_adapters, BUILTIN_ADAPTERS)
    for ep in _entry_points():
        if ep.name in disabled:
            skipped.append(ep.name)
            continue
        try:
            module = ep.load()
        except Exception as e:
            msg = (
                f"Plugin {ep.name!r} (entry point {ep.value!r} from {ep.dist.name if ep.dist else '?'}) failed to import: "
                f"{type(e).__name__}: {e}; {_disable_hint(ep.name)}"
            )
            if strict:
                raise PluginError(msg) from e
            broken[ep.name] = msg
            logging.getLogger(__name__).warning("%s. Commands that do not need it still work.", msg)
            continue
        _register_plugin(pm, module, ep.name)
    local = Path(local_dir or Path.cwd()) / LOCAL_PLUGIN_FILE
    if "local" in disabled:
        skipped.append("local")
    elif local.is_file() and os.environ.get(DISABLE_ENV, "").strip() != "*":
        spec = importlib.util.spec_from_file_location("benchbench_local_plugin", local)
        module = importlib.util.module_from_spec(spec)
        sys.modules["benchbench_local_plugin"] = module
        try:
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        except Exception as e:
            raise PluginError(f"Local plugin {local} failed to import: {type(e).__name__}: {e}") from e
        _register_plugin(pm, module, str(local))
    for name, module in extra_plugins or []:
        _register_plugin(pm, module, name)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as e:
        raise PluginError(f"Plugin {e.plugin_name!r}: {e}") from e
    reg = Registry(pm=pm, broken=broken, disabled=skipped)
    for name in pm.list_name_plugin():
        reg.plugins.setdefault(name[0], [])
    # adapters first: TOML task specs name an adapter kind
    for hook in [
        "benchbench_register_adapters",
        "benchbench_register_methods",
        "benchbench_register_augmenters",
        "benchbench_register_taggers",
        "benchbench_register_loaders",
        "benchbench_register_tasks",
    ]:
        for impl in getattr(pm.hook, hook).get_hookimpls():  # registration order: built-ins first
            _call_register(reg, hook, impl.plugin_name, impl.function, strict)
    for name, fn in IMPORT_TIME_LOADERS.items():
        reg.loaders.setdefault(name, fn)
        reg.owner.setdefault(("loaders", name), "register_encoder_loader")
    _register_task_path(reg, strict)
    return reg


TASK_PATH_ENV = "BENCHBENCH_TASK_PATH"


def _register_task_path(reg: Registry, strict: bool = False) -> None:
    """A task added by one TOML file, no plugin: ``BENCHBENCH_TASK_PATH`` lists spec files or folders
    of ``*.toml`` (separated by ``os.pathsep``); each file registers like a plugin's spec file."""
    import os

    for entry in filter(None, os.environ.get(TASK_PATH_ENV, "").split(os.pathsep)):
        p = Path(entry).expanduser()
        if p.is_dir():
            files = sorted(f for f in p.glob("*.toml") if not f.name.startswith("_"))
        elif p.is_file():
            files = [p]
        else:
            raise PluginError(f"{TASK_PATH_ENV}: {entry!r} is neither a spec file nor a folder of them.")
        for f in files:
            fix = f"take it out of {TASK_PATH_ENV}"
            _register_spec_file(reg, f.resolve(), f"{TASK_PATH_ENV}:{f}", fix, strict)


def _register_spec_file(reg: Registry, path: Path, owner: str, fix: str, strict: bool) -> None:
    """Register the tasks and suites of one spec file. A file that does not parse (TOML syntax,
    encoding) disables only its own tasks: a warning names the file, the line, the error and ``fix``,
    and asking for one of its tasks later names it (``strict``: an error at once). A file that parses
    but is wrong (unknown keys, an unsafe data path) stays an error: its author meant something else."""
    import logging

    from benchbench.core.tasks import SpecParseError, guess_names, load_spec_file

    try:
        specs, suites = load_spec_file(path, reg)
    except SpecParseError as e:
        where = f"line {e.line} of {e.path.name}" if e.line else str(e.path.name)
        why = f"{e}. To fix: correct {where}, or {fix}"
        if strict:
            raise PluginError(f"{owner}: {why}.") from e
        names = [n for n in guess_names(path) if n not in reg.tasks and n not in reg.suites]
        reg.broken_specs[str(path)] = why
        for n in names:
            reg.broken_names.setdefault(n, str(path))
        logging.getLogger(__name__).warning(
            "%s. Its tasks (%s) are disabled; the other tasks still work.", why, ", ".join(names) or "none found"
        )
        return
    for t in specs:
        _put(reg, "tasks", t.name, t, owner)
    for s in suites:
        _put(reg, "suites", s.name, s, owner)


def _call_register(reg: Registry, hook: str, plugin_name: str, fn, strict: bool = False) -> None:
    kind = _REGISTER_HOOKS[hook]

    def register(name: str, obj: Any) -> None:
        if not isinstance(name, str) or not name:
            raise PluginError(f"Plugin {plugin_name!r} registered a {kind[:-1]} with an invalid name {name!r}.")
        if kind == "tasks" and isinstance(obj, (str, Path)):
            spec_path = Path(obj)
            if not spec_path.is_absolute():  # relative to the registering plugin's module, not the working dir
                spec_path = _plugin_dir(fn) / spec_path
            fix = f"update the plugin {plugin_name!r} that registers it ({_disable_hint(plugin_name)})"
            _register_spec_file(reg, spec_path, plugin_name, fix, strict)
            return
        if kind == "methods":
            from benchbench.core.methods import validate_method_class

            validate_method_class(obj, name, plugin_name)
        _put(reg, kind, name, obj, plugin_name)

    try:
        fn(register=register)
    except PluginError:
        raise
    except Exception as e:
        raise PluginError(f"Plugin {plugin_name!r} raised in {hook}: {type(e).__name__}: {e}") from e


def _plugin_dir(fn: Any) -> Path:
    """The folder of the module that defines hook function ``fn``."""
    try:
        return Path(inspect.getfile(fn)).resolve().parent
    except (TypeError, OSError):
        return Path.cwd()


def _put(reg: Registry, kind: str, name: str, obj: Any, plugin_name: str) -> None:
    table = getattr(reg, kind)
    if name in table:
        raise PluginError(
            f"Plugin {plugin_name!r} registers {kind[:-1]} {name!r}, already registered by {reg.owner[(kind, name)]!r}."
        )
    table[name] = obj
    reg.owner[(kind, name)] = plugin_name
    reg.plugins.setdefault(plugin_name, []).append(f"{kind[:-1]} {name}")


_REGISTRY: Registry | None = None


def get_registry() -> Registry:
    """The registry of every loaded plugin, loaded on the first call and the same object after it.
    Every caller in a process sees the same registrations; ``reset_registry`` forgets them (tests)."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = load_registry()
    return _REGISTRY


def reset_registry() -> None:
    global _REGISTRY
    _REGISTRY = None


def make_adapter(reg: Registry, task: str, data: Any) -> Any:
    """The task adapter for ``task``: a registered adapter class with its spec, or the adapter of the
    kind a task spec (TOML) names, reading through ``data`` (a ``benchbench.store.data.DataStore``).
    Here, beside the registry, because every caller (the runner, chained methods, plugins, reports,
    benches) resolves a task the same way."""
    from benchbench.core.tasks import spec_for_adapter_class

    entry = reg.task(task)
    if isinstance(entry, type):
        return entry(spec_for_adapter_class(task, entry), data)
    return reg.adapter(entry.kind)(entry, data)


def call_observers(result: dict, reg: Registry | None = None) -> None:
    """Hand a just-written record to every ``benchbench_result_recorded`` implementation of ``reg``
    (the registry the run used; default, or one without plugins loaded: the global one). An
    observer's error names its plugin."""
    if reg is None or reg.pm is None:
        reg = get_registry()
    assert reg.pm is not None
    for impl in reg.pm.hook.benchbench_result_recorded.get_hookimpls():
        try:
            impl.function(result=result)
        except Exception as e:
            raise PluginError(
                f"Plugin {impl.plugin_name!r} raised in benchbench_result_recorded: {type(e).__name__}: {e}"
            ) from e


# ---- a fast summary for `list` and `plugins` ------------------------------------------------------
# Importing the method plugins imports torch (seconds). `benchbench list` / `plugins` only need names
# and a few attributes, so the first full load writes them to a small manifest in the user cache,
# keyed by everything that could change them (entry points and their versions, the size and mtime of
# every plugin module, spec file and benchbench source file, the local plugin file, the task path and
# the disable list); later calls read the manifest and import no plugin. A manifest with a broken
# plugin is never reused (the fix may be a newly installed dependency, which changes no key input),
# nor one with a broken task spec (each command must warn about it again).
MANIFEST_VERSION = 3  # 2: methods carry their options, default_model, fixed_model; 3: option types


def _summary_key() -> str:
    import hashlib
    import importlib.util
    import os

    h = hashlib.sha256(
        f"v{MANIFEST_VERSION}|{sys.version}|{os.environ.get(DISABLE_ENV, '')}|"
        f"{os.environ.get(TASK_PATH_ENV, '')}|{Path.cwd()}".encode()
    )
    files: set[Path] = set()
    folders: set[Path] = set()
    here = Path(__file__).resolve().parent.parent
    # the benchbench code that decides what a plugin registers (spec parsing, method checks, adapters)
    for pattern in ("core/*.py", "evaluate/adapters/*.py", "resources/*.toml"):
        files.update(here.glob(pattern))
    for ep in _entry_points():
        h.update(
            f"{ep.name}={ep.value}|{ep.dist.name if ep.dist else ''}={ep.dist.version if ep.dist else ''}\n".encode()
        )
        try:
            spec = importlib.util.find_spec(ep.value.split(":")[0])  # imports parent packages only
        except Exception:
            spec = None
        if spec is not None and spec.origin:
            folders.add(Path(spec.origin).parent)
    for folder in folders:  # a plugin's modules and spec files (and their include files one level down)
        for pattern in ("*.py", "*.toml", "*/*.toml"):
            files.update(folder.glob(pattern))
    files.add(Path.cwd() / LOCAL_PLUGIN_FILE)
    for entry in filter(None, os.environ.get(TASK_PATH_ENV, "").split(os.pathsep)):
        p = Path(entry).expanduser()
        files.update(p.glob("*.toml") if p.is_dir() else [p])
    for f in sorted(files):
        try:
            st = f.stat()
            h.update(f"{f}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        except OSError:
            h.update(f"{f}|-\n".encode())
    return h.hexdigest()[:24]


def _option_types(cfg_cls: type) -> dict[str, str]:
    import typing

    from benchbench.core.methods import type_token

    try:
        hints = typing.get_type_hints(cfg_cls)
    except Exception:  # an annotation that does not resolve: its values are checked after the load
        return {}
    return {f.name: type_token(hints[f.name]) for f in dataclasses.fields(cfg_cls) if f.name in hints}


def _summarise(reg: Registry) -> dict[str, Any]:
    return {
        "methods": {
            n: {
                "trains": bool(getattr(c, "trains", True)),
                "description": str(getattr(c, "description", "") or ""),
                # for `run`'s checks before torch loads: --set keys, and whether --model matters
                "options": [f.name for f in dataclasses.fields(c.Config)],  # a dataclass: validate_method_class
                "option_types": _option_types(c.Config),  # --set values are converted before torch loads
                "default_model": getattr(c, "default_model", None),
                "fixed_model": getattr(c, "fixed_model", None),
            }
            for n, c in reg.methods.items()
        },
        "tasks": {
            n: {
                "kind": str(getattr(t, "kind", "?")),
                "splits": list(getattr(t, "splits", []) or []),
                "main_metric": str(getattr(t, "main_metric", "") or ""),
            }
            for n, t in reg.tasks.items()
        },
        "suites": {
            n: {
                "tasks": list(s.tasks),
                "description": str(getattr(s, "description", "") or ""),
                "notes": list(getattr(s, "notes", []) or []),
            }
            for n, s in reg.suites.items()
        },
        "owner": [[k, n, p] for (k, n), p in reg.owner.items()],
        "plugins": reg.plugins,
        "broken": reg.broken,
        "broken_specs": reg.broken_specs,
        "broken_names": reg.broken_names,
        "disabled": reg.disabled,
    }


def registry_summary() -> Registry:
    """A ``Registry`` whose entries are plain namespaces (name, kind, splits, description, ...), for
    commands that only print names: from the manifest when it is current, else from a full load
    (which refreshes it). Never use it to run anything."""
    import json
    import os
    import tempfile
    from types import SimpleNamespace

    from benchbench.core.paths import default_data_cache

    path = default_data_cache().parent / f"registry-{_summary_key()}.json"
    data = None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    if not isinstance(data, dict) or data.get("version") != MANIFEST_VERSION:
        data = {"version": MANIFEST_VERSION, **_summarise(get_registry())}
        if not data["broken"] and not data["broken_specs"]:  # reused, it would hide their warnings
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".registry-", suffix=".tmp")
                with os.fdopen(fd, "w") as f:
                    json.dump(data, f)
                os.replace(tmp, path)
            except OSError:  # a cache that cannot be written only costs speed
                pass
    ns = SimpleNamespace
    return Registry(
        methods={n: ns(name=n, **v) for n, v in data["methods"].items()},
        tasks={n: ns(name=n, **v) for n, v in data["tasks"].items()},
        suites={n: ns(name=n, **v) for n, v in data["suites"].items()},
        owner={(k, n): p for k, n, p in data["owner"]},
        plugins=data["plugins"],
        broken=data["broken"],
        broken_specs=data.get("broken_specs", {}),
        broken_names=data.get("broken_names", {}),
        disabled=data["disabled"],
    )
