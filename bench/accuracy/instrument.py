"""Exact byte accounting of one training step on CPU (needs torch).

Two instruments run together:

* ``Tracker``, a ``TorchDispatchMode``, sees every tensor an aten op creates
  and, through a weak reference to its untyped storage, when that storage is
  freed.  It keeps the live bytes of every storage created while it is active
  (plus a constant for what existed before: parameters, buffers and the batch),
  labelled by phase (forward, backward, optimizer step) and scope (decoder
  layer, loss, autocast's copies of weights, recomputation under gradient
  checkpointing), so it gives what is alive at the end of the forward pass,
  the largest working set of the loss and of a recomputed layer, and the
  step's peak: CPU's counterpart of ``torch.cuda.max_memory_allocated`` at
  tensor granularity (no allocator rounding, no kernel-internal workspaces).
* ``torch.autograd.graph.saved_tensors_hooks``, which sees every tensor
  autograd saves for backward, deduplicated by untyped storage ``data_ptr``,
  parameters and buffers left out.  Without gradient checkpointing the two
  must agree; with Hugging Face's (non-reentrant) checkpointing the saved
  tensors are hidden by torch's own hooks, and the kept layer inputs are held
  by the recomputation closure, so only the tracker sees them.

Dropout: on CUDA ``at::dropout`` dispatches to ``native_dropout`` (a bool mask
saved for backward); on CPU it multiplies by a float noise tensor instead.
``cuda_like_dropout`` routes ``F.dropout`` to ``torch.native_dropout`` so the
CPU run saves what a GPU run saves.
"""
from __future__ import annotations

import contextlib
import weakref
from collections import defaultdict
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

_ORIGINAL_DROPOUT = F.dropout


def _native_dropout(input, p=0.5, training=True, inplace=False):
    if training and 0.0 < p < 1.0 and input.numel():
        return torch.native_dropout(input, p, True)[0]
    return _ORIGINAL_DROPOUT(input, p, training, inplace)


@contextlib.contextmanager
def cuda_like_dropout():
    F.dropout = _native_dropout
    try:
        yield
    finally:
        F.dropout = _ORIGINAL_DROPOUT


def storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind ``tensors`` (tied or viewed storages once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.numel():
            st = t.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


class Tracker(TorchDispatchMode):
    """Live bytes of storages created while active, by label, with the peak and named windows."""

    def __init__(self, pre_existing: int, pre_ptrs: set[int], param_ptrs: set[int]):
        super().__init__()
        self.pre = pre_existing
        self.pre_ptrs = set(pre_ptrs)
        self.param_ptrs = set(param_ptrs)
        self.live = 0
        self.live_nc = 0                 # live bytes less autocast's weight copies (what the windows watch)
        self.by_label: dict[str, int] = defaultdict(int)
        self._refs: dict[int, tuple[Any, int, str]] = {}
        self.phase = "fwd"
        self.scope = "outside"
        self.peak = 0
        self.peak_phase = ""
        self.peak_labels: dict[str, int] = {}
        self.windows: dict[str, list[int]] = {}      # name -> [start, max]
        self.group_max: dict[str, int] = defaultdict(int)
        self.phase_peak: dict[str, int] = {}

    # ------------------------------------------------------------------ labels
    def label(self) -> str:
        if self.phase == "bwd" and torch.is_grad_enabled():
            return f"recompute:{self.scope}"
        return f"{self.phase}:{self.scope}"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        label = self.label()
        if func is torch.ops.aten._to_copy.default and isinstance(args[0], torch.Tensor) and args[0].numel() \
                and args[0].untyped_storage().data_ptr() in self.param_ptrs:
            label = f"{self.phase}:weight_copy"
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self._track(t, label)
        return out

    def _track(self, t: torch.Tensor, label: str) -> None:
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        n = st.nbytes()
        if not n or st.data_ptr() in self.pre_ptrs or id(st) in self._refs:
            return
        key = id(st)

        def freed(_ref, key=key):
            entry = self._refs.pop(key, None)
            if entry is not None:
                self.live -= entry[1]
                self.by_label[entry[2]] -= entry[1]
                if not entry[2].endswith("weight_copy"):
                    self.live_nc -= entry[1]

        self._refs[key] = (weakref.ref(st, freed), n, label)
        self.live += n
        self.by_label[label] += n
        if not label.endswith("weight_copy"):
            self.live_nc += n
        total = self.pre + self.live
        if total > self.phase_peak.get(self.phase, 0):
            self.phase_peak[self.phase] = total
        if total > self.peak:
            self.peak = total
            self.peak_phase = self.phase
            self.peak_labels = {k: v for k, v in self.by_label.items() if v}
        for w in self.windows.values():
            if self.live_nc > w[1]:
                w[1] = self.live_nc
        group = label.split(":")[0]
        if group == "recompute":
            live = sum(v for k, v in self.by_label.items() if k.startswith("recompute:"))
            self.group_max["recompute"] = max(self.group_max["recompute"], live)

    # ------------------------------------------------------------------ queries
    def open(self, name: str) -> None:
        self.windows[name] = [self.live_nc, self.live_nc]

    def close(self, name: str) -> int:
        start, top = self.windows.pop(name)
        return top - start

    def live_where(self, pred: Callable[[str], bool]) -> int:
        return sum(v for k, v in self.by_label.items() if pred(k))

    def live_storages(self, pred: Callable[[str], bool]) -> list[tuple[int, str]]:
        out = []
        for ref, n, label in self._refs.values():
            if pred(label) and ref() is not None:
                out.append((n, label))
        return out

    def reset_peak(self) -> None:
        self.peak = self.pre + self.live
        self.peak_phase = self.phase
        self.peak_labels = {k: v for k, v in self.by_label.items() if v}
        self.group_max.clear()
        self.phase_peak.clear()


class SavedTensors:
    """Bytes autograd saves for backward, deduplicated by storage, parameters and buffers left out."""

    def __init__(self, skip_ptrs: set[int], scope: Callable[[Any], str]):
        self.skip = set(skip_ptrs)
        self.scope = scope
        self.seen: dict[int, tuple[int, str, tuple, torch.dtype]] = {}

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        if t.numel():
            st = t.untyped_storage()
            ptr = st.data_ptr()
            if ptr not in self.skip and ptr not in self.seen:
                self.seen[ptr] = (st.nbytes(), self.scope(st), tuple(t.shape), t.dtype)
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)

    def total(self, pred: Callable[[str], bool] = lambda s: True) -> int:
        return sum(n for n, scope, _, _ in self.seen.values() if pred(scope))


def graph_saved(root: torch.Tensor, skip_ptrs: set[int]) -> dict[int, tuple[int, str, tuple, torch.dtype]]:
    """Storages the autograd graph behind ``root`` holds for backward, by ``data_ptr``, ``skip_ptrs`` left out.

    Walks ``grad_fn`` and its ``next_functions``: an aten node exposes what it saved as ``_saved_*``
    attributes, a Python node (``torch.autograd.Function``, which is what a ``torch.compile``'d graph
    becomes: ``CompiledFunctionBackward``) as ``saved_tensors``.  Neither the ``Tracker`` (inductor's
    kernels allocate outside the dispatcher) nor saved-tensor hooks see inside a compiled graph; this does.
    """
    seen: dict[int, tuple[int, str, tuple, torch.dtype]] = {}
    stack, visited = [root.grad_fn], set()
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in visited:
            continue
        visited.add(id(fn))
        found: list[Any] = []
        try:
            found += list(fn.saved_tensors)
        except (AttributeError, RuntimeError):
            pass
        for name in dir(fn):
            if name.startswith("_saved_"):
                try:
                    value = getattr(fn, name)
                except RuntimeError:
                    continue
                found += list(value) if isinstance(value, (list, tuple)) else [value]
        for t in found:
            if isinstance(t, torch.Tensor) and t.numel():
                st = t.untyped_storage()
                if st.data_ptr() not in skip_ptrs:
                    seen.setdefault(st.data_ptr(), (st.nbytes(), fn.name(), tuple(t.shape), t.dtype))
        stack += [f for f, _ in fn.next_functions]
    return seen
