"""Built-in task specs: every ``*.toml`` in this package, registered like any plugin's specs."""

from pathlib import Path

from benchbench import hookimpl


@hookimpl
def benchbench_register_tasks(register):
    for spec in sorted(Path(__file__).parent.glob("*.toml")):
        if spec.name.startswith("_"):  # shared defaults, included by other specs
            continue
        register(spec.stem, spec)
