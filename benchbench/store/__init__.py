"""Layer 2: what is kept on disk: data files (find, verify, download), result records, per-item
score files and locks. Imports only ``core``."""
