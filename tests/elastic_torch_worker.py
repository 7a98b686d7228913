#!/usr/bin/python3
"""A plain elastic PyTorch worker, written the way torchrun's elastic agent
expects one: nothing in it knows the platform it runs on. Each start of the
worker group joins the process group from the env contract (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT; gloo on CPU), resumes from the
checkpoint rank 0 keeps in CKPT_DIR, checks one all-reduce over the whole
world, and appends "WORLD_SIZE RANK RESUMED_STEP SUM RESTARTS" to LOG (SUM
is the all-reduced 1 + 2 + ... + WORLD_SIZE, RESTARTS torchrun's
TORCHELASTIC_RESTART_COUNT). Then it trains until it is stopped:
each step all-reduces a gradient, and rank 0 saves the step and the weights
(torch.save to a temporary file, then a rename).

Usage: elastic_torch_worker.py LOG CKPT_DIR
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    log_path, ckpt_dir = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    ckpt = os.path.join(ckpt_dir, "state.pt")
    state = {"step": 0, "w": torch.zeros(4)}
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
    # Every rank resumes from the same step: rank 0's, as it read it.
    step = torch.tensor([state["step"]], dtype=torch.int64)
    dist.broadcast(step, src=0)
    w = state["w"]
    probe = torch.tensor([float(rank + 1)])
    dist.all_reduce(probe)
    with open(log_path, "a") as log:
        restarts = os.environ.get("TORCHELASTIC_RESTART_COUNT", "-1")
        log.write(f"{world} {rank} {int(step.item())} {int(probe.item())} {restarts}\n")
    s = int(step.item())
    while True:
        grad = torch.full((4,), float(rank + 1))
        dist.all_reduce(grad)
        w -= 0.01 * grad / world
        s += 1
        if rank == 0:
            tmp = ckpt + ".tmp"
            torch.save({"step": s, "w": w}, tmp)
            os.replace(tmp, ckpt)
        time.sleep(0.05)  # sleep override: pacing, a step of real work


if __name__ == "__main__":
    main()
