"""A training set-up: what the estimator needs to know about one fine-tuning job."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

METHODS = ("full", "lora", "qlora", "freeze", "prefix")
LOAD_DTYPES = ("fp32", "bf16", "fp16", "int8", "nf4", "fp4")
PRECISIONS = ("fp32", "bf16", "fp16")
OPTIMIZERS = ("adamw", "adamw_fused", "adamw_8bit", "paged_adamw_8bit", "paged_adamw_32bit", "adafactor",
              "sgd", "sgd_momentum", "lion", "lion_8bit")
ATTENTIONS = ("eager", "sdpa", "flash")
POSITIVE_INTS = ("batch_size", "seq_len", "grad_accum", "num_gpus", "lora_rank", "gen_beams", "loss_chunks",
                 "context_parallel", "tensor_parallel", "num_nodes", "virtual_tokens")
OPTIONAL_POSITIVE_INTS = ("eval_batch_size", "eval_samples", "eval_accumulation_steps", "gen_new_tokens",
                          "rl_generations", "rl_steps_per_generation", "rl_generation_batch", "rl_prompt_len",
                          "target_len", "images_per_sample", "image_size", "prefix_hidden")
def is_count(value: Any) -> bool:
    """A positive integer (bool is an int in Python, and is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


STRATEGIES = ("single", "ddp", "deepspeed", "fsdp", "model_parallel")
OFFLOADS = ("none", "cpu", "nvme")
OBJECTIVES = ("sft", "dpo", "kto", "orpo", "ppo", "grpo", "rloo", "reward", "pretrain")
RL_OBJECTIVES = ("grpo", "rloo", "ppo")      # objectives that generate rollouts inside the training loop
VLLM_MODES = ("none", "colocate", "server")
FP8 = ("none", "torchao", "te")
LOSSES = ("full", "chunked", "fused_linear", "cce")
MODEL_CODES = ("transformers", "torchtune")
QUANTIZED = ("int8", "nf4", "fp4")
ALL_LINEAR = "all-linear"


@dataclass(frozen=True)
class Setup:
    """One fine-tuning job.  ``model`` is a shape object (see ``anatomy``).

    The fields after ``host_ram_gib`` are details a user rarely states; their
    defaults are the common recipes' values and each is reported as an
    assumption when it changes a figure.
    """

    model: Any
    method: str = "lora"
    load_dtype: str = "bf16"
    precision: str = "bf16"
    optimizer: str = "adamw"
    batch_size: int = 1
    seq_len: int = 2048
    grad_accum: int = 1
    grad_checkpointing: bool = False
    attention: str = "sdpa"
    lora_rank: int = 8
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    modules_to_save: tuple[str, ...] = ()
    freeze_trainable_layers: int = 2
    # Prefix tuning (peft PrefixTuningConfig, ChatGLM's P-tuning v2 --pre_seq_len): virtual tokens per layer's keys
    # and values; with prefix_projection an MLP of width prefix_hidden (None: the model's hidden size) makes them.
    virtual_tokens: int = 128
    prefix_projection: bool = False
    prefix_hidden: int | None = None
    num_gpus: int = 1
    strategy: str = "single"
    zero_stage: int = 0
    offload_optimizer: str = "none"
    offload_param: str = "none"
    objective: str = "sft"
    packing: bool = False
    gpu_memory_gib: float | None = None
    host_ram_gib: float | None = None
    # Details with recipe defaults.
    lora_dropout: float = 0.05          # TRL / axolotl examples; peft's own default is 0.0
    adapter_fp32: bool = True           # peft `autocast_adapter_dtype=True` (default since 0.12)
    double_quant: bool = True           # QLoRA recipe; transformers' BitsAndBytesConfig defaults to False
    kbit_fp32_upcast: bool = False      # peft `prepare_model_for_kbit_training` upcasts non-quantised params
    kbit_head_bf16: bool = False        # ... and TRL up to 0.25 (bf16=True) casts embeddings and lm_head back to bf16
    eval_batch_size: int | None = None
    # Evaluation and generation beside training (see ``evaluation``).
    eval_samples: int | None = None             # examples in the evaluation set, all ranks together
    eval_accumulation_steps: int | None = None
    eval_compute_metrics: bool = False          # compute_metrics set: Trainer.evaluate keeps the logits
    eval_prediction_loss_only: bool = False
    eval_preprocess_logits: bool = False        # preprocess_logits_for_metrics (e.g. the argmax)
    eval_generate: bool = False                 # predict_with_generate
    gen_new_tokens: int | None = None
    gen_beams: int = 1
    # How the step runs (see ``logits``, ``activations``, ``offload``, ``parallel``).
    loss: str = "full"                  # full | chunked (torchtune) | fused_linear (Liger) | cce (Cut Cross-Entropy)
    loss_chunks: int = 8                # torchtune CEWithChunkedOutputLoss(num_output_chunks=8)
    liger_kernels: bool = False         # Liger's RMSNorm and SwiGLU kernels (use_liger_kernel=True applies them)
    compiled: bool = False              # torch.compile'd decoder layers and chunked loss: inductor saves less
    activation_offload: bool = False    # saved activations moved to pinned host RAM (torchtune, axolotl)
    optimizer_in_backward: bool = False  # each parameter stepped as soon as its gradient is complete
    context_parallel: int = 1           # ranks a sequence is split over (ring attention, DeepSpeed Ulysses)
    tensor_parallel: int = 1            # ranks each layer's weights are split over
    num_nodes: int = 1                  # machines the GPUs are spread over (host RAM is per machine)
    model_code: str = "transformers"    # whose decoder code runs: transformers | torchtune (see ``activations``)
    # RL fine-tuning (see ``rollout``, ``objectives``): TRL 1.16's GRPOTrainer and RLOOTrainer.
    rl_generations: int | None = None           # num_generations: completions sampled per prompt
    rl_steps_per_generation: int | None = None  # steps_per_generation (TRL: gradient_accumulation_steps)
    rl_generation_batch: int | None = None      # generation_batch_size, all ranks together
    rl_prompt_len: int | None = None            # longest prompt (tokens); else seq_len less the completion
    vllm: str = "none"                          # none (the trainer's generate) | colocate | server (own GPUs)
    vllm_memory_share: float = 0.3              # vllm_gpu_memory_utilization (GRPOConfig's default)
    vllm_sleep: bool = False                    # vllm_enable_sleep_mode
    rl_beta: float | None = None                # KL coefficient; 0 loads no reference (None: the trainer's default)
    precompute_ref: bool = False                # DPO/KTO precompute_ref_log_probs
    reward_model: bool = False                  # a reward model loaded on every training GPU (policy-sized)
    fp8: str = "none"                           # FP8 linear layers: none | torchao (Float8Linear) | te
    # Encoder-decoder models (T5): tokens per target sequence; None reads as seq_len (an assumption stated).
    target_len: int | None = None
    # Vision-language models: images per training example, their side in pixels (square), a frozen tower.
    images_per_sample: int | None = None
    image_size: int | None = None
    freeze_vision: bool = False
    # FSDP1 units holding frozen weights beside trainable adapters (decoder-layer wrapping without peft's policy,
    # use_orig_params=True): their gradients are computed and kept (see ``sharding``).  None: not known, and
    # assumed not, as the HF Trainer wraps peft models with peft's policy.
    fsdp_mixed_units: bool | None = None

    def __post_init__(self) -> None:
        for name, allowed in (("method", METHODS), ("load_dtype", LOAD_DTYPES), ("precision", PRECISIONS),
                              ("optimizer", OPTIMIZERS), ("attention", ATTENTIONS), ("strategy", STRATEGIES),
                              ("offload_optimizer", OFFLOADS), ("offload_param", OFFLOADS),
                              ("objective", OBJECTIVES), ("loss", LOSSES), ("model_code", MODEL_CODES),
                              ("vllm", VLLM_MODES), ("fp8", FP8)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {list(allowed)}, got {getattr(self, name)!r}")
        for name in POSITIVE_INTS + OPTIONAL_POSITIVE_INTS:
            value = getattr(self, name)
            if not is_count(value) and not (value is None and name in OPTIONAL_POSITIVE_INTS):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("gpu_memory_gib", "host_ram_gib"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        share = self.vllm_memory_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            raise ValueError(f"vllm_memory_share must be a fraction in (0, 1], got {share!r}")
        beta = self.rl_beta
        if beta is not None and (isinstance(beta, bool) or not isinstance(beta, (int, float)) or beta < 0):
            raise ValueError(f"rl_beta must be a number >= 0, got {beta!r}")
        if not isinstance(self.zero_stage, int) or not 0 <= self.zero_stage <= 3:
            raise ValueError(f"zero_stage must be 0-3, got {self.zero_stage!r}")
        if self.num_gpus % (self.context_parallel * self.tensor_parallel):
            raise ValueError(f"{self.num_gpus} GPUs cannot be split into context parallel {self.context_parallel} × "
                             f"tensor parallel {self.tensor_parallel}")
        if self.freeze_trainable_layers < 0:
            raise ValueError("freeze_trainable_layers must be >= 0")
        if self.method in ("full", "freeze") and self.load_dtype in QUANTIZED:
            raise ValueError(f"{self.method} fine-tuning cannot update {self.load_dtype} weights: "
                             "bitsandbytes' quantised weights are frozen; use qlora")
        if isinstance(self.lora_targets, str) or isinstance(self.modules_to_save, str):
            raise ValueError("lora_targets and modules_to_save are tuples of module names")

    # ------------------------------------------------------------ derived views
    @property
    def adapters(self) -> bool:
        return self.method in ("lora", "qlora")

    @property
    def quantized(self) -> bool:
        return self.load_dtype in QUANTIZED

    @property
    def mixes_units(self) -> bool:
        """Adapters trained under FSDP in units that also hold frozen weights, which then get gradients."""
        return bool(self.fsdp_mixed_units) and self.strategy == "fsdp" and self.adapters

    def replace(self, **changes: Any) -> "Setup":
        return dataclasses.replace(self, **changes)
