"""Each extractor on the wordings real tools print."""
import pytest

from oomdoctor import knowledge
from oomdoctor.extractors import config_keys, cuda_oom, deepspeed, free_mem, host_oom, nvidia_smi, progress, symptoms
from oomdoctor.extractors.units import parse_size

KB = knowledge.default()


def facts(extractor, text, **kw):
    return {f.name: f.value for f in extractor.extract(text, **kw)}


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
    (FLAGS, {"dist.num_gpus": 8, "train.batch_size": 2, "train.precision": "bf16", "train.grad_checkpointing": True,
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
