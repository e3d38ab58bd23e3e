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
  median of 11 %: 10 % is used, for every strategy.
* Side-stream buffers (ZeRO-3, FSDP over more than one GPU): each layer's
  parameters are gathered into a buffer on a side stream and freed after the
  layer has run, and its gradients are produced and reduce-scattered through
  another; blocks freed on one stream are cached for that stream and are held
  until the computing stream's recorded use is over.  What these runs reserve
  beyond the 10 % follows those buffers, not the activations:
  - in the 13 sharded pairs of published.yaml (11 FSDP runs of
    fms-acceleration, two of Answer.AI's), the reserve beyond 10 % of the
    measured allocated peak, summed over the pairs, is 2.01 times the
    buffers' bytes summed (the two gathered layers and one layer's gradients,
    as ``sharding`` counts them; the root unit, gathered once a step, left
    out); the median of the eight set-ups' ratios is 1.7.  So
    ``SIDE_STREAM_RESERVE`` = 2: about two more copies of what is in flight.
    The pairs scatter widely (0.01 to 11 times the buffers), so this is a
    central figure, not a law;
  - where only the batch differs, the reserve grew by +15 %, +10 %, +26 %
    and -21 % of the allocated growth in four FSDP pairs (median +13 %) and
    by +27 %, +29 % and +12 % in three single-GPU pairs (median +27 %):
    activations draw no more reserve when the model is sharded.  The old
    rule (24 % of the whole peak for sharded runs, the median of these
    pairs' reserve over allocated) therefore overstated it wherever
    activations dominate, and put ZeRO-3 above ZeRO-2 for the same set-up
    (Llama-3-8B on 8 GPUs, batch 8 of 4096 tokens without checkpointing:
    336 against 312 GiB; now 301).
  ``bench/accuracy/reserve_fit.py`` prints these figures.
  ZeRO-1/2 keep their buckets allocated for the whole run
  (``contiguous_gradients``' ipg buffer), and one GPU gathers nothing, so no
  side-stream term is added for them.
* Host RAM per training process: importing torch + transformers + peft takes
  0.34 GiB of resident memory (measured, CPU build of torch 2.13); the CUDA
  runtime's host side and its kernel libraries add more.  2 GiB per rank is
  assumed.
"""
from __future__ import annotations

CUDA_CONTEXT_GIB = 0.5
ALLOCATOR_RESERVE = 0.10
SIDE_STREAM_RESERVE = 2.0
HOST_PROCESS_GIB = 2.0
