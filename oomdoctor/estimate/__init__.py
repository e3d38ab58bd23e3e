"""Memory estimator: GPU and host memory of a fine-tuning set-up, derived from the model's shape.

One job per module: ``setup`` (the job), ``anatomy`` (what is read from a
shape), ``trainable``, ``weights``, ``optimizer``, ``activations``, ``logits``,
``objectives``, ``sharding``, ``overhead`` (the memory model), ``estimate`` (the
peak over the step's moments), ``whatif`` and ``from_facts``.
"""
from .derivation import Line
from .dtypes import nf4_bytes_per_param
from .estimate import COMPONENTS, Estimate, estimate
from .from_facts import Assumption, estimate_facts, setup_from_facts
from .optimizer import state_bytes_per_param
from .setup import Setup
from .sharding import zero_model_states
from .whatif import Option, Search, apply, max_batch_size, max_seq_len, min_gpus, search, smallest_gpu

__all__ = [
    "COMPONENTS", "Assumption", "Estimate", "Line", "Option", "Search", "Setup", "apply", "estimate", "estimate_facts",
    "max_batch_size", "max_seq_len", "min_gpus", "nf4_bytes_per_param", "search", "setup_from_facts",
    "smallest_gpu", "state_bytes_per_param", "zero_model_states",
]
