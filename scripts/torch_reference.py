#!/usr/bin/env python3
"""An independent check of jiriki's network, and PyTorch's speed on it, on a GPU machine.

1. Reads a jiriki model file (format: nn/model_file.h) with its own parser and builds the same
   ResNet in PyTorch, batch norms unfolded (nn/model.h describes the network).
2. Reads the dump of `jiriki bench nn --dump FILE` (features of N real positions and jiriki's
   policy logits and win probabilities for them) and compares jiriki's outputs with PyTorch's in
   fp32 (TF32 off). For scale it also prints how far PyTorch's own bf16 inference is from fp32.
3. Times PyTorch's best inference (bf16, channels_last; eager with batch norm folded inside a CUDA
   graph, and torch.compile with inductor's freezing and CUDA graphs; each with cuDNN's heuristic
   algorithms and with cudnn.benchmark's timed ones) and `jiriki bench nn
   --gpu-only` at each batch size, in alternating rounds with the same protocol, and prints
   positions/s, the ratio and the fraction of the bf16 matrix rate (the nominal figure, and one
   measured here by a large matmul).

usage: torch_reference.py --model M.jnn --jiriki build/jiriki [--batch 1,16,64,256,1024]
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
import torch.nn as tnn
import torch.nn.functional as F

INPUT_PLANES, SQUARES, POLICY_SIZE, VALUE_HIDDEN = 119, 81, 2187, 256
FORMAT_VERSION = 2


def fail(msg):
    sys.exit(f"torch_reference.py: {msg}")


def read_model(path):
    """Returns (architecture dict, {name: float32 array}) from a jiriki model file."""
    data = open(path, "rb").read()
    if data[:8] != b"JIRIKINN":
        fail(f"{path}: wrong magic, not a jiriki model file")
    version, payload_size = struct.unpack_from("<IQ", data, 8)
    if version not in (1, FORMAT_VERSION):
        fail(f"{path}: model format version {version}, this script reads 1 and {FORMAT_VERSION}")
    if len(data) != 20 + payload_size + 8:
        fail(f"{path}: {len(data)} bytes, the header announces {20 + payload_size + 8}")
    # The FNV-1a checksum is left to jiriki, which loaded the same file; a byte-by-byte loop in
    # Python would take seconds on a 10-block network.
    off = 20
    feature_set, blocks, channels, activation, eps, count = struct.unpack_from("<IIIIfI", data, off)
    off += 24
    arch = dict(blocks=blocks, channels=channels, activation="swish" if activation == 1 else "relu", eps=eps)
    tensors = {}
    for _ in range(count):
        (name_len,) = struct.unpack_from("<I", data, off)
        off += 4
        name = data[off:off + name_len].decode()
        off += name_len
        (rank,) = struct.unpack_from("<I", data, off)
        off += 4
        shape = struct.unpack_from(f"<{rank}I", data, off)
        off += 4 * rank
        size = int(np.prod(shape)) if rank else 1
        storage = 0  # version 2: 0 f32, 1 bf16 (the upper half of an f32)
        if version >= 2:
            (storage,) = struct.unpack_from("<I", data, off)
            off += 4
        if storage == 1:
            halves = np.frombuffer(data, dtype="<u2", count=size, offset=off).astype(np.uint32) << 16
            tensors[name] = halves.view(np.float32).reshape(shape).copy()
            off += 2 * size
        elif storage == 0:
            tensors[name] = np.frombuffer(data, dtype="<f4", count=size, offset=off).reshape(shape).copy()
            off += 4 * size
        else:
            fail(f"{path}: tensor {name}: unknown storage {storage}")
    if off != 20 + payload_size:
        fail(f"{path}: {20 + payload_size - off} bytes left after the last tensor")
    return arch, tensors


class ConvBN(tnn.Module):
    def __init__(self, cin, cout, k, eps):
        super().__init__()
        self.conv = tnn.Conv2d(cin, cout, k, padding=k // 2, bias=False)
        self.bn = tnn.BatchNorm2d(cout, eps=eps)

    def forward(self, x):
        return self.bn(self.conv(x))

    def load(self, t, prefix):
        self.conv.weight.data = torch.from_numpy(t[prefix + ".weight"])
        self.bn.weight.data = torch.from_numpy(t[prefix + ".bn.gamma"])
        self.bn.bias.data = torch.from_numpy(t[prefix + ".bn.beta"])
        self.bn.running_mean.data = torch.from_numpy(t[prefix + ".bn.mean"])
        self.bn.running_var.data = torch.from_numpy(t[prefix + ".bn.var"])

    def fold(self):
        """Batch norm folded into the convolution (a second, independent implementation)."""
        scale = self.bn.weight / torch.sqrt(self.bn.running_var + self.bn.eps)
        conv = tnn.Conv2d(self.conv.in_channels, self.conv.out_channels, self.conv.kernel_size,
                          padding=self.conv.padding, bias=True)
        conv.weight.data = self.conv.weight * scale.view(-1, 1, 1, 1)
        conv.bias.data = self.bn.bias - self.bn.running_mean * scale
        return conv


class Net(tnn.Module):
    """stem, N residual blocks, policy head (1x1 conv + per-logit bias), value head."""

    def __init__(self, arch):
        super().__init__()
        c, eps = arch["channels"], arch["eps"]
        self.act = F.relu if arch["activation"] == "relu" else F.silu
        self.stem = ConvBN(INPUT_PLANES, c, 3, eps)
        self.blocks = tnn.ModuleList(tnn.ModuleList([ConvBN(c, c, 3, eps), ConvBN(c, c, 3, eps)])
                                     for _ in range(arch["blocks"]))
        self.policy_conv = tnn.Conv2d(c, 27, 1, bias=False)
        self.policy_bias = tnn.Parameter(torch.zeros(POLICY_SIZE))
        self.value_conv = ConvBN(c, 27, 1, eps)
        self.fc1 = tnn.Linear(POLICY_SIZE, VALUE_HIDDEN)
        self.fc2 = tnn.Linear(VALUE_HIDDEN, 1)

    def load(self, t):
        self.stem.load(t, "stem.conv")
        for i, (c1, c2) in enumerate(self.blocks):
            c1.load(t, f"blocks.{i}.conv1")
            c2.load(t, f"blocks.{i}.conv2")
        self.policy_conv.weight.data = torch.from_numpy(t["policy.conv.weight"])
        self.policy_bias.data = torch.from_numpy(t["policy.bias"])
        self.value_conv.load(t, "value.conv")
        self.fc1.weight.data = torch.from_numpy(t["value.fc1.weight"])
        self.fc1.bias.data = torch.from_numpy(t["value.fc1.bias"])
        self.fc2.weight.data = torch.from_numpy(t["value.fc2.weight"])
        self.fc2.bias.data = torch.from_numpy(t["value.fc2.bias"])
        return self

    def fold(self):
        """The same network with every batch norm folded into its convolution."""
        self.stem = self.stem.fold()
        for pair in self.blocks:
            pair[0], pair[1] = pair[0].fold(), pair[1].fold()
        self.value_conv = self.value_conv.fold()
        return self

    def logits(self, x):
        """x: [n,119,9,9] -> (policy logits [n,2187] in NCHW order 81*label+sq, value logit [n])."""
        a = self.act
        h = a(self.stem(x))
        for c1, c2 in self.blocks:
            h = a(h + c2(a(c1(h))))
        policy = self.policy_conv(h).flatten(1) + self.policy_bias
        v = a(self.value_conv(h)).flatten(1)
        return policy, self.fc2(a(self.fc1(v))).squeeze(1)

    def forward(self, x):
        """x: [n,119,9,9] -> (policy logits [n,2187], win probability [n])."""
        policy, value = self.logits(x)
        return policy, torch.sigmoid(value)


def read_dump(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<i", data, 0)
    expected = 4 + 4 * n * (INPUT_PLANES * SQUARES + POLICY_SIZE + 1)
    if len(data) != expected:
        fail(f"{path}: {len(data)} bytes, {n} positions need {expected}")
    arr = np.frombuffer(data, dtype="<f4", offset=4)
    f_end = n * INPUT_PLANES * SQUARES
    p_end = f_end + n * POLICY_SIZE
    return (arr[:f_end].reshape(n, INPUT_PLANES, 9, 9).copy(), arr[f_end:p_end].reshape(n, POLICY_SIZE).copy(),
            arr[p_end:].copy())


def errors(got, want):
    got, want = got.double(), want.double()
    return (torch.linalg.norm(got - want) / torch.linalg.norm(want)).item(), (got - want).abs().max().item()


def time_gpu(fn, seconds=0.5, trials=5):
    """Median seconds per call of fn() (GPU work, timed with CUDA events)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    reps = max(5, int(seconds / trials / max(start.elapsed_time(end) * 1e-3, 1e-6)))
    samples = []
    for _ in range(trials):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3 / reps)
    return sorted(samples)[trials // 2]


def cuda_graph(fn, x):
    """fn(x) captured in a CUDA graph on the static input x; returns the replay function."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn(x)
    return g.replay


def matmul_tflops():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    return 2 * 8192**3 / time_gpu(lambda: a @ b, seconds=1.0) * 1e-12


def parse_bench(text):
    """{'e2e': {batch: pos/s}, 'gpu': {batch: pos/s}} from `jiriki bench nn` output."""
    tables, current = {"e2e": {}, "gpu": {}}, "e2e"
    for line in text.splitlines():
        if line.startswith("GPU only"):
            current = "gpu"
        m = re.match(r"\s*(\d+)\s+([\d.]+)\s+([\d.]+)", line)
        if m:
            tables[current][int(m.group(1))] = float(m.group(2))
    return tables


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--jiriki", required=True, help="path of the jiriki binary (built with CUDA)")
    ap.add_argument("--batch", default="1,16,64,256,1024")
    ap.add_argument("--seconds", default="1", help="jiriki bench's time per batch size")
    ap.add_argument("--nominal-tflops", type=float, default=790.0, help="bf16 dense matrix rate to quote against")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (eager + CUDA graph only)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating timing rounds of jiriki and PyTorch")
    ap.add_argument("--window-seconds", type=float, default=0.5,
                    help="time per batch size in each round (five windows), on both sides")
    args = ap.parse_args()
    batches = [int(b) for b in args.batch.split(",")]
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")

    arch, tensors = read_model(args.model)
    c, blocks = arch["channels"], arch["blocks"]
    macs = (SQUARES * 9 * c * INPUT_PLANES + SQUARES * 9 * c * c * 2 * blocks + 2 * SQUARES * c * 27
            + POLICY_SIZE * VALUE_HIDDEN + VALUE_HIDDEN)
    flop = 2 * macs
    print(f"model {args.model}: {arch}, {flop / 1e9:.4f} GFLOP per position")

    # jiriki's own benchmark first, on an otherwise idle GPU; it also writes the dump compared below.
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "dump.bin")
        cmd = [args.jiriki, "bench", "nn", "--model", args.model, "--backend", "cuda", "--batch", args.batch,
               "--seconds", args.seconds, "--dump", dump]
        print("$ " + " ".join(cmd), flush=True)
        run = subprocess.run(cmd, capture_output=True, text=True)
        print(run.stdout + run.stderr, flush=True)
        if run.returncode != 0:
            fail("jiriki bench nn failed")
        ours = parse_bench(run.stdout)
        features, our_policy, our_value = read_dump(dump)

    # 1. Outputs: jiriki (bf16) against PyTorch fp32 with batch norms unfolded.
    net = Net(arch).load(tensors).to(dev).eval()
    x = torch.from_numpy(features).to(dev)
    with torch.no_grad():
        ref_policy, ref_value = net(x)
        net16 = Net(arch).load(tensors).fold().to(dev).eval().to(torch.bfloat16).to(memory_format=torch.channels_last)
        x16 = x.to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
        t16_policy, t16_value = (t.float() for t in net16(x16))
    pe, pm = errors(torch.from_numpy(our_policy).to(dev), ref_policy)
    ve, vm = errors(torch.from_numpy(our_value).to(dev), ref_value)
    tpe, tpm = errors(t16_policy, ref_policy)
    tve, tvm = errors(t16_value, ref_value)
    n = features.shape[0]
    print(f"\noutputs on {n} positions against PyTorch fp32 (batch norms unfolded):")
    print(f"  jiriki cuda (bf16):  policy rel. L2 {pe:.2e}, max abs {pm:.3e}; value rel. L2 {ve:.2e}, max abs {vm:.3e}")
    print(f"  PyTorch bf16 folded: policy rel. L2 {tpe:.2e}, max abs {tpm:.3e}; value rel. L2 {tve:.2e}, max abs {tvm:.3e}")
    agree = (our_policy.reshape(n, -1).argmax(1) == ref_policy.argmax(1).cpu().numpy()).mean()
    print(f"  argmax of the 2187 logits agrees on {100 * agree:.1f}% of positions")
    # Bounds: bf16's own error, as PyTorch's bf16 inference of the same network shows it (the value
    # of a deep random network is sensitive to rounding), with room for a different summation order.
    policy_bound, value_bound = max(3e-2, 1.5 * tpe), max(3e-2, 1.5 * tvm)
    ok = pe < policy_bound and vm < value_bound
    print("  RESULT: " + ("PASS" if ok else "FAIL") +
          f" (bounds: policy rel. L2 < {policy_bound:.2e}, value max abs < {value_bound:.2e})", flush=True)

    # 2. Speed, jiriki and PyTorch in alternating rounds: each round runs `jiriki bench nn --gpu-only`
    #    (a process of its own; the GPU is otherwise idle) and then times PyTorch at every batch size.
    #    Both sides use the same protocol (time_gpu's: median of five windows), and alternating keeps
    #    a drift of the GPU's clocks from favouring either side. Each side's figure is its median round.
    peak = matmul_tflops()
    print(f"\nbf16 8192^3 matmul here: {peak:.0f} TFLOP/s (nominal {args.nominal_tflops:.0f})", flush=True)
    torch._inductor.config.freezing = True
    torch._dynamo.config.cache_size_limit = 64
    # No cached compilations: each variant is compiled afresh under its own cudnn.benchmark setting
    # (a cache hit would hand the benchmark variant the heuristic variant's compiled graph).
    torch._inductor.config.fx_graph_cache = False
    # Each variant with cuDNN's algorithms chosen by its heuristics and, on a fresh copy of the
    # network, by timing them (cudnn.benchmark): either can be the faster, depending on the batch.
    inputs, variants = {}, {b: {} for b in batches}
    with torch.no_grad():
        for b in batches:
            xb = torch.from_numpy(np.resize(features, (b,) + features.shape[1:])).to(dev)
            inputs[b] = xb.to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
        for timed_algos in (False, True):  # graphs and compilation first, outside the timed rounds
            torch.backends.cudnn.benchmark = timed_algos
            suffix = "+bench" if timed_algos else ""
            net_v = net16 if not timed_algos else (Net(arch).load(tensors).fold().to(dev).eval().to(torch.bfloat16)
                                                   .to(memory_format=torch.channels_last))
            compiled = None if args.no_compile else torch.compile(net_v, mode="reduce-overhead", dynamic=False)
            for b in batches:
                variants[b]["eager+graph" + suffix] = cuda_graph(net_v, inputs[b])
                if compiled is not None:
                    t0 = time.time()
                    try:
                        compiled(inputs[b])
                        variants[b]["compile" + suffix] = lambda x=inputs[b], f=compiled: f(x)
                    except Exception as e:  # a failed compile leaves the eager figure standing
                        print(f"  torch.compile failed at batch {b}: {e}")
                    print(f"  batch {b}: torch.compile{suffix} took {time.time() - t0:.1f} s", flush=True)

        ours_rounds, torch_rounds = {b: [] for b in batches}, {b: [] for b in batches}
        cmd = [args.jiriki, "bench", "nn", "--model", args.model, "--backend", "cuda", "--batch", args.batch,
               "--seconds", str(args.window_seconds), "--gpu-only"]
        print("\nrounds of $ " + " ".join(cmd) + f", then PyTorch with {args.window_seconds} s per batch size "
              "and variant", flush=True)
        for r in range(args.rounds):
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                print(run.stdout + run.stderr)
                fail("jiriki bench nn --gpu-only failed")
            gpu = parse_bench(run.stdout)["gpu"]
            for b in batches:
                ours_rounds[b].append(gpu[b])
                best = {k: b / time_gpu(fn, seconds=args.window_seconds) for k, fn in variants[b].items()}
                name = max(best, key=best.get)
                torch_rounds[b].append((best[name], name))
                print(f"  {time.strftime('%H:%M:%S')} round {r + 1} batch {b}: jiriki {gpu[b]:,.0f} pos/s; PyTorch " +
                      ", ".join(f"{k} {v:,.0f}" for k, v in best.items()), flush=True)

    print(f"\n{'batch':>6} {'jiriki GPU':>12} {'PyTorch best':>14} {'variant':>17} {'ratio':>6} "
          f"{'jiriki TFLOP/s':>15} {'% nominal':>9} {'% matmul':>9} {'jiriki e2e':>11}")
    for b in batches:
        g = float(np.median(ours_rounds[b]))
        torch_pps, best_name = sorted(torch_rounds[b])[len(torch_rounds[b]) // 2]
        tf = g * flop * 1e-12
        print(f"{b:>6} {g:>12,.0f} {torch_pps:>14,.0f} {best_name:>17} {g / torch_pps:>6.2f} {tf:>15.1f} "
              f"{100 * tf / args.nominal_tflops:>8.1f}% {100 * tf / peak:>8.1f}% {ours['e2e'].get(b, float('nan')):>11,.0f}")
    print(f"(positions/s, median of {args.rounds} rounds; jiriki GPU and PyTorch: inputs and outputs on the GPU, "
          "CUDA events; jiriki e2e: evaluate() from host fp32 features to host outputs, first run)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
