"""Layer 2: what is kept on disk: data files (find, verify, download), result records, per-item
score files and locks, all written through the one set of file primitives (``files``: sha256, atomic
writes that never follow a symlink, ``.complete`` markers, slugs). Imports only ``core``."""
