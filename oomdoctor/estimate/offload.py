"""Activation offloading: what autograd saves for backward moved to pinned host RAM, and back.

torchtune's ``OffloadActivations`` (``torchtune/training/_activation_offloading.py``,
``enable_activation_offloading: True``; axolotl's ``activation_offloading``
uses the same class) is a ``saved_tensors_hooks``: its pack hook copies every
saved tensor of at least ``min_offload_size`` = 1024 bytes that is not a
parameter into a pinned CPU tensor and drops the GPU one; the unpack hook
brings it back when backward needs it.  With ``use_streams`` (the default)
the copy runs on a side stream, so the ``max_fwd_stash_size`` = 5 tensors
offloaded last stay referenced on the GPU until their copy is done, and in
backward the next node's tensors are brought back while the current one
computes.  The output projection is excluded (``NoOpManager`` around it), so
the loss keeps what it keeps and lm_head's input stays.  Each pack copies the
tensor it is given, so a tensor saved by several ops (the norm output that
q, k and v read) is copied once per save: host RAM holds more than the GPU
freed (measured: 1.17-1.28 times in the CPU cases).

Under activation checkpointing the tensors saved outside the checkpointed
regions are each layer's input (torch's non-reentrant checkpoint saves it
through ``_CheckpointFrame.save_inputs``, which runs the active hooks), so
those are what goes to the host; without checkpointing, everything a layer
saves.  ``torch.autograd.graph.save_on_cpu`` does the same synchronously.

What stays on the GPU, per the rules above: under checkpointing the five
layer inputs offloaded last; without it, about one layer's saved set (its
last five tensors).  In backward one layer's set is brought back and the
next one prefetched.  The host holds everything moved, pinned, in every rank.
CPU-measured with ``save_on_cpu`` by ``bench/accuracy/measure_mechanisms.py``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .activations import Activations
from .derivation import Line, line
from .dtypes import GIB
from .setup import Setup

STASH = 5       # torchtune OffloadActivations(max_fwd_stash_size=5)


@dataclass(frozen=True)
class Offloaded:
    moved: float            # bytes of kept activations no longer on the GPU at the end of the forward pass
    brought_back: float     # held again in backward: the layer being computed and the prefetched one
    host: float             # pinned host bytes on one rank
    line: Line


def offloaded(setup: Setup, acts: Activations, layers: int) -> Offloaded:
    """What offloading moves, for ``acts`` of a set-up with ``layers`` trained layers."""
    if setup.grad_checkpointing:
        resident = min(STASH, layers) * acts.one_layer
    else:
        resident = acts.one_layer
    saved = acts.in_layers + acts.outside_saved
    moved = max(saved - resident, 0.0)
    said = line("offload.moved", gib=saved / GIB, resident=resident / GIB, host=saved / GIB,
                stash=STASH if setup.grad_checkpointing else 1)
    return Offloaded(moved, 2 * acts.one_layer, saved, said)
