"""Layer 1 (bottom): the contracts every other layer builds on: hookspecs, the plugin registry,
the method and task contracts, option parsing of values, errors. Imports nothing else of benchbench."""
