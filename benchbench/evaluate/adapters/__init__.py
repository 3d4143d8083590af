"""Built-in evaluation protocols. Every module here that defines a ``TaskAdapter`` subclass with a
``kind`` is registered under that kind, so adding a protocol is adding a module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from benchbench.core.hookspecs import hookimpl
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult

__all__ = ["TaskAdapter", "TaskResult"]


@hookimpl
def benchbench_register_adapters(register):
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, TaskAdapter) and cls.__module__ == module.__name__ and cls.kind:
                register(cls.kind, cls)
