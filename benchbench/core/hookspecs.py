"""The hooks a benchbench plugin may implement (pluggy project name ``benchbench``).

Registration hooks receive a ``register`` callback instead of returning values, so one
plugin can register several things and errors point at the call that was wrong.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("benchbench")
"""Marks a function of this module as a hook specification; plugins never need it."""
hookimpl = pluggy.HookimplMarker("benchbench")
"""Marks a plugin's function as a hook implementation: ``@hookimpl`` above ``def benchbench_register_methods``.
A ``benchbench_`` name that matches no hook is an error, never silently ignored."""


@hookspec
def benchbench_register_methods(register):
    """Register training methods: ``register(name, MethodClass)``."""


@hookspec
def benchbench_register_tasks(register):
    """Register tasks and suites: ``register(name, TaskAdapter subclass)`` or ``register(name, path_to_spec.toml)``."""


@hookspec
def benchbench_register_adapters(register):
    """Register evaluation protocols (task kinds) that TOML specs can name: ``register(kind, TaskAdapter subclass)``."""


@hookspec
def benchbench_register_augmenters(register):
    """Register text augmenters / noise functions: ``register(name, callable(list[str], rng) -> list[str])``."""


@hookspec
def benchbench_register_taggers(register):
    """Register POS taggers for the relevance analysis: ``register(name, factory() -> tagger)``."""


@hookspec
def benchbench_register_loaders(register):
    """Register model-folder loaders: ``register(name, fn(encoder, path) -> encoder)``. A saved model
    whose head sentence-transformers cannot express writes ``{"loader": name}`` to
    ``benchbench_wrapper.json``; loading the folder calls the loader registered under that name.
    Only registered names are honoured, so a downloaded model folder cannot make benchbench
    import or call anything else."""


@hookspec
def benchbench_result_recorded(result):
    """Observe every result record just after it is written (exporters, loggers)."""


@hookspec
def benchbench_register_commands(register):
    """Add subcommands to ``benchbench``: ``register(name, help=...)`` returns an ``argparse`` parser;
    declare the options on it and ``set_defaults(func=handler)`` with ``handler(args) -> exit code``.
    Command modules load from the entry-point group ``benchbench.commands`` (kept apart from the
    method plugins' ``benchbench`` group so that ``--help`` never imports torch)."""
