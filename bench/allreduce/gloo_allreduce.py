#!/usr/bin/python3
"""PyTorch gloo all-reduce timings: the baseline column of
athanor-bench-allreduce --hosts. One rank, started with the env contract
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); f32 sum on CPU tensors, sizes
doubling from --min-bytes to --max-bytes, each the median of --batches
batches of --iters calls after --warmup, the slowest rank's median. Rank 0
writes one JSON object per size to --json. Exits 3 when a result is wrong.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--min-bytes", type=int, required=True)
    p.add_argument("--max-bytes", type=int, required=True)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--json", required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = []
    wrong = 0
    size = max(a.min_bytes, 4)
    first = True
    while size <= a.max_bytes:
        count = size // 4
        base = torch.arange(count, dtype=torch.float32) % 11
        buf = base + rank
        for _ in range(a.warmup * (20 if first else 1)):
            dist.all_reduce(buf)
        per_call = []
        for _ in range(a.batches):
            buf.copy_(base + rank)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(a.iters):
                dist.all_reduce(buf)
            per_call.append((time.perf_counter() - t0) / a.iters)
        # One checked call (the timed ones compound the sums).
        buf.copy_(base + rank)
        dist.all_reduce(buf)
        want = base * world + world * (world - 1) / 2
        wrong += int((buf != want).sum().item())
        t = torch.tensor([statistics.median(per_call)], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        t = t.item()
        bus = 2.0 * (world - 1) / world
        rows.append({"size_bytes": size, "time_us": t * 1e6,
                     "busbw_gbps": size / t / 1e9 * bus, "wrong": wrong})
        size *= 2
        first = False
    if rank == 0:
        with open(a.json, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()
    return 3 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
