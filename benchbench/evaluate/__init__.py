"""Layer 4: the evaluation protocols (task adapters), metrics, per-item score maths and analyses
(POS relevance). Imports ``encode``, ``store`` and ``core``."""
