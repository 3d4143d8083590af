"""Layer 3: turning text into vectors: model resolution (HF ids, local folders, packaged offline
weights), the batched de-duplicated ``embed`` and its on-disk cache. Imports ``store`` and ``core``."""
