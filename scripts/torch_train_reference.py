#!/usr/bin/env python3
"""An independent check of jiriki's GPU trainer, and PyTorch's training speed on the same network.

1. Runs `jiriki bench train --backend cuda` (a fresh network trained on random-game positions) at
   each batch size: the trainer's samples/s end to end (data loader included), the loader's alone,
   and the GPU step's alone (inputs on the device, CUDA graph replays). With --dump it also writes a
   batch, the network and jiriki's gradients for that batch.
2. Rebuilds the network in PyTorch (scripts/torch_reference.py reads the model file), computes the
   same loss on the same batch in float64 (batch norm in training mode) and compares jiriki's
   gradients with PyTorch's, tensor by tensor. For scale it does the same for PyTorch's own bf16
   autocast gradients: both are bf16 computations held against one exact reference.
3. Times PyTorch's training step on the same network and GPU (bf16 autocast, channels_last,
   torch.compile of forward and loss, fused SGD with Nesterov momentum and weight decay on the
   weights of rank >= 2, as jiriki's): eager and compiled, each with cuDNN's heuristic
   algorithms and with cudnn.benchmark's timed ones, the fastest kept. Prints samples/s, the
   ratio, and the fraction of the bf16 matrix rate (the datasheet figure, and one measured here by a
   large matmul) reached by each.

usage: torch_train_reference.py --jiriki build/jiriki [--batch 256,1024] [--blocks 10 --channels 192]
"""
import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import INPUT_PLANES, POLICY_SIZE, SQUARES, VALUE_HIDDEN, Net, matmul_tflops, read_model, time_gpu  # noqa: E402


def fail(msg):
    sys.exit(f"torch_train_reference.py: {msg}")


def read_gradient_dump(path):
    """(n, val_lambda, loss sums, features, target, result, eval, {name: gradient}) from `bench train --dump`."""
    data = open(path, "rb").read()
    if data[:8] != b"JIRIKIGD":
        fail(f"{path}: not a gradient dump")
    version, n, val_lambda = struct.unpack_from("<Iif", data, 8)
    if version != 1:
        fail(f"{path}: dump version {version}, this script reads 1")
    sums = struct.unpack_from("<3d", data, 20)
    off = 44

    def take(count):
        nonlocal off
        a = np.frombuffer(data, dtype="<f4", count=count, offset=off).copy()
        off += 4 * count
        return a

    features = take(n * INPUT_PLANES * SQUARES).reshape(n, INPUT_PLANES, 9, 9)
    target = take(n * POLICY_SIZE).reshape(n, POLICY_SIZE)
    result, evals = take(n), take(n)
    (count,) = struct.unpack_from("<I", data, off)
    off += 4
    grads = {}
    for _ in range(count):
        (length,) = struct.unpack_from("<I", data, off)
        off += 4
        name = data[off:off + length].decode()
        off += length
        (floats,) = struct.unpack_from("<Q", data, off)
        off += 8
        grads[name] = take(floats)
    if off != len(data):
        fail(f"{path}: {len(data) - off} bytes left after the last tensor")
    return n, val_lambda, sums, features, target, result, evals, grads


def jiriki_parameters(net):
    """{jiriki tensor name: the PyTorch parameter}, for the trainable tensors."""
    out = {}

    def conv_bn(prefix, m):
        out[prefix + ".weight"] = m.conv.weight
        out[prefix + ".bn.gamma"] = m.bn.weight
        out[prefix + ".bn.beta"] = m.bn.bias

    conv_bn("stem.conv", net.stem)
    for i, (c1, c2) in enumerate(net.blocks):
        conv_bn(f"blocks.{i}.conv1", c1)
        conv_bn(f"blocks.{i}.conv2", c2)
    out["policy.conv.weight"] = net.policy_conv.weight
    out["policy.bias"] = net.policy_bias
    conv_bn("value.conv", net.value_conv)
    out["value.fc1.weight"], out["value.fc1.bias"] = net.fc1.weight, net.fc1.bias
    out["value.fc2.weight"], out["value.fc2.bias"] = net.fc2.weight, net.fc2.bias
    return out


def losses(policy, value_logit, target, result, evals, val_lambda):
    """jiriki's loss (nn/layers_backward.h): the batch mean, and the three per-term sums."""
    policy, value_logit = policy.to(target.dtype), value_logit.to(target.dtype)
    ce = -(target * F.log_softmax(policy, dim=1)).sum(1)
    bce_r = F.binary_cross_entropy_with_logits(value_logit, result, reduction="none")
    bce_e = F.binary_cross_entropy_with_logits(value_logit, evals, reduction="none")
    per_sample = ce + (1 - val_lambda) * bce_r + val_lambda * bce_e
    return per_sample.mean(), (ce.sum().item(), bce_r.sum().item(), bce_e.sum().item())


def rel(got, want):
    got, want = got.double(), want.double()
    return (torch.linalg.norm(got - want) / torch.linalg.norm(want)).item()


def compare_gradients(dump, arch, tensors, dev):
    n, val_lambda, sums, features, target, result, evals, ours = read_gradient_dump(dump)
    x = torch.from_numpy(features).to(dev)
    t, r, e = (torch.from_numpy(a).to(dev) for a in (target, result, evals))
    grads = {}
    for variant in ("float64", "bf16"):
        net = Net(arch).load(tensors).to(dev).train()
        xv, tv, rv, ev = x, t, r, e
        if variant == "float64":
            net, xv, tv, rv, ev = net.double(), x.double(), t.double(), r.double(), e.double()
            policy, value = net.logits(xv)
        else:
            net = net.to(memory_format=torch.channels_last)
            with torch.autocast("cuda", torch.bfloat16):
                policy, value = net.logits(xv.contiguous(memory_format=torch.channels_last))
        loss, variant_sums = losses(policy, value, tv, rv, ev, val_lambda)
        loss.backward()
        grads[variant] = {k: p.grad.detach().flatten() for k, p in jiriki_parameters(net).items()}
        if variant == "float64":
            ref_sums = variant_sums
    print(f"\ngradients of the mean loss on {n} positions (batch norm in training mode), relative L2 error "
          f"against PyTorch float64:")
    print(f"  loss sums jiriki / float64: policy {sums[0]:.6g} / {ref_sums[0]:.6g}, value {sums[1]:.6g} / "
          f"{ref_sums[1]:.6g}, eval {sums[2]:.6g} / {ref_sums[2]:.6g}")
    print(f"  {'tensor':<28} {'jiriki cuda':>12} {'PyTorch bf16':>13}")
    ok = True
    diff = {"jiriki": 0.0, "bf16": 0.0}
    norm = 0.0
    for name, ref in grads["float64"].items():
        if name not in ours:
            fail(f"the dump has no gradient for {name}")
        mine = torch.from_numpy(ours[name]).to(dev)
        if mine.numel() != ref.numel():
            fail(f"{name}: {mine.numel()} values in the dump, {ref.numel()} in PyTorch")
        e_ours, e_bf16 = rel(mine, ref), rel(grads["bf16"][name], ref)
        diff["jiriki"] += (torch.linalg.norm(mine.double() - ref) ** 2).item()
        diff["bf16"] += (torch.linalg.norm(grads["bf16"][name].double() - ref) ** 2).item()
        norm += (torch.linalg.norm(ref) ** 2).item()
        bound = max(6e-2, 3 * e_bf16)
        flag = "" if e_ours < bound else f"   <-- over {bound:.1e}"
        ok &= e_ours < bound
        print(f"  {name:<28} {e_ours:>12.2e} {e_bf16:>13.2e}{flag}")
    all_ours, all_bf16 = (diff["jiriki"] / norm) ** 0.5, (diff["bf16"] / norm) ** 0.5
    overall_bound = max(2e-2, 2 * all_bf16)
    print(f"  {'(all tensors)':<28} {all_ours:>12.2e} {all_bf16:>13.2e}")
    loss_ok = all(abs(a - b) <= 1e-2 * abs(b) for a, b in zip(sums, ref_sums))
    ok &= all_ours < overall_bound and loss_ok
    print("  RESULT: " + ("PASS" if ok else "FAIL") + f" (bounds: all tensors < {overall_bound:.1e}, each tensor < "
          f"max(6e-2, 3 x PyTorch bf16's), loss sums within 1e-2)", flush=True)
    return ok


def torch_step_rate(arch, tensors, features, batch, compile_model, dev):
    """Samples/s of PyTorch's training step: bf16 autocast, channels_last, fused SGD (Nesterov)."""
    net = Net(arch).load(tensors).to(dev).train().to(memory_format=torch.channels_last)
    params = jiriki_parameters(net)
    decayed = [p for p in params.values() if p.dim() >= 2]
    others = [p for p in params.values() if p.dim() < 2]
    opt = torch.optim.SGD([{"params": decayed, "weight_decay": 1e-4}, {"params": others, "weight_decay": 0.0}],
                          lr=0.01, momentum=0.9, nesterov=True, fused=True)
    x = torch.from_numpy(np.resize(features, (batch,) + features.shape[1:])).to(dev)
    x = x.contiguous(memory_format=torch.channels_last)
    g = torch.Generator(device="cpu").manual_seed(1)
    labels = torch.randint(0, POLICY_SIZE, (batch,), generator=g)
    t = F.one_hot(labels, POLICY_SIZE).float().to(dev)
    r = (torch.randint(0, 3, (batch,), generator=g).float() / 2).to(dev)
    e = torch.rand(batch, generator=g).to(dev)

    # jiriki's loss as losses() computes it, less the per-term sums, whose .item() would synchronise.
    def mean_loss(x, t, r, e):
        with torch.autocast("cuda", torch.bfloat16):
            policy, value = net.logits(x)
        policy, value = policy.float(), value.float()
        ce = -(t * F.log_softmax(policy, dim=1)).sum(1)
        v = (0.667 * F.binary_cross_entropy_with_logits(value, r, reduction="none")
             + 0.333 * F.binary_cross_entropy_with_logits(value, e, reduction="none"))
        return (ce + v).mean()

    if compile_model:
        torch._dynamo.reset()  # compiled afresh: under this call's cudnn.benchmark, for this network
    fn = torch.compile(mean_loss) if compile_model else mean_loss

    def step():
        loss = fn(x, t, r, e)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return batch / time_gpu(step, seconds=1.0)


def parse_bench(text):
    """{batch: (trainer, loader, gpu samples/s)} from `jiriki bench train --backend cuda`."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", line)
        if m:
            rows[int(m.group(1))] = (float(m.group(2)), float(m.group(3)), float(m.group(4)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jiriki", required=True, help="path of the jiriki binary (built with CUDA)")
    ap.add_argument("--batch", default="256,1024")
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--channels", type=int, default=192)
    ap.add_argument("--steps", default="200", help="jiriki's end-to-end steps per batch size (the first includes "
                    "capturing the CUDA graphs)")
    ap.add_argument("--loader-threads", default="8")
    ap.add_argument("--nominal-tflops", type=float, default=989.0,
                    help="bf16 dense matrix rate to quote against (989: H100 SXM datasheet)")
    ap.add_argument("--no-compile", action="store_true", help="time PyTorch eager only")
    args = ap.parse_args()
    batches = [int(b) for b in args.batch.split(",")]
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # No cached compilations: each variant is compiled afresh under its own cudnn.benchmark setting
    # (a cache hit would hand the benchmark variant the heuristic variant's compiled graph).
    torch._inductor.config.fx_graph_cache = False
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")

    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "grad.bin")
        cmd = [args.jiriki, "bench", "train", "--backend", "cuda", "--blocks", str(args.blocks), "--channels",
               str(args.channels), "--batch", args.batch, "--steps", args.steps, "--loader-threads",
               args.loader_threads, "--dump", dump]
        print("$ " + " ".join(cmd), flush=True)
        t0 = time.time()
        run = subprocess.run(cmd, capture_output=True, text=True)
        print(run.stdout + run.stderr + f"({time.time() - t0:.0f} s)", flush=True)
        if run.returncode != 0:
            fail("jiriki bench train failed")
        ours = parse_bench(run.stdout)
        arch, tensors = read_model(dump + ".jnn")
        grads_ok = compare_gradients(dump, arch, tensors, dev)
        features = read_gradient_dump(dump)[3]

    c, blocks = arch["channels"], arch["blocks"]
    macs = (SQUARES * 9 * c * INPUT_PLANES + SQUARES * 9 * c * c * 2 * blocks + 2 * SQUARES * c * 27
            + POLICY_SIZE * VALUE_HIDDEN + VALUE_HIDDEN)
    flop = 6 * macs  # per sample and step: forward, backward data, backward weights
    peak = matmul_tflops()
    print(f"\n{flop / 1e9:.3f} GFLOP per sample and step; bf16 8192^3 matmul here: {peak:.0f} TFLOP/s "
          f"(nominal {args.nominal_tflops:.0f})", flush=True)
    rows = []
    for b in batches:
        variants = {}
        # cuDNN's algorithms chosen by its heuristics, then by timing them (cudnn.benchmark).
        for timed_algos in (False, True):
            torch.backends.cudnn.benchmark = timed_algos
            suffix = "+bench" if timed_algos else ""
            variants["eager" + suffix] = torch_step_rate(arch, tensors, features, b, False, dev)
            if not args.no_compile:
                t0 = time.time()
                try:
                    variants["compile" + suffix] = torch_step_rate(arch, tensors, features, b, True, dev)
                except Exception as e:  # a failed compile leaves the eager figure standing
                    print(f"  torch.compile{suffix} failed at batch {b}: {e}")
                print(f"  batch {b}: torch.compile{suffix} and timing took {time.time() - t0:.0f} s")
        best = max(variants, key=variants.get)
        rows.append((b, variants, best))
        print(f"  batch {b}: " + ", ".join(f"PyTorch {k} {v:,.0f} samples/s" for k, v in variants.items()), flush=True)

    print(f"\n{'batch':>6} {'jiriki GPU':>11} {'PyTorch':>9} {'variant':>13} {'ratio':>6} {'jiriki TF/s':>11} "
          f"{'%nominal':>8} {'%matmul':>8} {'PyT TF/s':>9} {'%matmul':>8} {'jiriki e2e':>11} {'loader':>9}")
    for b, variants, best in rows:
        trainer, loader, gpu = ours.get(b, (float("nan"),) * 3)
        tp = variants[best]
        tf, ttf = gpu * flop * 1e-12, tp * flop * 1e-12
        print(f"{b:>6} {gpu:>11,.0f} {tp:>9,.0f} {best:>13} {gpu / tp:>6.2f} {tf:>11.1f} "
              f"{100 * tf / args.nominal_tflops:>7.1f}% {100 * tf / peak:>7.1f}% {ttf:>9.1f} {100 * ttf / peak:>7.1f}% "
              f"{trainer:>11,.0f} {loader:>9,.0f}")
    print("(samples/s. jiriki GPU and PyTorch: one training step with its inputs on the GPU, CUDA events; "
          "jiriki e2e: `train` with its data loader, host to device copies and loss read-back; loader: the "
          "loader alone)")
    return 0 if grads_ok else 1


if __name__ == "__main__":
    sys.exit(main())
