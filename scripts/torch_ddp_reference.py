#!/usr/bin/env python3
"""PyTorch DistributedDataParallel on the same network and GPUs as `jiriki bench train --gpus`: the
reference for jiriki's data-parallel training speed (docs/batch-size.md).

For each per-GPU batch it times PyTorch's training step on one GPU alone and on every GPU of --gpus
under DDP (NCCL, gradients in DDP's buckets overlapped with the backward pass), with the inputs on
the GPUs: bf16 autocast, channels_last, cudnn.benchmark, fused SGD with Nesterov momentum and weight
decay on the weights of rank >= 2, jiriki's loss (scripts/torch_train_reference.py's step, wrapped in
DDP), in each of --variants (eager, torch.compile), the fastest kept per batch and GPU count. With
--jiriki it first runs `jiriki bench train --gpus` under both aggregation modes on the
same GPUs, batches and network, and prints the ratios.

usage: torch_ddp_reference.py [--jiriki build/jiriki] [--gpus 0,1] [--batch 32,256,1024]
                              [--blocks 10 --channels 192] [--variants eager,compile]
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import INPUT_PLANES, POLICY_SIZE, Net  # noqa: E402


class Logits(torch.nn.Module):
    """The network's forward pass as the loss needs it (policy logits, value logit): DDP's gradient
    hooks are set up through forward()."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net.logits(x)


def step_fn(net, batch, dev, compile_model, distributed):
    """One training step of `net` (wrapped in DDP when distributed) on fixed random inputs."""
    net = net.to(dev).train().to(memory_format=torch.channels_last)
    params = list(net.parameters())
    decayed = [p for p in params if p.dim() >= 2]
    others = [p for p in params if p.dim() < 2]
    opt = torch.optim.SGD([{"params": decayed, "weight_decay": 1e-4}, {"params": others, "weight_decay": 0.0}],
                          lr=0.01, momentum=0.9, nesterov=True, fused=True)
    model = Logits(net)
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index], gradient_as_bucket_view=True)
    if compile_model:
        model = torch.compile(model)
    g = torch.Generator(device="cpu").manual_seed(1 + (dist.get_rank() if distributed else 0))
    x = (torch.rand(batch, INPUT_PLANES, 9, 9, generator=g) < 0.1).float().to(dev)
    x = x.contiguous(memory_format=torch.channels_last)
    t = F.one_hot(torch.randint(0, POLICY_SIZE, (batch,), generator=g), POLICY_SIZE).float().to(dev)
    r = (torch.randint(0, 3, (batch,), generator=g).float() / 2).to(dev)
    e = torch.rand(batch, generator=g).to(dev)

    def step():
        with torch.autocast("cuda", torch.bfloat16):
            policy, value = model(x)
        policy, value = policy.float(), value.float()
        ce = -(t * F.log_softmax(policy, dim=1)).sum(1)
        v = (0.667 * F.binary_cross_entropy_with_logits(value, r, reduction="none")
             + 0.333 * F.binary_cross_entropy_with_logits(value, e, reduction="none"))
        (ce + v).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def seconds_per_step(step, seconds, distributed):
    """Median seconds per step over 5 trials of about seconds/5 each, every rank in step."""
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    if distributed:
        dist.barrier()
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    one = time.perf_counter() - t0
    reps = torch.tensor([max(5, int(seconds / 5 / max(one, 1e-6)))], device="cuda")
    if distributed:
        dist.all_reduce(reps, op=dist.ReduceOp.MIN)
    samples = []
    for _ in range(5):
        if distributed:
            dist.barrier()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(int(reps.item())):
            step()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / int(reps.item()))
    if distributed:  # a step lasts as long as the slowest replica's
        s = torch.tensor(samples, device="cuda")
        dist.all_reduce(s, op=dist.ReduceOp.MAX)
        samples = s.tolist()
    return sorted(samples)[2]


def arch_of(args):
    return {"blocks": args.blocks, "channels": args.channels, "eps": 1e-5, "activation": "relu"}


def replica(rank, args, gpus, port, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dev = torch.device("cuda", gpus[rank])
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=len(gpus), device_id=dev)
    torch.backends.cudnn.benchmark = True
    for b in args.batches:
        for variant in args.variants:
            torch.manual_seed(0)
            if variant == "compile":
                torch._dynamo.reset()
            step = step_fn(Net(arch_of(args)), b, dev, variant == "compile", True)
            s = seconds_per_step(step, args.seconds, True)
            if rank == 0:
                results[(b, variant)] = s
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_jiriki(text):
    """{per-GPU batch: (1 GPU samples/s, all samples/s, scaling %)} from `jiriki bench train --gpus`."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)%\s*$", line)
        if m:
            rows[int(m.group(1))] = (float(m.group(2)), float(m.group(3)), float(m.group(4)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jiriki", help="a jiriki built with CUDA and NCCL: run its `bench train --gpus` first")
    ap.add_argument("--gpus", default=None, help="GPU indices (default: every GPU)")
    ap.add_argument("--batch", default="32,256,1024", help="per-GPU batches")
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--channels", type=int, default=192)
    ap.add_argument("--seconds", type=float, default=2.0, help="timing per batch and variant")
    ap.add_argument("--variants", default="eager", help="eager and/or compile (torch.compile, whose DDP optimizer "
                    "splits the graph at the buckets), comma-separated; the fastest is kept")
    args = ap.parse_args()
    args.batches = [int(b) for b in args.batch.split(",")]
    args.variants = args.variants.split(",")
    if not args.variants or any(v not in ("eager", "compile") for v in args.variants):
        sys.exit("torch_ddp_reference.py: --variants takes eager and/or compile")
    gpus = [int(g) for g in args.gpus.split(",")] if args.gpus else list(range(torch.cuda.device_count()))
    if len(gpus) < 2:
        sys.exit("torch_ddp_reference.py: data parallelism needs at least two GPUs")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, NCCL "
          f"{'.'.join(map(str, torch.cuda.nccl.version()))}, {len(gpus)} x {torch.cuda.get_device_name(gpus[0])}, "
          f"network {args.blocks}x{args.channels}, variants {','.join(args.variants)}", flush=True)

    ours = {}
    if args.jiriki:
        for mode in ("nccl", "host"):
            cmd = [args.jiriki, "bench", "train", "--backend", "cuda", "--blocks", str(args.blocks), "--channels",
                   str(args.channels), "--gpus", ",".join(map(str, gpus)), "--allreduce", mode, "--batch", args.batch,
                   "--device-steps", "30", "--positions", "16384"]
            print("$ " + " ".join(cmd), flush=True)
            run = subprocess.run(cmd, capture_output=True, text=True)
            print(run.stdout, flush=True)
            if run.returncode != 0:
                sys.exit("torch_ddp_reference.py: jiriki bench train failed:\n" + run.stderr[-2000:])
            ours[mode] = parse_jiriki(run.stdout)

    # One GPU alone (no DDP), for the scaling.
    torch.cuda.set_device(gpus[0])
    torch.backends.cudnn.benchmark = True
    single = {}
    for b in args.batches:
        for variant in args.variants:
            torch.manual_seed(0)
            if variant == "compile":
                torch._dynamo.reset()
            dev = torch.device("cuda", gpus[0])
            step = step_fn(Net(arch_of(args)), b, dev, variant == "compile", False)
            single[(b, variant)] = seconds_per_step(step, args.seconds, False)
            print(f"  one GPU, batch {b}, {variant}: {b / single[(b, variant)]:,.0f} samples/s", flush=True)
    torch.cuda.empty_cache()

    results = mp.Manager().dict()
    t0 = time.time()
    mp.spawn(replica, args=(args, gpus, free_port(), results), nprocs=len(gpus), join=True)
    print(f"  DDP on {len(gpus)} GPUs: {time.time() - t0:.0f} s", flush=True)

    n = len(gpus)
    head = f"\n{'batch/GPU':>9} {'PyTorch 1 GPU':>14} {'DDP all':>10} {'DDP scaling':>11} {'variants':>16}"
    if ours:
        head += f" {'jiriki NCCL':>12} {'x DDP':>6} {'jiriki host':>12} {'x DDP':>6}"
    print(head)
    for b in args.batches:
        # The fastest variant on one GPU and under DDP, each.
        v1 = min(args.variants, key=lambda v: single[(b, v)])
        vn = min(args.variants, key=lambda v: results[(b, v)])
        one, ddp = b / single[(b, v1)], n * b / results[(b, vn)]
        line = f"{b:>9} {one:>14,.0f} {ddp:>10,.0f} {100 * ddp / (n * one):>10.1f}% {v1 + '/' + vn:>16}"
        for mode in ("nccl", "host"):
            if mode in ours and b in ours[mode]:
                line += f" {ours[mode][b][1]:>12,.0f} {ours[mode][b][1] / ddp:>6.2f}"
        print(line)
    print("(samples/s of all GPUs together, one training step with its inputs on the GPUs; jiriki's: "
          "`bench train --gpus`, CUDA graph replays of the step; PyTorch's: the median of 5 timed runs, "
          "the slowest replica's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
