"""Memory that no tensor accounts for: the CUDA context, the allocator's reserve, host processes.

* CUDA context: the driver's per-process state and the loaded kernels, which
  nvidia-smi shows and ``torch.cuda.memory_reserved`` does not.  Reports range
  from about 0.3 to 2 GB with GPU, driver and libraries (pytorch/pytorch#34323
  shows 781 MB for an empty program before lazy module loading); 0.5 GiB is
  assumed and stated with every estimate.
* Caching-allocator reserve: memory PyTorch has reserved but not allocated at
  the peak.  In the 13 CUDA OOM messages of this project's corpus
  (tests/corpus/*.log) "reserved by PyTorch but unallocated" was 0–109 % of
  "allocated by PyTorch", median 9.4 %; 10 % is used.
* Host RAM per training process: importing torch + transformers + peft takes
  0.34 GiB of resident memory (measured, CPU build of torch 2.13); the CUDA
  runtime's host side and its kernel libraries add more.  2 GiB per rank is
  assumed.
"""
from __future__ import annotations

CUDA_CONTEXT_GIB = 0.5
ALLOCATOR_RESERVE = 0.10
HOST_PROCESS_GIB = 2.0
