"""PyTorch reference for collectives/examples/allreduce_bench.rs: torch.distributed all_reduce
(NCCL backend, PyTorch's own libnccl), one process per GPU, same sizes and protocol
(warm-up, `iters` calls between two CUDA events, the slowest rank's time). In-place, as
torch.distributed.all_reduce is. Prints `torch-nccl <bytes> <time_us> <algbw> <busbw>`.
Run: python3 torch_allreduce_ref.py [max_bytes]"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, max_bytes, port):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    x = torch.full((max_bytes // 4,), float(rank + 1), device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    bytes_ = 8
    if rank == 0:
        print(f"# {world} x {torch.cuda.get_device_name(0)}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))} (torch {torch.__version__})", flush=True)
    while bytes_ <= max_bytes:
        count = bytes_ // 4
        warmup, iters = (10, 100) if bytes_ <= (1 << 20) else (5, 20)
        buf = x[:count]
        for _ in range(warmup):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        dist.barrier()
        start.record()
        for _ in range(iters):
            dist.all_reduce(buf)
        end.record()
        end.synchronize()
        us = torch.tensor([start.elapsed_time(end) * 1e3 / iters], device="cuda")
        dist.all_reduce(us, op=dist.ReduceOp.MAX)
        if rank == 0:
            t = us.item()
            algbw = bytes_ / (t * 1e-6) / 1e9
            print(f"torch-nccl {bytes_} {t:.2f} {algbw:.3f} {algbw * 2 * (world - 1) / world:.3f}", flush=True)
        bytes_ *= 2
    dist.destroy_process_group()


if __name__ == "__main__":
    max_bytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 30
    world = torch.cuda.device_count()
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(world, max_bytes, port), nprocs=world)
