"""Layer 5: the one training loop (device, AMP, seed, budget, checkpoints, exact resume), the
method context, training corpora, noise and views, setups. Imports the layers below it."""
