# Probe: does computing a 3x3 conv on 9x9 boards as an interior (pad 0) piece plus edge pieces
# (no padded taps: 633 of 729 taps per position) run faster at the power cap than the padded conv?
import subprocess, sys, time, torch, torch.nn.functional as F
torch.backends.cudnn.benchmark = True
dev = "cuda"
N, C, REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 1024, 192, 20
g = torch.Generator(device=dev).manual_seed(1)
x = torch.relu(torch.randn(N, C, 9, 9, device=dev, generator=g)).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
w = (torch.randn(C, C, 3, 3, device=dev, generator=g) * (2.0 / (9 * C)) ** 0.5).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
cl = lambda t: t.contiguous(memory_format=torch.channels_last)
xt, xb, xl, xr = cl(x[:, :, 0:2, :]), cl(x[:, :, 7:9, :]), cl(x[:, :, :, 0:2]), cl(x[:, :, :, 7:9])
wt, wb, wl, wr = cl(w[:, :, 1:3, :]), cl(w[:, :, 0:2, :]), cl(w[:, :, :, 1:3]), cl(w[:, :, :, 0:2])

def whole(): return F.conv2d(x, w, padding=1)
def interior(): return F.conv2d(x, w)
def edges(): return (F.conv2d(xt, wt, padding=(0, 1)), F.conv2d(xb, wb, padding=(0, 1)), F.conv2d(xl, wl), F.conv2d(xr, wr))
side = torch.cuda.Stream()
def pieces_seq(): return interior(), edges()
def pieces_conc():
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        e = edges()
    i = interior()
    torch.cuda.current_stream().wait_stream(side)
    return i, e

# correctness of the decomposition
ref = whole().float()
i, (t, b, l, r) = pieces_seq()
out = torch.zeros_like(ref)
out[:, :, 1:8, 1:8] = i.float(); out[:, :, 0:1, :] = t.float(); out[:, :, 8:9, :] = b.float()
out[:, :, 1:8, 0:1] = l.float(); out[:, :, 1:8, 8:9] = r.float()
print(f"max |pieces - whole| = {(out - ref).abs().max().item():.3e} (max |whole| {ref.abs().max().item():.2f})")

def graph_of(fn):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.current_stream().wait_stream(s)
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        for _ in range(REPS): fn()
    return gr

def sustained(gr, seconds):
    gr.replay(); torch.cuda.synchronize()
    t0 = time.perf_counter(); n = 0
    while time.perf_counter() - t0 < seconds:
        gr.replay(); n += 1
        if n % 10 == 0: torch.cuda.synchronize()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / (n * REPS) * 1e3

def short(gr):
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gr.replay(); st.record(); gr.replay(); en.record(); torch.cuda.synchronize()
    return st.elapsed_time(en) / REPS

variants = {"whole (pad 1)": whole, "interior only": interior, "edges only": edges,
            "pieces sequential": pieces_seq, "pieces concurrent": pieces_conc}
graphs = {k: graph_of(f) for k, f in variants.items()}
for rnd in range(2):
    for k, gr in graphs.items():
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                                "-lms", "250"], stdout=subprocess.PIPE, text=True)
        s = short(gr); m = sustained(gr, 3.0)
        smi.terminate(); lines = smi.communicate()[0].split("\n")[4:-2]
        clk = [float(l.split(",")[0]) for l in lines if l.strip()]; pw = [float(l.split(",")[1]) for l in lines if l.strip()]
        print(f"round {rnd} N={N} {k:20s} short {s:.4f} ms  sustained {m:.4f} ms  "
              f"clock {min(clk, default=0):.0f}-{max(clk, default=0):.0f} MHz  power {sum(pw)/max(len(pw),1):.0f} W", flush=True)
