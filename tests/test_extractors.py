"""Each extractor on the wordings real tools print."""
import pytest

from oomdoctor import knowledge
from oomdoctor.extractors import (Unknown, config_keys, cuda_oom, deepspeed, free_mem, gpu_count, host_oom, nvidia_smi,
                                  progress, symptoms)
from oomdoctor.extractors.units import parse_size

KB = knowledge.default()


def facts(extractor, text, **kw):
    """What an extractor reads; a finding that rules values out (Unknown) is not a value."""
    return {f.name: f.value for f in extractor.extract(text, **kw) if not isinstance(f.value, Unknown)}


def ruled_out(extractor, text, **kw):
    return {f.name: f.value for f in extractor.extract(text, **kw) if isinstance(f.value, Unknown)}


OLD = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.69 GiB total "
       "capacity; 22.87 GiB already allocated; 3.06 MiB free; 23.25 GiB reserved in total by PyTorch) If reserved "
       "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.")
NEW = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of 79.15 GiB "
       "of which 1.23 GiB is free. Including non-PyTorch memory, this process has 77.91 GiB memory in use. Of the "
       "allocated memory 72.50 GiB is allocated by PyTorch, and 4.90 GiB is reserved by PyTorch but unallocated. If "
       "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
CAPACTY = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 172.00 MiB. GPU 0 has a total capacty "
           "of 23.65 GiB of which 58.81 MiB is free. Process 11111 has 20.10 GiB memory in use. Process 22222 has "
           "3.47 GiB memory in use. Of the allocated memory 19.53 GiB is allocated by PyTorch, and 140.45 MiB is "
           "reserved by PyTorch but unallocated.")
CACHED = ("RuntimeError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 0; 10.92 GiB total capacity; "
          "9.83 GiB already allocated; 21.56 MiB free; 9.95 GiB cached)")


def test_units():
    assert parse_size("20.00 MiB") == 20 / 1024
    assert parse_size("1.5 GiB") == 1.5
    assert parse_size("512 KiB") == 0.5 / 1024


def test_old_wording():
    f = facts(cuda_oom, OLD)
    assert f["oom.wording"] == "old"
    assert f["oom.tried_gib"] == pytest.approx(20 / 1024)
    assert f["oom.total_gib"] == pytest.approx(23.69)
    assert f["oom.allocated_gib"] == pytest.approx(22.87)
    assert f["oom.free_gib"] == pytest.approx(3.06 / 1024)
    assert f["oom.reserved_gib"] == pytest.approx(23.25)
    assert f["oom.reserved_unallocated_gib"] == pytest.approx(0.38)
    assert f["oom.gpu_index"] == 0


def test_new_wording():
    f = facts(cuda_oom, NEW)
    assert f["oom.wording"] == "new"
    assert f["oom.tried_gib"] == pytest.approx(1.96)
    assert f["oom.total_gib"] == pytest.approx(79.15)
    assert f["oom.free_gib"] == pytest.approx(1.23)
    assert f["oom.process_in_use_gib"] == pytest.approx(77.91)
    assert f["oom.allocated_gib"] == pytest.approx(72.50)
    assert f["oom.reserved_unallocated_gib"] == pytest.approx(4.90)
    assert f["oom.fragmentation_ratio"] == pytest.approx(4.90 / 77.40, abs=1e-3)


def test_torch_2_1_typo_and_process_list():
    f = facts(cuda_oom, CAPACTY)
    assert f["oom.total_gib"] == pytest.approx(23.65)
    assert f["oom.other_processes_gib"] == pytest.approx(3.47)


def test_pytorch_1_cached_wording():
    f = facts(cuda_oom, CACHED)
    assert f["oom.reserved_gib"] == pytest.approx(9.95)
    assert f["oom.free_gib"] == pytest.approx(21.56 / 1024)


def test_hip_and_mps():
    hip = facts(cuda_oom, "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                          "capacity of 63.98 GiB of which 1.19 GiB is free.")
    assert hip["oom.total_gib"] == pytest.approx(63.98)
    mps = facts(cuda_oom, "RuntimeError: MPS backend out of memory (MPS allocated: 17.79 GB, other allocations: "
                          "326.91 MB, max allowed: 18.13 GB). Tried to allocate 64.00 MB on private pool.")
    assert mps["oom.tried_gib"] == pytest.approx(64 / 1024)
    assert mps["oom.total_gib"] == pytest.approx(18.13)


@pytest.mark.parametrize("text, kind", [
    (OLD, "cuda_oom"),
    ("RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported", "cuda_driver_oom"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "cublas_alloc"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_ENOUGH_MEMORY", "cudnn_alloc"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx(...)`", "cublas_error"),
    ("RuntimeError: DataLoader worker (pid 12345) is killed by signal: Killed.", "dataloader_killed"),
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:83] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)", "host_cpu_allocator"),
    ("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc", "host_bad_alloc"),
    ("OSError: [Errno 12] Cannot allocate memory", "host_errno12"),
    ("[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=1800000)", "nccl_timeout"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "illegal_memory_access"),
    ("RuntimeError: CUDA error: device-side assert triggered", "device_assert"),
    ("RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 123 vs 456\nOSError: [Errno 28] No space left on device", "disk_full"),
    ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).", "shm_bus_error"),
    ("[2024-01-01 10:00:00,000] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 0", "host_killed"),
    ("$ python train.py\nLoading checkpoint shards: 100%\nKilled", "host_killed"),
    ("XPU out of memory. Tried to allocate 1.00 GiB", "xpu_oom"),
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[8,128,50257]", "tf_oom"),
])
def test_error_kind(text, kind):
    assert facts(symptoms, text, kb=KB)["error.kind"] == kind


def test_oom_beats_the_nccl_timeout_it_causes():
    text = OLD + "\n[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout"
    assert facts(symptoms, text, kb=KB)["error.kind"] == "cuda_oom"


def test_phase_prefers_innermost_meaningful_frame():
    tb = ('  File "trainer.py", line 1, in train\n  File "trainer.py", line 2, in evaluate\n'
          '  File "trainer.py", line 3, in evaluation_loop\n  File "modeling_llama.py", line 4, in forward\n' + OLD)
    assert facts(symptoms, tb, kb=KB)["phase"] == "evaluation"
    back = '  File "torch/_tensor.py", line 5, in backward\n    torch.autograd.backward(\n' + OLD
    assert facts(symptoms, back, kb=KB)["phase"] == "backward"


def test_dmesg_oom_killer():
    text = ("[12345.678] Out of memory: Killed process 4321 (python) total-vm:98765432kB, anon-rss:62914560kB, "
            "file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:123456kB oom_score_adj:0")
    f = facts(host_oom, text)
    assert f["host.oom_killed"] is True
    assert f["host.killed_rss_gib"] == pytest.approx(60.0)


def test_exit_code_prefers_the_kill():
    f = facts(host_oom, "rank 1 exitcode: 1\nrank 0 exitcode: -9 (pid: 123)")
    assert f["process.exit_code"] == -9


SMI = """+-----------------------------------------------------------------------------+
| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
|   0  NVIDIA GeForce RTX 4090  On   | 00000000:01:00.0 Off |                  Off |
|  0%   45C    P2   120W / 450W |  23876MiB / 24564MiB |    100%      Default |
+-------------------------------+----------------------+----------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|    0   N/A  N/A      1234      C   python                          20000MiB |
|    0   N/A  N/A      5678      C   python                           3800MiB |
+-----------------------------------------------------------------------------+"""


def test_nvidia_smi_table():
    f = facts(nvidia_smi, SMI)
    assert f["smi.memory_used_gib"] == pytest.approx(23876 / 1024, abs=1e-3)
    assert f["smi.memory_total_gib"] == pytest.approx(24564 / 1024, abs=1e-3)
    assert f["smi.used_ratio"] > 0.95
    assert f["smi.process_count"] == 2


def test_free_h_and_plain_free():
    human = ("               total        used        free      shared  buff/cache   available\n"
             "Mem:           62Gi        60Gi       512Mi       1.0Gi       1.5Gi       1.2Gi\n"
             "Swap:          2.0Gi       2.0Gi          0B")
    f = facts(free_mem, human)
    assert f["host.ram_total_gib"] == 62 and f["host.ram_available_gib"] == pytest.approx(1.2)
    plain = ("               total        used        free      shared  buff/cache   available\n"
             "Mem:        65536000    63000000      500000      100000     2000000     1000000\n")
    assert facts(free_mem, plain)["host.ram_total_gib"] == pytest.approx(65536000 / 2**20, abs=1e-3)


CALL = """args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=4,
    per_device_eval_batch_size=8,
    gradient_accumulation_steps=4,
    gradient_checkpointing=False,
    bf16=True,
    optim="paged_adamw_8bit",
    eval_strategy="steps",
)"""
REPR = "TrainingArguments(\n_n_gpu=1,\nadafactor=False,\nbf16=False,\nfp16=True,\ngradient_checkpointing=True,\noptim=OptimizerNames.ADAMW_TORCH,\nper_device_train_batch_size=2,\n)"
JSON = '{"per_device_train_batch_size": 16, "gradient_checkpointing": true, "bf16": true, "optim": "adamw_torch_fused"}'
FLAGS = "torchrun --nproc_per_node 8 train.py --per_device_train_batch_size 2 --bf16 --gradient_checkpointing --max_seq_length=4096 --optim adafactor"
AXOLOTL = """base_model: meta-llama/Meta-Llama-3-8B
adapter: qlora
load_in_4bit: true
sequence_len: 8192
sample_packing: true
micro_batch_size: 2
gradient_accumulation_steps: 4
gradient_checkpointing: true
lora_r: 32
lora_target_modules:
  - q_proj
  - v_proj
optimizer: paged_adamw_8bit
flash_attention: true
"""
FACTORY = "model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\nfinetuning_type: full\ncutoff_len: 2048\nper_device_train_batch_size: 1\ndeepspeed: ds_z3_config.json\nbf16: true\n"


@pytest.mark.parametrize("text, expected", [
    (CALL, {"train.batch_size": 4, "train.eval_batch_size": 8, "train.grad_accum": 4, "train.grad_checkpointing": False,
            "train.precision": "bf16", "train.optimizer": "paged_adamw_8bit", "eval.enabled": True}),
    (REPR, {"train.precision": "fp16", "train.grad_checkpointing": True, "train.batch_size": 2}),
    (JSON, {"train.batch_size": 16, "train.grad_checkpointing": True, "train.optimizer": "adamw_fused"}),
    (FLAGS, {"train.batch_size": 2, "train.precision": "bf16", "train.grad_checkpointing": True,
             "train.seq_len": 4096, "train.optimizer": "adafactor"}),
    (AXOLOTL, {"train.method": "qlora", "model.load_dtype": "nf4", "train.seq_len": 8192, "train.packing": True,
               "train.batch_size": 2, "lora.rank": 32, "lora.targets": ["q_proj", "v_proj"], "train.attention": "flash"}),
    (FACTORY, {"train.objective": "sft", "train.method": "full", "train.seq_len": 2048, "train.batch_size": 1}),
])
def test_config_keys(text, expected):
    got = facts(config_keys, text, kb=KB)
    for name, value in expected.items():
        assert got.get(name) == value, name


def test_repr_enum_optimizer():
    got = facts(config_keys, "optim=OptimizerNames.ADAMW_TORCH,", kb=KB)
    assert got.get("train.optimizer") in (None, "adamw")


def test_deepspeed_json():
    text = '''{"bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu",
    "pin_memory": true}, "offload_param": {"device": "cpu"}}, "train_micro_batch_size_per_gpu": 4}'''
    f = facts(deepspeed, text)
    assert f["dist.zero_stage"] == 3
    assert f["dist.offload_optimizer"] == "cpu" and f["dist.offload_param"] == "cpu"
    assert f["dist.pin_memory"] is True and f["train.batch_size"] == 4 and f["train.precision"] == "bf16"


def test_progress_and_ranks():
    f = facts(progress, " 12%|█▏        | 150/1250 [03:10<23:16,  1.27s/it]\n[rank1]: boom\n[rank0]: boom")
    assert f["log.after_steps"] is True and f["log.rank_count"] == 2


# --- wordings seen in real logs ------------------------------------------------------
WRAPPED = ("[rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU  has a to\n"
           "tal capacity of 23.67 GiB of which 1.59 GiB is free. Including non-PyTorch memory, this process has\n"
           " 22.06 GiB memory in use. Of the allocated memory 19.75 GiB is allocated by PyTorch, and 1.78 GiB i\n"
           "s reserved by PyTorch but unallocated.")


def test_fixed_width_wrap_inside_words_and_missing_gpu_index():
    f = facts(cuda_oom, WRAPPED)
    assert f["oom.wording"] == "new" and "oom.gpu_index" not in f
    assert f["oom.total_gib"] == pytest.approx(23.67)
    assert f["oom.process_in_use_gib"] == pytest.approx(22.06)
    assert f["oom.reserved_unallocated_gib"] == pytest.approx(1.78)


def test_wrap_at_a_word_boundary_keeps_the_original_reading():
    text = ("OutOfMemoryError: CUDA out of memory. Tried to allocate 3.82 GiB (GPU 0; 31.75\nGiB total capacity; "
            "23.21 GiB already allocated; 2.43 GiB free; 25.59 GiB\nreserved in total by PyTorch)")
    f = facts(cuda_oom, text)
    assert f["oom.total_gib"] == pytest.approx(31.75) and f["oom.reserved_gib"] == pytest.approx(25.59)


def test_pytorch_1_0_cached_is_the_unallocated_part():
    f = facts(cuda_oom, "RuntimeError: CUDA out of memory. Tried to allocate 352.00 MiB (GPU 0; 7.92 GiB total capacity; "
                        "1.67 GiB already allocated; 156.00 MiB free; 124.28 MiB cached)")
    assert f["oom.reserved_unallocated_gib"] == pytest.approx(124.28 / 1024)
    assert f["oom.reserved_gib"] == pytest.approx(1.67 + 124.28 / 1024)
    assert f["oom.outside_pytorch_gib"] > 5  # most of the card is used by something else


def test_memory_fraction_allowed_segment():
    f = facts(cuda_oom, "OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB (GPU 3; 11.93 GiB total capacity; "
                        "10.67 GiB already allocated; 515.38 MiB free; 11.93 GiB allowed; 10.92 GiB reserved in total by PyTorch)")
    assert f["oom.reserved_gib"] == pytest.approx(10.92) and f["oom.gpu_index"] == 3


def test_the_trainer_is_the_process_that_holds_what_pytorch_reserved():
    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 148.00 MiB. GPU 0 has a total capacity of "
            "31.60 GiB of which 87.44 MiB is free. Process 441650 has 30.51 GiB memory in use. Process 449657 has "
            "1022.00 MiB memory in use. Of the allocated memory 594.01 MiB is allocated by PyTorch, and 5.99 MiB is "
            "reserved by PyTorch but unallocated.")
    f = facts(cuda_oom, text)
    assert f["oom.other_processes_gib"] == pytest.approx(30.51)
    assert f["oom.process_count"] == 2


def test_every_listed_process_is_another_one_beside_this_process():
    text = ("CUDA out of memory. Tried to allocate 130.00 MiB. GPU 0 has a total capacity of 79.10 GiB of which 12.81 MiB "
            "is free. Process 3427 has 0 bytes memory in use. Process 3423 has 0 bytes memory in use. Including "
            "non-PyTorch memory, this process has 0 bytes memory in use. Of the allocated memory 10.47 GiB is allocated "
            "by PyTorch, and 93.52 MiB is reserved by PyTorch but unallocated.")
    f = facts(cuda_oom, text)
    assert f["oom.process_count"] == 3 and f["oom.process_in_use_gib"] == 0


def test_tensorflow_shape_gives_size_and_site():
    f = facts(cuda_oom, "ResourceExhaustedError: OOM when allocating tensor with shape[3,16,1024,1024] and type float on "
                        "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc")
    assert f["oom.tried_gib"] == pytest.approx(3 * 16 * 1024 * 1024 * 4 / 2**30)
    assert f["oom.site"] == "attention"
    assert facts(cuda_oom, "OOM when allocating tensor with shape[32,512,50257] and type float")["oom.site"] == "logits"


def test_xla_needed_versus_capacity():
    f = facts(cuda_oom, "XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
                        "space hbm. Used 21.90G of 7.48G hbm. Exceeded hbm capacity by 14.42G.")
    assert f["oom.needed_gib"] == pytest.approx(21.90) and f["oom.total_gib"] == pytest.approx(7.48)


def test_oom_killer_task_dump_and_deepspeed_host_usage():
    dump = ("[17798674.374062] [ 199244]  1000 199244     1907      677    49152        0          -998 bash\n"
            "[17798674.374495] [ 202779]  1000 202779 274650088 243385180 1957441536     7930          -998 python\n")
    f = facts(host_oom, dump)
    assert f["host.oom_killed"] is True and f["host.killed_rss_gib"] > 900
    ds = "[INFO] [utils.py:838:see_memory_usage] CPU Virtual Memory:  used = 26.4 GB, percent = 84.6%"
    f = facts(host_oom, ds)
    assert f["host.ram_used_ratio"] == pytest.approx(0.846) and f["host.memory_pressure"] is True
    assert f["host.ram_total_gib"] == pytest.approx(31.2, abs=0.1)


def test_launcher_argv_list():
    text = "['/usr/bin/python', '-u', 'train.py', '--lora_r', '8', '--bf16', 'False', '--per_device_train_batch_size', '4']"
    got = facts(config_keys, text, kb=KB)
    assert got["train.batch_size"] == 4 and got["lora.rank"] == 8
    assert "train.precision" not in got  # --bf16 False is not bf16


def test_shell_continuations_and_first_keyword_of_a_call():
    got = facts(config_keys, "python train.py \\\n    --do_eval \\\n    --predict_with_generate \\\n    --per_device_eval_batch_size 8",
                kb=KB)
    assert got["eval.enabled"] is True and got["eval.predict_with_generate"] is True
    got = facts(config_keys, "cfg = SFTConfig(max_seq_length=8192, per_device_train_batch_size=1)", kb=KB)
    assert got["train.seq_len"] == 8192


def test_deepspeed_template_with_placeholders_and_cut_off():
    text = ('{\n"train_batch_size" : CONFIG_BATCH_SIZE,\n"zero_optimization": {\n"stage": 3,\n'
            '"offload_optimizer": {"device": "nvme", "pin_memory": true},\n"offload_param": {"device": "nvme"},\n},\n'
            '"gradient_clipping": 1.0,\n')
    f = facts(deepspeed, text)
    assert f["dist.zero_stage"] == 3 and f["dist.offload_optimizer"] == "nvme" and f["dist.pin_memory"] is True


def test_parameter_counts():
    from oomdoctor.extractors import parameters
    f = facts(parameters, "trainable params: 4,194,304 || all params: 6,742,609,920 || trainable%: 0.0622")
    assert f["train.method"] == "lora" and f["model.params_b"] == pytest.approx(6.743, abs=1e-3)
    f = facts(parameters, "Total parameters 7243.436M\nTrainable parameters 1.704M")
    assert f["train.method"] == "lora" and f["model.params_b"] == pytest.approx(7.243, abs=1e-3)


@pytest.mark.parametrize("text, name, value", [
    ("LoRA on a 4090, gradient checkpointing is off", "train.grad_checkpointing", False),
    ("梯度检查点没开，batch 4", "train.grad_checkpointing", False),
    ("with gradient checkpointing, bs 2", "train.grad_checkpointing", True),
    ("bash FastChat/lora_train.sh", "train.method", "lora"),
    ("deepspeed: examples/deepspeed/ds_z3_offload_config.json", "dist.zero_stage", 3),
    ("deepspeed: examples/deepspeed/ds_z3_offload_config.json", "dist.offload_optimizer", "cpu"),
    ("model size (1.3B), number of GPUs", "model.params_b", 1.3),
    ("it only happens on one rank only, the others are fine", "log.one_rank", True),
    ("the OOM is the first backward after an eval pass", "log.after_eval", True),
    ("host RAM is 64 GB", "log.stated_memory", "host"),
    ("显存不足", "log.stated_memory", "gpu"),
    ("happens when saving the final checkpoint", "phase", "saving"),
    ("I reran the cell that builds the trainer", "log.repeated_runs", True),
    ("--data_path Dahoas/full-hh-rlhf", "train.objective", None),
])
def test_sentences(text, name, value):
    from oomdoctor.extractors import sentence
    assert facts(sentence, text).get(name) == value


@pytest.mark.parametrize("text, expected", [
    ("{'loss': 1.532, 'grad_norm': 0.41, 'learning_rate': 1.9e-05, 'epoch': 0.25}", True),
    ("Iter 80: Train loss 0.848, Learning Rate 5.000e-05, It/sec 2.028, Peak mem 8.303 GB", True),
    ("Epoch:[1/1](1/19994), Reward:-1.8744", False),
    ("  0%|          | 0/993 [00:03<?, ?it/s]", False),
])
def test_steps_done(text, expected):
    assert facts(progress, text).get("log.after_steps") is expected


def test_repeated_runs_from_tensorflow_function_ids():
    assert facts(progress, "0 derived errors ignored. [Op:__inference_train_function_1394299]")["log.repeated_runs"] is True
    assert "log.repeated_runs" not in facts(progress, "[Op:__inference_train_function_8821]")


@pytest.mark.parametrize("text, kind", [
    ("RuntimeError: MPS backend out of memory (MPS allocated: 9.48 GiB, other allocations: 480.00 KiB, max allowed: 9.47 GiB).", "mps_oom"),
    ("libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command buffer execution failed: "
     "Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)", "metal_oom"),
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 124.00 MiB.", "hip_oom"),
    ("RuntimeError: Allocation is out of device memory on current platform.", "xpu_oom"),
    ("Error out of memory at line 380 in file /src/bitsandbytes/csrc/pythonInterface.c", "bnb_oom"),
    ("ValueError: Some modules are dispatched on the CPU or the disk. Make sure you have enough GPU RAM to fit the quantized model.",
     "device_map_spill"),
    ("W tensorflow/core/common_runtime/device/device_host_allocator.h:46] could not allocate pinned host memory of size: 34359738368\n"
     "E tensorflow/stream_executor/cuda/cuda_driver.cc:802] failed to alloc 34359738368 bytes on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
     "pinned_host_oom"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED", "cudnn_alloc"),
    ("E0323 tpu_execute_op.cc:266 : RESOURCE_EXHAUSTED: Attempting to reserve 10.51G at the bottom of memory.", "xla_oom"),
    ("MemoryError: Unable to allocate 3.50 GiB for an array with shape (470000000,) and data type float64", "host_memory_error"),
    ("OSError: [WinError 1455] The paging file is too small for this operation to complete.", "host_errno12"),
    ("Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html",
     "ray_oom"),
    ("[launch.py:315:sigkill_handler] Killing subprocess 1080504", "child_killed"),
    ("NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to 9637892 bytes, error: No space left on device (28)", "shm_bus_error"),
    ("Loading checkpoint shards:   0%|          | 0/2 [00:00<?, ?it/s]Killed", "host_killed"),
    ("OOMKilled with exit code 137", "oom_killer"),
])
def test_more_error_kinds(text, kind):
    assert facts(symptoms, text, kb=KB)["error.kind"] == kind


@pytest.mark.parametrize("text, site", [
    ("    lm_logits = self.lm_head(outputs[0]) + self.final_logits_bias", "logits"),
    ("    attn_weights = torch.matmul(query_states, key_states.transpose(2, 3))", "attention"),
    ("    w_4bit, quant_state = bnb.functional.quantize_4bit(w, blocksize=64)", "quantize"),
    ("--> 520 output = torch.nn.functional.linear(A, F.dequantize_4bit(B, quant_state).to(A.dtype).t(), bias)", None),
    ("[rank3]:     torch.empty(torch.Size([numel * world_size]), dtype=dtype, device=device)", "all_gather"),
    ("    int(self.partition_size[i])).to(self.single_partition_of_fp32_groups[i].dtype)", "fp32_master"),
])
def test_oom_site(text, site):
    assert facts(symptoms, text, kb=KB).get("oom.site") == site


def test_deeply_nested_json_is_refused_before_parsing():
    nested = '{"zero_optimization": {"stage": 3, "x": ' + "[" * 5000 + "]" * 5000 + "}}"
    assert list(deepspeed.extract(nested)) == []
