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
    ("OOM on GPU 3 while the other GPUs are almost empty", "log.one_rank", True),
    ("最后一张卡显存爆了，其他几张卡几乎是空的", "log.one_rank", True),
    ("只有第一张卡满了", "log.one_rank", True),
    ("the other GPUs are busy too", "log.one_rank", None),
    ("the OOM is the first backward after an eval pass", "log.after_eval", True),
    ("host RAM is 64 GB", "log.stated_memory", "host"),
    ("显存不足", "log.stated_memory", "gpu"),
    ("happens when saving the final checkpoint", "phase", "saving"),
    ("I reran the cell that builds the trainer", "log.repeated_runs", True),
    ("--data_path Dahoas/full-hh-rlhf", "train.objective", None),
    ("只有部分卡占到 80G，其他卡在 40~60G 之间", "log.one_rank", True),
    ("4090 单卡，内存 320g，用 deepspeed zero3", "host.ram_total_gib", 320.0),
    ("8x A100 80G, 960 GB RAM", "host.ram_total_gib", 960.0),
    ("CPU 内存（252G）占满了", "host.ram_total_gib", 252.0),
    ("1TB RAM per node", "host.ram_total_gib", 1024.0),
    ("GPU 内存 24G", "host.ram_total_gib", None),
    ("单卡内存 24G", "host.ram_total_gib", None),
    ("有 32GB 内存的 4090", "host.ram_total_gib", None),
    ("24GB VRAM", "host.ram_total_gib", None),
    ("preprocessing_num_workers 设成 256", "data.preprocessing_workers", 256),
    ("it dies while the model is loading", "phase", "loading"),
    ("I get an OOM when the state_dict is saved", "phase", "saving"),
    ("whenever the trainer evaluates it goes OOM", "phase", "evaluation"),
    ("一到 evaluate 就涨到 60G", "phase", "evaluation"),
    ("写了 compute_metric 算 bleu", "eval.compute_metrics", True),
    ("9 张卡一加载模型进程就被杀了", "phase", "loading"),
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


# --- config readers: values honoured, not keys (tests/configs holds the real pastes) ------------------
from oomdoctor.extractors import context_length, gpu_card, launch, run_summary  # noqa: E402
from oomdoctor.observation import observe  # noqa: E402


def observed(text):
    return {o.name: o.value for o in observe(text, KB)}


@pytest.mark.parametrize("text, name, excluded", [
    ("load_in_4bit: False\nload_in_8bit: false", "model.load_dtype", {"nf4", "int8"}),
    ("{'output_dir': 'out', 'deepspeed': None, 'bf16': True}", "dist.strategy", {"deepspeed"}),
    ("fsdp=[],\nfsdp_config={'min_num_params': 0},", "dist.strategy", {"fsdp"}),
    ("fsdp: ''", "dist.strategy", {"fsdp"}),
    ("bf16: false", "train.precision", {"bf16"}),
])
def test_false_and_empty_values_rule_their_value_out(text, name, excluded):
    assert name not in facts(config_keys, text, kb=KB)
    assert ruled_out(config_keys, text, kb=KB)[name].excluded >= excluded


def test_a_word_in_a_key_is_not_the_setting_for_later_readers():
    """`deepspeed=None` must not become DeepSpeed through the sentence reader's word match."""
    assert "dist.strategy" not in observed("TrainingArguments(\nbf16=True,\ndeepspeed=None,\nfsdp=[],\n)")
    assert "model.load_dtype" not in observed("load_in_4bit: false\nload_in_8bit: false")
    assert observed("per_device_train_batch_size: 2\nload_in_4bit: true")["model.load_dtype"] == "nf4"


def test_empty_accelerate_sections_and_auto_set_nothing():
    text = "deepspeed_config: {}\ndistributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: true\nnum_processes: 2"
    got = facts(config_keys, text, kb=KB)
    assert got["dist.strategy"] == "fsdp" and got["dist.offload_param"] == "cpu"
    ds = '{"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}'
    got = facts(deepspeed, ds)
    assert got["dist.zero_stage"] == 2 and "train.precision" not in got and "train.batch_size" not in got
    assert "train.precision" not in observed(ds)


def test_an_installed_deepspeed_is_not_a_strategy():
    env = "- `Accelerate` version: 0.30.1\n- PyTorch version (GPU?): 2.3.0 (True)\n- DeepSpeed version: 0.15.0\n- GPU type: NVIDIA L40S"
    assert "dist.strategy" not in observed(env)
    assert observed(env + "\ndeepspeed --num_gpus 2 train.py --deepspeed ds_z2_config.json")["dist.strategy"] == "deepspeed"


@pytest.mark.parametrize("text, targets", [
    ("--lora_target q_proj,v_proj \\", ["q_proj", "v_proj"]),
    ('target_modules=["q_proj", "v_proj"],', ["q_proj", "v_proj"]),
    ("lora_target_modules:\n  - q_proj\n  - k_proj\n", ["q_proj", "k_proj"]),
    ('{"target_modules": ["q_proj", "o_proj"]}', ["q_proj", "o_proj"]),
    ("lora_target: all", ["all-linear"]),
    ("lora_target_linear: true", ["all-linear"]),
])
def test_lists_are_read_whole(text, targets):
    assert facts(config_keys, text, kb=KB)["lora.targets"] == targets


def test_values_given_by_name_need_their_definition():
    script = "MICRO_BATCH_SIZE = 4\nBATCH_SIZE = 128\nGRADIENT_ACCUMULATION_STEPS = BATCH_SIZE // MICRO_BATCH_SIZE\n"
    got = facts(config_keys, script, kb=KB)
    assert got["train.batch_size"] == 4 and got["train.grad_accum"] == 32
    shell = "n=2\nswift sft --gradient_accumulation_steps $(expr 64 / $n) --per_device_train_batch_size $BS"
    got = facts(config_keys, shell, kb=KB)
    assert got["train.grad_accum"] == 32 and "train.batch_size" not in got
    call = "TrainingArguments(per_device_train_batch_size=MICRO_BATCH_SIZE, gradient_accumulation_steps=args.accum)"
    assert {"train.batch_size", "train.grad_accum"}.isdisjoint(facts(config_keys, call, kb=KB))


def test_variables_resolve_only_arithmetic_never_code():
    from oomdoctor.extractors.variables import assignments, resolve

    names = assignments("A=6\nB=3\nexport C=$A\n")
    assert resolve("$((A * B + 2))", names) == "20" and resolve("${C}", names) == "6"
    assert resolve("$(nvidia-smi -L | wc -l)", names) is None
    assert resolve("__import__('os').system('x')", names) is None or "import" in resolve("__import__('os').system('x')", names)
    assert resolve("A // 0", names) is None


def test_enum_reprs_of_printed_arguments():
    text = ("optim=<OptimizerNames.ADAMW_TORCH: 'adamw_torch'>,\nlr_scheduler_type=<SchedulerType.LINEAR: 'linear'>,\n"
            "evaluation_strategy=<IntervalStrategy.NO: 'no'>,")
    got = facts(config_keys, text, kb=KB)
    assert got["train.optimizer"] == "adamw" and got["eval.enabled"] is False
    assert facts(config_keys, "optim=OptimizerNames.PAGED_ADAMW_8BIT,", kb=KB)["train.optimizer"] == "paged_adamw_8bit"


def test_commented_lines_are_not_settings():
    text = "cutoff_len: 2048\n# cutoff_len: 8192\n#bf16: true\nfp16: true  # bf16 on an A100"
    got = facts(config_keys, text, kb=KB)
    assert got["train.seq_len"] == 2048 and got["train.precision"] == "fp16"


def test_conflicting_settings_stay_unknown_and_specific_keys_win():
    text = "zero_stage: 3\nnum_processes: 2\n---\nzero_stage: 2\nnum_processes: 2"
    assert "dist.zero_stage" not in facts(config_keys, text, kb=KB)
    litgpt = "{'batch_size': 128, 'micro_batch_size': 1, 'gradient_accumulation_iters': 128, 'devices': 1}"
    assert facts(config_keys, litgpt, kb=KB)["train.batch_size"] == 1


def test_shares_are_not_counts():
    got = facts(config_keys, "val_size: 0.1\neval_steps: 0.3\nblock_size: -1\nval_set_size: 2000", kb=KB)
    assert got.get("eval.samples") == 2000 and "eval.steps" not in got and "train.seq_len" not in got


def test_explicit_model_beats_a_name_in_a_title_or_a_path():
    text = ("CUDA out of memory | QLORA | Llama 3 70B\nmodel_name_or_path: TechxGenus/Meta-Llama-3-70B-Instruct-GPTQ\n"
            "quantization_bit: 4\nfinetuning_type: lora\noutput_dir: saves/llama3-8b/qlora/sft")
    got = observed(text)
    assert got["model.name"] == "llama-3-70b" and got["train.method"] == "qlora"
    assert "model.load_dtype" not in got  # GPTQ weights are 4-bit already, not NF4
    # A vision sibling the catalog has is that model; one it lacks is no text model of the title's name.
    assert observed("model_name_or_path: ./data/Qwen3-VL-8B-Instruct\nQwen3-8B in the title")["model.name"] == "qwen3-vl-8b"
    # (Qwen2.5-VL-7B joined the catalog on 2026-12-03, so the sibling it lacks is now the 32B)
    assert observed("model_name_or_path: ./data/Qwen2.5-VL-7B-Instruct\nQwen2.5-7B in the title")["model.name"] \
        == "qwen2.5-vl-7b"
    assert "model.name" not in observed("model_name_or_path: ./data/Qwen2.5-VL-32B-Instruct\nQwen2.5-32B in the title")


def test_a_folder_that_names_no_model_leaves_the_stated_name():
    assert observed("LoRA of qwen3-8b\n--model /model/actor_model --train_type lora")["model.name"] == "qwen3-8b"
    # A folder with a family word or a number may be a model the catalog lacks: the words do not override it.
    assert "model.name" not in observed("LoRA of qwen3-8b\n--model /data/minicpm-v2 --train_type lora")
    # ms-swift's --model_name with --model_author is the name the tuned model calls itself.
    got = observed("swift sft --model Qwen2-VL-7B-Instruct --model_author swift --model_name swift-robot")
    assert got["model.name"] == "qwen2-vl-7b"


@pytest.mark.parametrize("text, count", [
    ("torchrun --nnodes 2 --nproc_per_node 8 train.py", 16),
    ("deepspeed --num_nodes 2 --num_gpus 8 train.py", 16),
    ("accelerate launch --num_processes=4 train.py", 4),
    ("num_machines: 1\nnum_processes: 8\n", 8),
    ("deepspeed --include localhost:0,1,4,6 train.py", 4),
    ("NNODES=2 NPROC_PER_NODE=8 swift sft", 16),
    ("srun --gres=gpu:4 --nodes=2 python train.py", 8),
    ("CUDA_VISIBLE_DEVICES=0,1,2,3 python train.py", 4),
    ("['torchrun', '--nnodes', '1', '--nproc_per_node', '8', 'launcher.py']", 8),
    ("tune run lora_finetune_single_device --config llama3_1/8B_lora_single_device", 1),
    ("8 x A100", 8), ("8xH100", 8), ("2xT4", 2), ("7*V100", 7), ("4张L20", 4), ("共8张卡", 8), ("两块卡，A6000", 2),
    ("on two GPUs", 2), ("单卡", 1), ("V100 (16GB) X 2", 2), ("A100s (40G) x2", 2), ("H100s x 8", 8), ("across 8 80GB GPUs", 8),
    # Words that pick cards out are not counts: the last card, the other GPUs, one of them.
    ("8 张 A10G，最后一张卡显存爆了，其他几张卡几乎是空的", 8), ("共8张卡，其中两张卡 OOM", 8), ("每一张卡 24G，4张卡", 4),
    ("over 4 GPUs, out of memory on GPU 3 while the other GPUs are almost empty", 4),
    ("QLoRA on two 24GB Titan RTX cards", 2),
])
def test_gpu_counts_in_every_form(text, count):
    assert facts(gpu_count, text)["dist.num_gpus"] == count


@pytest.mark.parametrize("text", [
    "torchrun --nnodes $NNODES --nproc_per_node 8 train.py",           # the node count is not in the paste
    "torchrun --nproc_per_node 4 a.py\ntorchrun --nproc_per_node 8 b.py",  # two launches disagree
    "a tensor of 2 x 4096",                                            # a shape, not cards
    "# with 8 gpus each",                                              # a comment
    "it fails on one of the cards",                                    # which card, not how many
])
def test_gpu_counts_that_stay_unknown(text):
    assert "dist.num_gpus" not in facts(gpu_count, text)


def test_a_trainer_banner_gives_batch_accumulation_and_ranks():
    banner = ("  Instantaneous batch size per device = 2\n"
              "  Total train batch size (w. parallel, distributed & accumulation) = 64\n  Gradient Accumulation steps = 4\n")
    assert facts(run_summary, banner) == {"train.batch_size": 2, "train.grad_accum": 4}
    assert facts(gpu_count, banner)["dist.num_gpus"] == 8


@pytest.mark.parametrize("text, gpu, memory", [
    ("8 x A100s (40G)", "a100-40gb-sxm", None),
    ("Tesla V100 32GB", "v100-32gb", None),
    ("on 3 nodes (each one has 8 32GB v100 gpus)", "v100-32gb", None),
    ("RTX 4070 Ti", "rtx-4070-ti", None),
    ("an A6000 Ada", "rtx-6000-ada", None),
    ("4张L20(45G)", "l20", 45.0),
    ("- GPU type: NVIDIA A100-SXM4-80GB\n- GPU memory: 79.15GB", "a100-80gb-sxm", 79.15),
    ("24G显存", None, 24.0),
    ("训练时只占 17G；卡是 24G 的", None, 24.0),
    ("24G 的卡跑不动", None, 24.0),
    ("8*910B (64G)", None, 64.0),
    ("total_memory: 10.9GB\nname: NVIDIA GeForce GTX 1080 Ti", None, 10.9),
])
def test_gpu_names_and_stated_memory(text, gpu, memory):
    got = facts(gpu_card, text)
    assert got.get("gpu.name") == gpu and got.get("gpu.memory_gib") == memory


def test_gpu_reader_leaves_mixed_cards_comments_and_totals_alone():
    assert "gpu.name" not in facts(gpu_card, "two RTX 4090 and one RTX 3090")
    assert ruled_out(gpu_card, "fp16=True, #(set bf16 to True with an A100)")["gpu.name"].excluded is None
    assert "gpu.memory_gib" not in facts(gpu_card, "4*A10G graphics cards (total 96 Gb)")
    assert "gpu.memory_gib" not in facts(gpu_card, "只需要48GB显存")
    assert ruled_out(gpu_card, "8*910B (64G)")["model.params_b"].excluded == {910.0}


def test_deepspeed_json_cut_off_python_dicts_and_names():
    cut = '{"train_micro_batch_size_per_gpu": 1,\n "optimizer": {"type": "Adam", "params": {"lr": 1e-5}},\n "fp16": {"enabled": True},\n "activation_chec'
    got = facts(deepspeed, cut)
    assert got == {"dist.strategy": "deepspeed", "train.batch_size": 1, "train.precision": "fp16", "train.optimizer": "adamw"}
    printed = "{'fp16': {'enabled': True}, 'train_micro_batch_size_per_gpu': 2, 'gradient_accumulation_steps': 4}"
    assert facts(deepspeed, printed)["train.grad_accum"] == 4
    named = facts(deepspeed, "--deepspeed examples/deepspeed/ds_z3_offload_config.json")
    assert named["dist.zero_stage"] == 3 and named["dist.offload_optimizer"] == "cpu" and "dist.offload_param" not in named
    both = facts(deepspeed, "deepspeed: deepspeed_configs/zero3_bf16_cpuoffload_all.json")
    assert both["dist.offload_param"] == "cpu"
    assert facts(deepspeed, "swift sft --deepspeed default-zero2")["dist.zero_stage"] == 2
    table = "Estimated memory needed for params, optim states and gradients for a:\n 148.66GB | 12.39GB | offload_optimizer=cpu"
    assert ruled_out(deepspeed, table)["dist.offload_optimizer"].excluded is None


def test_deepspeed_global_batch_over_launched_ranks():
    text = '{"train_batch_size": 8, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2}}\ndeepspeed --num_gpus=4 x.py'
    assert facts(deepspeed, text)["train.batch_size"] == 2
    assert facts(gpu_count, '{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1}')[
        "dist.num_gpus"] == 4


@pytest.mark.parametrize("text", [
    "Loading checkpoint shards: 100%|██████████| 30/30 [00:08<00:00,  3.49it/s]",
    "Map: 100%|██████████| 1000/1000 [00:01<00:00, 800.00 examples/s]",
    "Tokenizing:  10%|█         | 21/200 [00:00<00:04, 35.96 examples/s]",
    "Running tokenizer on dataset (num_proc=16): 100%|██████████| 100/100 [00:06<00:00, 16.42 examples/s]",
    "Saving the dataset (1/1 shards): 100%|███████████| 52002/52002 [00:00<00:00, 2903246.46 examples/s]",
])
def test_progress_bars_that_are_not_training(text):
    assert "log.after_steps" not in facts(progress, text)


def test_a_training_bar_after_a_loading_bar_still_counts():
    text = ("Loading checkpoint shards: 100%|██████████| 2/2 [00:08<00:00,  4.2s/it]\n"
            "  1%|          | 2/352 [09:48<28:38:54, 294.67s/it]")
    assert facts(progress, text)["log.after_steps"] is True


@pytest.mark.parametrize("text, value", [
    ("500k 的上下文长度", 500_000), ("32k窗口的上下文", 32768), ("context len=2k", 2048), ("8192ctx", 8192),
    ("上下文长度为 4096", 4096),
])
def test_context_lengths_in_words(text, value):
    assert facts(context_length, text)["train.seq_len"] == value


def test_recipe_script_and_class_names():
    assert facts(launch, "tune run --nproc_per_node 8 full_finetune_\ndistributed --config x.yaml") == {
        "train.method": "full", "dist.strategy": "fsdp", "toolkit": "torchtune"}
    assert facts(launch, 'File "/data/grpo/sft/sft.py", line 67')["train.objective"] == "sft"
    assert facts(launch, "trainer = GRPOTrainer(model=m, args=GRPOConfig(...))")["train.objective"] == "grpo"
    assert facts(launch, "accelerate launch --config_file examples/accelerate_configs/fsdp_qlora.yaml x.py")[
        "dist.strategy"] == "fsdp"


@pytest.mark.parametrize("text, toolkit", [
    ("用 LLaMA-Factory 在 2 张 3090 上 lora 微调 Qwen2.5-14B", "llamafactory"),
    ("用LLaMA-Factory微调 qwen2", "llamafactory"),
    ("llamafactory 训练 qwen2 报 OOM", "llamafactory"),
    ("I'm fine-tuning with LLaMA-Factory on 8xA100", "llamafactory"),
    ("using ms-swift to sft qwen2-vl-7b", "ms_swift"),
    ("使用ms-swift进行 lora 训练", "ms_swift"),
    # a name without a word of using it: a comparison, a link or a move away
    ("Same issue as LLaMA-Factory #1234", None),
    ("LLaMA-Factory vs axolotl: which uses less memory?", None),
    ("I switched from LLaMA-Factory to axolotl", None),
    ("see github.com/hiyouga/LLaMA-Factory/issues/123", None),
    ("trained with llama-factory-fork", None),
])
def test_a_toolkit_named_in_words_is_only_named(text, toolkit):
    read = facts(launch, text)
    assert read.get("toolkit.named") == toolkit
    # Its config unseen, the toolkit's defaults are assumptions, not facts (the config may switch them off).
    assert "toolkit" not in read


def test_a_named_toolkit_assumes_its_checkpointing_and_still_asks():
    from oomdoctor.consultation import default
    reply = default().diagnose("用 LLaMA-Factory 做 qwen2.5-7b 的 lora 微调，单卡 3090，cutoff_len 4096，batch 开到 4，一开始训练就爆显存了")
    assumed = {a["fact"]: a["value"] for a in reply["assumptions"] if a["fact"]}
    assert assumed["train.grad_checkpointing"] is True
    assert "train.grad_checkpointing" not in {f["name"] for f in reply["facts"]}


# --- comments, names, counts in every form (issue #10's config corpus, read again after the merge) ------------
import re  # noqa: E402

from oomdoctor.extractors import comments, sentence, variables  # noqa: E402


@pytest.mark.parametrize("text, name", [
    ("### eval\n# per_device_eval_batch_size: 1\n# eval_strategy: steps\n# eval_steps: 500\n", "eval.steps"),
    ("#if torch.__version__ >= \"2\":\n#     model = torch.compile(model)\ntrainer.train()", "train.torch_compile"),
    ("torchrun --nproc_per_node 2 train.py \\\n#   --deepspeed ds_z3_offload_config.json \\\n  --bf16", "dist.offload_optimizer"),
])
def test_a_commented_out_setting_is_read_by_no_reader(text, name):
    assert name not in observed(text)
    switched_on = re.sub(r"^([ \t]*)#", r"\1", text, flags=re.MULTILINE)
    assert name in observed(switched_on)  # the same line, not commented out, is read


def test_a_value_left_commented_out_beside_another_is_not_read():
    got = observed("base_model: Qwen/Qwen2.5-7B  # meta-llama/Llama-3.1-70B-Instruct")
    assert got["model.name"] == "qwen2.5-7b" and got["model.params_b"] == 7


def test_prose_comments_stay_and_scheduler_directives_are_no_comments():
    prose = "# QLoRA fine-tune of the 7B model\nlearning_rate: 2e-4\n# eval_steps: 500"
    assert comments.without_disabled(prose).splitlines()[0] == "# QLoRA fine-tune of the 7B model"
    assert comments.without_disabled(prose).splitlines()[2].strip() == ""
    assert len(comments.without_disabled(prose)) == len(prose)  # offsets kept
    sbatch = "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gres=gpu:4\n# one job per node\nsrun python train.py"
    got = observed(sbatch)
    assert got["dist.num_gpus"] == 8 and got["dist.gpus_per_node"] == 4 and got["dist.num_nodes"] == 2


@pytest.mark.parametrize("text, name, value", [
    ('File "/content/drive/MyDrive/Colab/SD_LoRA/train_text_to_image_sdxl.py", line 891, in main', "train.method", None),
    ('--pretrained_vae_model_name_or_path="madebyollin/sdxl-vae-fp16-fix"', "train.precision", None),
    ("TheBloke/Llama-2-7B-fp16 trained with --fp16", "train.precision", "fp16"),
    ("I fine-tune it with peft/LoRA", "train.method", "lora"),
    ("bash scripts/finetune_lora.sh", "train.method", "lora"),
])
def test_a_word_inside_a_folder_or_checkpoint_name_is_a_name(text, name, value):
    assert facts(sentence, text).get(name) == value


def test_preprocessing_workers_are_not_dataloader_workers():
    text = "preprocessing_num_workers: 16\n"
    assert "data.num_workers" not in observed(text) and observed(text)["data.preprocessing_workers"] == 16
    assert observed(text + "dataloader_num_workers: 4\n")["data.num_workers"] == 4
    assert facts(sentence, "num_workers=2, pin_memory=True")["data.num_workers"] == 2


@pytest.mark.parametrize("text, count", [
    ("torchtitan's llama 3.1 8b config in a CI container on 8x H100.", 8),
    ("LoRA SFT of Llama3-8B on 6x RTX 4090. Without it", 6),
    ("QLoRA on llama-2-70b with 4 x A100 40GB, launched with torchrun --nproc_per_node 4; it dies while loading.", 4),
    ("一台 8 卡 A100 80G，跑 llama-2-70b 的 QLoRA，第 7 张卡 OOM", 8),
    ("第一张卡满了，一共 4 张卡", 4),
    ("NPROC_PER_NODE=4；CUDA_VISIBLE_DEVICES=0,1,2,3", 4),
    ("Full fine-tuning Llama-3-8B with DeepSpeed ZeRO-3 on A100 40GB cards, seq 2048", None),
    ("it runs on 1-2 GPUs", None),
])
def test_gpu_counts_end_at_punctuation_and_ordinals_and_stages_are_no_counts(text, count):
    assert facts(gpu_count, text).get("dist.num_gpus") == count


@pytest.mark.parametrize("text, per_node, nodes", [
    ("deepspeed --num_gpus=4 finetune_llama.py --deepspeed_config zo_config.json", 4, None),
    ("deepspeed --num_gpus 2 --num_nodes 2 --hostfile hosts train.py", 2, 2),
    ('deepspeed \\\n--include="localhost:2,3" \\\ntrain_sft.py', 2, 1),
    ("srun --gres=gpu:4 --ntasks-per-node=1 --nodes=2 deepspeed llava/train/train_mem.py", 4, 2),
    ("python train.py --num_gpus 8", None, None),      # not the DeepSpeed launcher: a total, not per node
    ("pip install deepspeed --upgrade", None, None),
])
def test_machines_and_gpus_per_machine_from_the_launchers_that_count_per_machine(text, per_node, nodes):
    got = facts(gpu_count, text)
    assert got.get("dist.gpus_per_node") == per_node and got.get("dist.num_nodes") == nodes


def test_full_width_punctuation_ends_a_value_and_a_full_width_colon_assigns():
    assert facts(config_keys, "colocate 模式，vllm_gpu_memory_utilization: 0.85，一跑就 OOM", kb=KB)["rl.vllm_memory_share"] == 0.85
    assert facts(config_keys, "vllm_gpu_memory_utilization：0.85；", kb=KB)["rl.vllm_memory_share"] == 0.85
    assert facts(config_keys, "per_device_train_batch_size=4。", kb=KB)["train.batch_size"] == 4
    assert variables.assignments("NPROC=4; torchrun --nproc_per_node $NPROC train.py")["NPROC"] == "4"
    assert facts(gpu_count, "NPROC=4; torchrun --nproc_per_node $NPROC train.py")["dist.num_gpus"] == 4


def test_an_adapter_checkpoint_beside_the_model_is_not_the_model():
    text = ("--model_name_or_path /data/Llama-2-7b-hf \\\n--checkpoint_dir /home/u/LLaMA-Efficient-Tuning/ckpt/lima \\\n"
            "--finetuning_type lora")
    assert facts(config_keys, text, kb=KB)["model.name"] == "llama-2-7b"
    # litgpt: the checkpoint directory is the model itself
    assert facts(config_keys, "litgpt finetune lora --checkpoint_dir checkpoints/meta-llama/Llama-2-7b-hf", kb=KB)[
        "model.name"] == "llama-2-7b"


@pytest.mark.parametrize("text, value", [
    ("用 TRL 做 GRPO，单卡 A100 80G，LoRA，vLLM colocate 模式，一跑训练就 OOM", "colocate"),
    ("GRPO with a colocated vLLM on each rank", "colocate"),
    ("rollouts come from trl vllm-serve on GPUs 6-7", "server"),
    ("GRPO 用的是单独的 vLLM 服务", "server"),
    ("GRPO without vLLM colocate, plain generate()", None),
])
def test_where_rollouts_are_generated_in_words(text, value):
    assert facts(sentence, text).get("rl.vllm") == value


def test_unsloth_fast_inference_is_a_colocated_vllm_and_contradicts_use_vllm_false():
    assert facts(config_keys, "model, tok = FastLanguageModel.from_pretrained(m, fast_inference=True)", kb=KB)[
        "rl.vllm"] == "colocate"
    both = "--use-vllm False \\\n--fast-inference True \\\n--vllm-gpu-memory-utilization 0.4"
    assert "rl.vllm" not in observed(both) and observed(both)["rl.vllm_memory_share"] == 0.4
    assert observed("--use_vllm False")["rl.vllm"] == "none"


@pytest.mark.parametrize("text, expected", [
    ("Llama-3-8B LoRA on an A100, CUDA out of memory", None),   # 40 or 80 GB: the verdict hangs on it
    ("full fine-tuning on a V100", None),                       # 16 or 32 GB
    ("A100 80GB", "a100-80gb-sxm"), ("8xA100(40G)", "a100-40gb-sxm"), ("V100 32GB", "v100-32gb"),
    ("H100 full finetune", "h100-sxm"),                         # 80 GB SXM and PCIe, 94 GB NVL: close enough
    ("NVIDIA A100-SXM4-40GB", "a100-40gb-sxm"),
])
def test_a_card_sold_in_sizes_far_apart_is_not_given_a_size(text, expected):
    assert facts(gpu_card, text).get("gpu.name") == expected


@pytest.mark.parametrize("text, expected", [
    ("验证集有 2500 条", 2500), ("评估集是1200个样本", 1200), ("验证集有500，训练集10万", 500), ("2,500 eval samples", 2500),
    ("验证集 2048 tokens", None),        # tokens, not samples
    ("验证集有 3 张卡", None),           # cards
    ("验证集有 12345678 条", None),      # past the bound: not its first seven digits
    ("验证集 1.5 万条", None),           # "1.5 万" is not 1 or 5
])
def test_an_eval_set_size_is_a_count_of_samples_and_whole(text, expected):
    assert facts(sentence, text).get("eval.samples") == expected


@pytest.mark.parametrize("text, model_id", [
    ("model_name_or_path: bigscience/bloomz-560m\nper_device_train_batch_size: 8", "bloom-560m"),
    ("用 flan-t5-large 做 seq2seq 微调, batch 16, 爆显存", "flan-t5-large"),
    ("base_model: google/flan-t5-xxl\nadapter: lora", "t5-v1_1-xxl"),
    ("deepseek r1 distill llama 70b qlora on 2x H100", "deepseek-r1-distill-llama-70b"),
])
def test_the_catalog_models_read_from_new_config_copies_are_named_in_text(text, model_id):
    assert observed(text)["model.name"] == model_id


@pytest.mark.parametrize("text, toolkit", [
    ("llamafactory-cli train examples/train_lora/llama3_lora_sft.yaml", "llamafactory"),
    ("CUDA_VISIBLE_DEVICES=0 python src/train_bash.py \\\n    --stage sft \\\n    --do_train", "llamafactory"),
    ("model_name_or_path: Qwen/Qwen2-7B\nstage: sft\nfinetuning_type: lora\n", "llamafactory"),
    ("NPROC_PER_NODE=4 swift sft --model Qwen/Qwen2.5-7B-Instruct --train_type lora", "ms_swift"),
    ("python -m torch.distributed.run --nproc_per_node 4 /workspace/ms-swift/swift/cli/rlhf.py --rlhf_type grpo", "ms_swift"),
    ("accelerate launch train.py --gradient_checkpointing", None),
    ("pip install swift\nswift==2.0", None),
    ("llamafactory-cli train a.yaml\nswift sft --model x", None),  # two toolkits: neither's defaults
])
def test_toolkits(text, toolkit):
    assert facts(launch, text).get("toolkit") == toolkit


def test_toolkit_defaults_turn_checkpointing_on_unless_switched_off():
    assert observed_all("llamafactory-cli train sft.yaml\nfinetuning_type: lora")["train.grad_checkpointing"] is True
    assert observed_all("swift sft --model Qwen/Qwen2-7B --gradient_checkpointing false")["train.grad_checkpointing"] is False
    assert observed_all("llamafactory-cli train\nfinetuning_type: lora\ndisable_gradient_checkpointing: true")[
        "train.grad_checkpointing"] is False


def observed_all(text):
    """Every fact of a one-shot reply, the rules' included."""
    from oomdoctor import consultation
    return {f["name"]: f["value"] for f in consultation.default().diagnose(text)["facts"]}


def test_a_toolkit_command_outranks_a_key_another_toolkit_also_accepts():
    text = "python -m torch.distributed.run /ws/ms-swift/swift/cli/rlhf.py --rlhf_type grpo --finetuning_type lora"
    assert facts(launch, text)["toolkit"] == "ms_swift"


@pytest.mark.parametrize("text, count", [
    ("OpenRLHF 两台机器，每台 8 卡、512G 内存", 16),
    ("2 nodes with 8 GPUs each", 16),
    ("4 台服务器，每个节点 8 张 A100", 32),
    ("two machines, 8 GPUs per node", 16),
])
def test_a_count_per_machine_is_multiplied_by_the_machines(text, count):
    assert facts(gpu_count, text)["dist.num_gpus"] == count


@pytest.mark.parametrize("text", [
    "每台 8 卡，机器数量看调度",          # the machines are not said
    "每机8卡",
    "8 GPUs each, on several nodes",
    "8 GPUs per node",
])
def test_a_count_per_machine_without_the_machines_is_no_job_count(text):
    assert "dist.num_gpus" not in facts(gpu_count, text)


@pytest.mark.parametrize("text, policy", [
    ("deepspeed --module openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen2.5-7B-Instruct "
     "--reward_pretrain /models/Meta-Llama-3-8B-Instruct --critic_pretrain meta-llama/Llama-2-13b-hf", "qwen2.5-7b"),
    ("python3 -m verl.trainer.main_ppo critic.model.path=meta-llama/Llama-2-13b-hf "
     "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
    ("python ppo.py --model_name_or_path Qwen/Qwen2.5-7B-Instruct --reward_model_path meta-llama/Llama-2-13b-hf "
     "--ref_model meta-llama/Llama-2-13b-hf", "qwen2.5-7b"),
])
def test_reward_critic_and_reference_models_are_not_the_trained_model(text, policy):
    assert observed(text)["model.name"] == policy


def test_a_reward_model_alone_names_no_trained_model():
    got = observed("python train.py --reward_pretrain OpenRLHF/Llama-3-8b-rm")
    assert "model.name" not in got and "model.params_b" not in got


@pytest.mark.parametrize("text", [
    "Qwen2-VL-7B 用 swift 做 LoRA，没开 flash attention",
    "trained without flash-attn on a V100",
    "flash attention is off because the card is a V100",
    "FlashAttention2 没开",
    "flash_attn: false",
])
def test_flash_attention_switched_off_rules_flash_out(text):
    got = [f.value for f in sentence.extract(text) if f.name == "train.attention"]
    assert got and isinstance(got[0], Unknown) and got[0].forbids("flash") and not got[0].forbids("eager")


@pytest.mark.parametrize("text, attention", [
    ("swift sft --model Qwen/Qwen2-7B --use_flash_attn false", "eager"),  # ms-swift 2.x loads eager then
    ("swift sft --model Qwen/Qwen2-7B --use_flash_attn true", "flash"),
    ("flash_attn: off", "eager"),                                         # LLaMA-Factory's own word for eager
    ("Mixtral-8x7B 的 4bit LoRA 加 FlashAttention2", "flash"),
    ("LoRA of llama-3-8b with flash attention on an A100", "flash"),
])
def test_attention_as_configured_or_said(text, attention):
    assert observed(text)["train.attention"] == attention


@pytest.mark.parametrize("text", [
    "should I use flash attention?",
    "FlashAttention2 is not installed on this machine",
    "trained on 100 A100 hours",
])
def test_flash_attention_named_but_not_in_use_sets_nothing(text):
    assert "train.attention" not in observed(text)


@pytest.mark.parametrize("text, fact, value", [
    ("zero stage 都设成 3", "dist.zero_stage", 3),
    ("ZeRO stage is set to 2 in the json", "dist.zero_stage", 2),
    ("batch 全调成 1 了", "train.batch_size", 1),
    ("batch size was set to 2", "train.batch_size", 2),
    ("批大小都设为 4", "train.batch_size", 4),
    ("cutoff_len 从 8192 降到 6144", "train.seq_len", 6144),
    ("max_length from 4096 to 2048 did not help", "train.seq_len", 2048),
    ("batch 从 8 降到 2", "train.batch_size", 2),
])
def test_words_between_a_key_and_its_value(text, fact, value):
    assert observed(text)[fact] == value


@pytest.mark.parametrize("text", [
    "显存占用一步步变大，最后 OOM", "显存占用随着训练逐渐升高", "显存越来越大", "GPU memory keeps climbing every step",
    "VRAM usage steadily grows until it crashes",
])
def test_memory_that_grows_in_other_words(text):
    assert observed(text)["log.memory_grows"] is True


@pytest.mark.parametrize("text", ["显存占用 70G", "memory usage is 70 GB", "increasing the batch increases memory"])
def test_memory_stated_but_not_growing(text):
    assert "log.memory_grows" not in observed(text)


@pytest.mark.parametrize("text", ["加载模型的时候内存 OOM 了", "加载数据时报 ray oom", "RAM OOM while loading", "CPU OOM at startup"])
def test_host_memory_in_other_words(text):
    assert observed(text)["log.stated_memory"] == "host"


@pytest.mark.parametrize("text", ["显卡内存 OOM 了", "GPU 内存不够"])
def test_the_cards_memory_is_not_host_memory(text):
    assert observed(text).get("log.stated_memory") != "host"


@pytest.mark.parametrize("text, count", [
    ("SFT of Llama 3.3 70B on 32 H100 80GB", 32), ("across 8 A100s with FSDP", 8), ("using 4 L40S", 4),
    ("16 台机器，共 128 张 A800", 128), ("16 nodes, 8 GPUs each, a total of 128 GPUs", 128),
])
def test_counts_of_named_cards_and_totals(text, count):
    assert facts(gpu_count, text)["dist.num_gpus"] == count


@pytest.mark.parametrize("text", ["4bit LoRA of Mixtral", "4-bit LoRA on a 4090", "nf4 的 LoRA", "LoRA in 4-bit on one T4"])
def test_lora_over_4_bit_weights_is_qlora(text):
    assert observed(text)["train.method"] == "qlora"


@pytest.mark.parametrize("text", ["LoRA, weights in bf16", "8-bit LoRA", "not 4-bit, plain LoRA"])
def test_other_lora_stays_lora(text):
    assert observed(text)["train.method"] == "lora"


@pytest.mark.parametrize("text, sleep", [
    ("GRPO, vLLM colocated on the training GPUs with sleep mode on", True),
    ("openrlhf.cli.train_ppo_ray --colocate_all_models --vllm_enable_sleep --deepspeed_enable_sleep", True),
    ("开启了 vllm 的 sleep 模式", True),
    ("vLLM sleep mode is off", False),
    ("没开 sleep 模式", False),
])
def test_vllm_sleep_mode_in_words_and_flags(text, sleep):
    assert observed(text)["rl.vllm_sleep"] is sleep


@pytest.mark.parametrize("text", ["does sleep mode help?", "without sleep mode it works"])
def test_sleep_mode_asked_about_or_named_as_a_workaround_sets_nothing(text):
    assert "rl.vllm_sleep" not in observed(text)


@pytest.mark.parametrize("text, phase", [
    ("the processes get killed while the next model is loading", "loading"),
    ("加载到第 18 个分片的时候两张卡的显存就都满了", "loading"),
    ("every rank runs out of memory in the first backward", "backward"),
    ("反向传播时 OOM", "backward"),
    ("evaluation at batch size 4 runs out of CUDA memory", "evaluation"),
    ("每次在 Running tokenizer on dataset 阶段就崩了", "data"),
    ("it dies during the tokenization stage", "data"),
])
def test_phases_said_in_words(text, phase):
    assert observed(text)["phase"] == phase


def test_an_evaluation_batch_is_not_the_training_batch():
    got = observed("evaluation at batch size 4 runs out of memory")
    assert got["train.eval_batch_size"] == 4 and "train.batch_size" not in got


@pytest.mark.parametrize("text", ["I fine-tune one model per data split in a Python loop", "one model per fold, inside a training loop"])
def test_models_trained_one_after_another_in_one_process(text):
    assert observed(text)["log.repeated_runs"] is True


@pytest.mark.parametrize("text, share", [
    ("vllm_gpu_memory_utilization is left at its default of 0.9.", 0.9),
    ("gpu_memory_utilization 设成 0.5", 0.5),
    ("vllm_gpu_memory_utilization was set to .3", 0.3),
])
def test_vllms_share_of_the_card_in_words(text, share):
    assert observed(text)["rl.vllm_memory_share"] == pytest.approx(share)


# Issue #13's inputs: a value that says "off", "none" or "decided at run time" sets nothing (or rules the on-value out).
@pytest.mark.parametrize("text, fact", [
    ("use_liger_kernel: false\n", "train.loss"),
    ("cut_cross_entropy: null\n", "train.loss"),
    ("plugins:\n  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\ncut_cross_entropy: false\nbf16: true\n",
     "train.loss"),
    ("chunked_cross_entropy: false\n", "train.loss"),
    ("activation_offloading: disk\n", "train.activation_offload"),
    ("vllm_gpu_memory_utilization: auto\n", "rl.vllm_memory_share"),
    ("context_parallel_size: None\n", "dist.context_parallel"),
    ("tensor_parallel_size: null\n", "dist.tensor_parallel"),
    ("fp8_backend: auto\nfp8: true\n", "train.fp8"),
    ("mixed_precision: fp8\n", "train.fp8"),
    ("fp8_config:\n  backend: MSAMP\n", "train.fp8"),
])
def test_issue13_readers_set_nothing_from_off_empty_or_auto(text, fact):
    assert fact not in observed(text)


@pytest.mark.parametrize("text, fact, value", [
    ("plugins:\n  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\n", "train.loss", "cce"),
    ("chunked_cross_entropy: true\n", "train.loss", "chunked"),
    ("activation_offloading: legacy\n", "train.activation_offload", True),
    ("enable_activation_offloading: False\n", "train.activation_offload", False),
    ("parallelism_config:\n  parallelism_config_sp_size: 4\n", "dist.context_parallel", 4),
    ("megatron sft --tensor_model_parallel_size 4 --context_parallel_size 2\n", "dist.tensor_parallel", 4),
    ("fp8_config:\n  backend: AO\n", "train.fp8", "torchao"),
    ("convert_to_float8_training(model, config=config)\n", "train.fp8", "torchao"),
    ("accelerator = Accelerator(mixed_precision='fp8', kwargs_handlers=[TERecipeKwargs()])\n", "train.fp8", "te"),
])
def test_issue13_readers_read_what_the_config_says(text, fact, value):
    assert observed(text)[fact] == value


@pytest.mark.parametrize("text", [
    "CUDA_VISIBLE_DEVICES=0,1 trl vllm-serve --model Qwen/Qwen2.5-7B --tensor-parallel-size 2\n",
    "vllm serve Qwen/Qwen2.5-7B-Instruct \\\n  --tensor-parallel-size 4 \\\n  --gpu-memory-utilization 0.9\n",
    "llm = LLM(\n    model='Qwen/Qwen2.5-7B',\n    tensor_parallel_size=2,\n)\n",
])
def test_a_vllm_engines_tensor_parallel_size_and_gpus_are_not_the_training_jobs(text):
    got = observed(text)
    assert "dist.tensor_parallel" not in got and "dist.num_gpus" not in got


def test_training_gpus_are_read_beside_a_vllm_server_on_other_gpus():
    got = observed("CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model Qwen/Qwen2.5-1.5B-Instruct\n"
                   "CUDA_VISIBLE_DEVICES=1,2,3,4 accelerate launch --config_file zero2.yaml train.py\n")
    assert got["dist.num_gpus"] == 4 and got["rl.vllm"] == "server"
    assert observed("tensor_parallel_size: 2\n\nvllm serve Qwen/Qwen2.5-7B --tensor-parallel-size 4\n")[
        "dist.tensor_parallel"] == 2


@pytest.mark.parametrize("text, upcast", [
    ("model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)\n", True),
    ("model = prepare_model_for_int8_training(model)\n", True),
    ("# model = prepare_model_for_kbit_training(model)\n", None),
    ("from peft import LoraConfig, prepare_model_for_kbit_training\n", None),
])
def test_peft_kbit_preparation_is_read_where_it_is_called(text, upcast):
    assert observed(text).get("train.kbit_upcast") is upcast


@pytest.mark.parametrize("text, strategy", [
    ("deepspeed 也关了，还是 OOM", None),
    ("我把 deepspeed 关掉了，单卡跑", None),
    ("I turned DeepSpeed off and it still fails", None),
    ("DeepSpeed disabled, plain DDP now", "ddp"),
    ("fsdp off, now ddp", "ddp"),
    # switched on, or a word that only starts like "off"
    ("DeepSpeed is on, ZeRO-2", "deepspeed"),
    ("deepspeed offload to cpu", "deepspeed"),
])
def test_a_strategy_switched_off_is_not_the_strategy(text, strategy):
    read = {o.name: o.value for o in observe(text, knowledge.default())}
    assert read.get("dist.strategy") == strategy


def test_backward_in_prose_is_not_the_backward_pass():
    kb = knowledge.default()
    prose = "the tokenizer runs in backward compatibility mode; then CUDA out of memory"
    assert "phase" not in {o.name for o in observe(prose, kb)}
    frame = 'File "/x/torch/_tensor.py", line 521, in backward\n    torch.autograd.backward(\ntorch.OutOfMemoryError: CUDA out of memory.'
    assert {o.name: o.value for o in observe(frame, kb)}["phase"] == "backward"
