"""benchbench: a benchmark harness with pluggable trainers for unsupervised sentence embeddings.

The public API a plugin may import: ``hookimpl``, ``Method``, ``TrainContext``, ``Encoder``,
``TaskAdapter``, ``TaskResult``, ``Embedder``, ``metrics``, ``load_encoder``, ``TransformerEncoder``.
"""
from .adapters.base import TaskAdapter, TaskResult
from .encoding import Embedder, Encoder, embed
from .hookspecs import hookimpl
from .methods import Method, TrainContext
from .models import TransformerEncoder, load_encoder, tiny_bert

__version__ = "0.1.0"
__all__ = ["hookimpl", "Method", "TrainContext", "Encoder", "Embedder", "embed", "TaskAdapter", "TaskResult",
           "TransformerEncoder", "load_encoder", "tiny_bert", "__version__"]
