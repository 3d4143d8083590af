"""Built-in method plugins (installed as ``benchbench_plugins``); each module is registered through
the ``benchbench`` entry-point group, exactly like a third-party plugin."""
