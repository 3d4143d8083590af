"""The conformance kit for plugin authors: ``from benchbench.testing import check_method``.

A public entry point kept at the package root (like ``benchbench`` itself); the kit lives in
``benchbench.run.conformance``, the run layer, because it trains and evaluates a method.
"""

from benchbench.run.conformance import *  # noqa: F403
from benchbench.run.conformance import __all__  # noqa: F401
