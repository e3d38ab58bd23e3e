"""Memory that no tensor accounts for: the CUDA context, the allocator's reserve, host processes.

* CUDA context: the driver's per-process state and the loaded kernels, which
  nvidia-smi shows and ``torch.cuda.memory_reserved`` does not.  Reports range
  from about 0.3 to 2 GB with GPU, driver and libraries (pytorch/pytorch#34323
  shows 781 MB for an empty program before lazy module loading); 0.5 GiB is
  assumed and stated with every estimate.
* Caching-allocator reserve: memory PyTorch has reserved but not allocated at
  the peak.  In the 13 CUDA OOM messages of this project's corpus
  (tests/corpus/*.log) "reserved by PyTorch but unallocated" was 0–109 % of
  "allocated by PyTorch", median 9.4 %; in the 8 single-GPU runs of
  bench/accuracy/published.yaml that publish both the peak allocated and the
  peak nvidia-smi figure, (nvidia-smi − 0.5 GiB context) / allocated − 1 has a
  median of 11 %: 10 % is used.  Sharded runs (FSDP, DeepSpeed ZeRO-3) gather
  and reduce-scatter on a side stream in buffers of varying size, and hold
  more: in the 13 sharded pairs there (11 FSDP runs of fms-acceleration, two of
  Answer.AI's with peak reserved beside peak allocated) the median is 24 %,
  which is used for them (``ALLOCATOR_RESERVE_SHARDED``).
* Host RAM per training process: importing torch + transformers + peft takes
  0.34 GiB of resident memory (measured, CPU build of torch 2.13); the CUDA
  runtime's host side and its kernel libraries add more.  2 GiB per rank is
  assumed.
"""
from __future__ import annotations

CUDA_CONTEXT_GIB = 0.5
ALLOCATOR_RESERVE = 0.10
ALLOCATOR_RESERVE_SHARDED = 0.24
HOST_PROCESS_GIB = 2.0
