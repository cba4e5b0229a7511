#!/usr/bin/env python3
"""Figures and tables of docs/batch-size.md from the H200 logs in bench/results/batch_size/:
  step_time.png    measured step time against the per-GPU batch, --allreduce nccl and host, with
                   the fitted step-time model of each
  noise_scale.png  the gradient noise scale over a long --batch auto run (one replica: batch halves)
  choices.png      the tuner's per-GPU batch over that run
  heldout_MODE.png the held-out metric (--metric, smoothed) against seconds of training, every
                   time-to-target run (ttt_NAME.jsonl; fixed runs are named b<batch>_<mode>, a
                   repeat b<batch>_<mode>_r<k>; auto runs auto_<mode>[_<variant>])
and, on stdout, the tables: measured step times; the time of each run to the target (what the
best fixed run reaches at --target-seconds), auto against the best and the median fixed run; and
what the step-time model predicts for 2, 4 and 8 GPUs under NCCL and host aggregation. Draws with
gnuplot (PNG).

The predictions apply the tuner's own formulas (training/batch_tuner.h: Pollux's step time with
gamma, McCandlish's efficiency) to the compute model fitted on one H200. The communication of N GPUs
comes from --multi, logs of `jiriki bench train --gpus` on 2 and 4 GPUs (each mode's "comm alone",
a straight line in N through the measured points, and the gamma that best reproduces the measured
step times from the measured compute and communication times); without --multi, from link costs
(--nccl-ms, --host-one-ms, --host-two-ms).

--series-only draws and prints only a time-to-target series (--runs, --noise-run), e.g. one made on
several GPUs or another GPU, without the one-H200 step times and the predictions."""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

D = "bench/results/batch_size"



def mode_of(name):
    """The aggregation of a time-to-target run from its name: auto_MODE[_VARIANT] or bBATCH_MODE."""
    parts = name.split("_")
    return parts[1] if len(parts) > 1 else ""

def records(name, kind):
    with open(os.path.join(D, name)) as f:
        return [j for j in map(json.loads, f) if j.get("type") == kind]


def model_of(name):
    m = records(name, "tuner_model")[0]
    return {k: m[k] for k in ("alpha_c_ms", "beta_c_ms", "t_n_ms", "gamma")}


def step_ms(m, b, t_n=None, gamma=None):
    tc = m["alpha_c_ms"] + m["beta_c_ms"] * b
    tn = m["t_n_ms"] if t_n is None else t_n
    g = m["gamma"] if gamma is None else gamma
    hi, lo = max(tc, tn), min(tc, tn)
    return hi * (1 + (lo / hi) ** g) ** (1 / g) if hi > 0 else 0.0


def combine(tc, tn, g):
    """Pollux's step time from compute and communication times with overlap exponent g."""
    hi, lo = max(tc, tn), min(tc, tn)
    return hi * (1 + (lo / hi) ** g) ** (1 / g) if hi > 0 else 0.0


def multi_gpu_rows(path):
    """The rows of `jiriki bench train --gpus` logs: GPUs, mode, per-GPU batch, step, compute and
    communication-alone ms, scaling."""
    rows, n, mode = [], None, None
    for line in open(path):
        m = re.match(r"(\d+) GPUs \(.*\), gradients averaged by (the host|NCCL)", line)
        if m:
            n, mode = int(m.group(1)), "host" if m.group(2) == "the host" else "nccl"
            continue
        f = line.split()
        if n and len(f) == 8 and f[0].isdigit() and f[-1].endswith("%"):
            rows.append(dict(n=n, mode=mode, batch=int(f[0]), step=float(f[3]), compute=float(f[4]),
                             comm=float(f[6]), scaling=float(f[7][:-1])))
    return rows


def fit_multi(rows, mode):
    """(a, b, gamma, rms): comm alone = a + b N through the mean at each N; the gamma in [1, 10]
    whose combine() of the measured compute and communication is closest to the measured steps
    (least squares of the log ratio), and that rms log error."""
    rs = [r for r in rows if r["mode"] == mode]
    ns = sorted({r["n"] for r in rs})
    pts = [(n, sum(r["comm"] for r in rs if r["n"] == n) / sum(1 for r in rs if r["n"] == n)) for n in ns]
    if len(pts) == 1:
        a, b = pts[0][1], 0.0
    else:
        mx, my = sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts)
        b = sum((p[0] - mx) * (p[1] - my) for p in pts) / sum((p[0] - mx) ** 2 for p in pts)
        a = my - b * mx
    best = None
    for k in range(0, 181):
        g = 1 + k * 0.05
        err = sum(math.log(combine(r["compute"], r["comm"], g) / r["step"]) ** 2 for r in rs)
        if best is None or err < best[1]:
            best = (g, err)
    return a, b, best[0], math.sqrt(best[1] / len(rs))


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=D, help="where the PNGs go")
    ap.add_argument("--nccl-ms", type=float, default=0.124, help="NCCL all-reduce of the gradient on 2 GPUs (ms)")
    ap.add_argument("--host-one-ms", type=float, default=None, help="host aggregation, 1 GPU (default: measured t_n)")
    ap.add_argument("--host-two-ms", type=float, default=2.9, help="host aggregation round trip, 2 GPUs (ms)")
    ap.add_argument("--noise", type=float, nargs="+", default=[300, 2000], help="noise scales to predict at")
    ap.add_argument("--multi", nargs="*", default=[], help="`jiriki bench train --gpus` logs whose communication "
                    "times (2 and 4 GPUs) the predictions use")
    ap.add_argument("--metric", default="policy_loss", help="held-out metric of the time to target (loss, policy_loss, ...)")
    ap.add_argument("--smooth", type=int, default=5, help="evaluations averaged before comparing with the target")
    ap.add_argument("--note", default="SGD, lr 0.01 b/256", help="the time-to-target runs' rule, for the plot's title")
    ap.add_argument("--noise-run", default="ttt_auto_nccl.jsonl",
                    help="the --batch auto log (in bench/results/batch_size) whose noise scale and choices are drawn")
    ap.add_argument("--runs", default=D, help="the folder of the time-to-target runs' logs (ttt_NAME.jsonl)")
    ap.add_argument("--levels", type=float, nargs="*", default=[3.0, 2.98, 2.97, 2.965],
                    help="further held-out levels: seconds (and samples) of each run to each")
    ap.add_argument("--target-seconds", type=float, default=300, help="the target: the best fixed run's metric then")
    ap.add_argument("--device", default="one H200", help="the GPUs of the time-to-target and --noise-run logs, for the titles")
    ap.add_argument("--data", default="1.1M self-play positions", help="the time-to-target runs' records, for the title")
    ap.add_argument("--replicas", type=int, default=1, help="the --noise-run's replicas (GPUs), for the titles")
    ap.add_argument("--series-only", action="store_true", help="only the time-to-target series and its noise plots")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()

    if not a.series_only:
        one_gpu_step_times(a, tmp)
    time_to_target(a, tmp)
    if not a.series_only:
        predictions(a)


def one_gpu_step_times(a, tmp):
    """The step times of the one-H200 tuner runs (tuner_MODE.jsonl) and their models: step_time.png."""
    print("## Measured step times (10x192, one H200; the tuner's own measurement, 10 steps each)\n")
    print("| per-GPU batch | nccl step ms | host step ms | host compute ms | host aggregation ms |")
    print("|---|---|---|---|---|")
    cost = {mode: {r["batch"]: r for r in records(f"tuner_{mode}.jsonl", "tuner_cost")} for mode in ("nccl", "host")}
    models = {mode: model_of(f"tuner_{mode}.jsonl") for mode in ("nccl", "host")}
    for b in sorted(cost["nccl"]):
        n, h = cost["nccl"][b], cost["host"][b]
        print(f"| {b} | {n['step_ms']:.3f} | {h['step_ms']:.3f} | {h['compute_ms']:.3f} | {h['comm_ms']:.3f} |")
    for mode in ("nccl", "host"):
        m = models[mode]
        print(f"\n{mode}: T_c = {m['alpha_c_ms']:.3f} + {m['beta_c_ms']:.5f} b ms, T_n = {m['t_n_ms']:.3f} ms, "
              f"gamma {m['gamma']:.2f}")
        with open(f"{tmp}/{mode}.dat", "w") as f:
            for b in sorted(cost[mode]):
                f.write(f"{b} {cost[mode][b]['step_ms']} {step_ms(m, b)}\n")
    gnuplot(f"""set terminal pngcairo size 800,500
set output '{a.out}/step_time.png'
set logscale xy 2
set xlabel 'per-GPU batch'
set ylabel 'ms per step'
set title 'Step time of a 10x192 network on one H200'
set key left top
plot '{tmp}/nccl.dat' u 1:2 w p pt 7 t 'nccl (one rank): measured', '' u 1:3 w l t 'nccl: model', \\
     '{tmp}/host.dat' u 1:2 w p pt 5 t 'host (copies to host and back): measured', '' u 1:3 w l t 'host: model'
""")


def time_to_target(a, tmp):
    """The auto run's noise scale and choices, and every run's held-out metric against time."""
    # ---- the long auto run: noise scale, choices, held-out loss ------------------------------
    auto = a.noise_run
    train = records(auto, "train")
    steps = [(0, 0)] + [(r["step"], r["samples"]) for r in train]

    def samples_at(step):  # the logs before 'samples' was added to tuner records: from the train records
        for (s0, n0), (s1, n1) in zip(steps, steps[1:]):
            if s0 <= step <= s1:
                return n0 + (n1 - n0) * (step - s0) / max(1, s1 - s0)
        return steps[-1][1]

    with open(f"{tmp}/tuner.dat", "w") as f:
        for r in records(auto, "tuner"):
            n = r.get("samples", samples_at(r["step"]))
            ns = r["noise_scale"] if r["noise_scale"] is not None else float("nan")
            f.write(f"{n / 1e6} {ns} {r['batch']}\n")
    # Several replicas: the replicas' estimate decides; with --noise-halves the batch halves' is logged beside it.
    halves = [r for r in train if "noise_scale_halves" in r]
    with open(f"{tmp}/halves.dat", "w") as f:
        for r in halves:
            f.write(f"{r['samples'] / 1e6} {r['noise_scale_halves']}\n")
    noise_how = "batch halves" if a.replicas == 1 else "across replicas" + (", batch halves beside" if halves else "")
    halves_plot = f", '{tmp}/halves.dat' u 1:2 w lp pt 5 ps 0.5 t 'batch halves (logged beside)'" if halves else ""
    gnuplot(f"""set terminal pngcairo size 800,500 enhanced
set output '{a.out}/noise_scale.png'
set logscale y
set xlabel 'samples (millions)'
set ylabel 'noise scale B_{{noise}}'
set title 'Gradient noise scale, {a.device}, {noise_how} (10x192, self-play records)'
plot '{tmp}/tuner.dat' u 1:2 w lp pt 7 ps 0.5 t 'at each decision'{halves_plot}
""")
    gnuplot(f"""set terminal pngcairo size 800,400 noenhanced
set output '{a.out}/choices.png'
set logscale y 2
set yrange [4:2048]
set xlabel 'samples (millions)'
set ylabel 'per-GPU batch'
set title '--batch auto: the tuner''s choices (10x192, {a.device}, {os.path.basename(auto)[4:-6]})'
plot '{tmp}/tuner.dat' u 1:3 w steps lw 2 t 'batch'
""")
    # ---- time to target: every ttt_NAME.jsonl (scripts/device/ttt.sh NAME ...) -------------------
    runs, samples = {}, {}
    for f in sorted(os.listdir(a.runs)):
        if f.startswith("ttt_") and f.endswith(".jsonl"):
            tests = records(os.path.join(os.path.relpath(a.runs, D), f), "test")
            smooth = []  # trailing mean of the last --smooth evaluations: one lucky evaluation is not a crossing
            for i, r in enumerate(tests):
                window = tests[max(0, i - a.smooth + 1):i + 1]
                smooth.append((r["seconds"], sum(w[a.metric] for w in window) / len(window)))
            runs[f[4:-6]] = smooth
            samples[f[4:-6]] = [r["samples"] for r in tests]
    # The target: what the best fixed batch reaches at --target-seconds (runs named b<batch>_<mode>,
    # repeats b<batch>_<mode>_r<k>: a batch's figure is the mean over its runs).
    def at(smooth, t):
        before = [v for s, v in smooth if s <= t]
        return min(before) if before else float("inf")
    def reached(smooth, target):
        return next((s for s, v in smooth if v <= target), None)
    def fixed_batches(mode):  # "b512_host" -> the runs of that batch and mode
        groups = {}
        for n in runs:
            if n.startswith("b") and mode_of(n) == mode:
                groups.setdefault("_".join(n.split("_")[:2]), []).append(n)
        return groups
    def mean_time(names, target):  # a run that never reached the target counts as infinitely slow
        times = [reached(runs[n], target) for n in names]
        return float("inf") if None in times else sum(times) / len(times)
    def best_and_median(mode, target):
        times = sorted(mean_time(names, target) for names in fixed_batches(mode).values())
        middle = times[(len(times) - 1) // 2 : len(times) // 2 + 1]
        return times[0], sum(middle) / len(middle), len(times)
    # One target per aggregation mode: each mode's auto runs race that mode's fixed batches.
    targets = {}
    for mode in {mode_of(n) for n in runs}:
        for names in fixed_batches(mode).values():
            value = sum(at(runs[n], a.target_seconds) for n in names) / len(names)
            targets[mode] = min(targets.get(mode, float("inf")), value)
    # One plot per aggregation mode (heldout_MODE.png), its target dashed; auto runs dashed too.
    # gnuplot's default cycle repeats after 8 colours, so each run gets its own.
    colours = ["#9400d3", "#009e73", "#56b4e9", "#e69f00", "#f0e442", "#0072b2", "#e51e10", "#000000",
               "#a0522d", "#808080", "#ff69b4", "#2e8b57"]
    for mode in sorted({mode_of(n) for n in runs}):
        names = [n for n in runs if mode_of(n) == mode]
        lo = min(v for n in names for _, v in runs[n])
        plots = []
        for i, name in enumerate(names):
            with open(f"{tmp}/{name}.dat", "w") as f:
                for t, v in runs[name]:
                    f.write(f"{t} {v}\n")
            dash = "dt 2" if name.startswith("auto_") else "dt 1"
            plots.append(f"'{tmp}/{name}.dat' u 1:2 w l lw 2 {dash} lc rgb '{colours[i % len(colours)]}' t '{name}'")
        target = targets.get(mode)
        gnuplot(f"""set terminal pngcairo size 900,500 noenhanced
set output '{a.out}/heldout_{mode}.png'
set xlabel 'seconds of training (held-out evaluations left out)'
set ylabel 'held-out {a.metric}, mean of the last {a.smooth} evaluations'
set title '{mode}, {a.device}: held-out {a.metric}, 10x192, {a.data}, {a.note}; dashed: target'
set key right top
set yrange [{lo - 0.01:.3f}:{lo + 0.25:.3f}]
{f"set arrow from graph 0, first {target} to graph 1, first {target} nohead dt 2" if target else ""}
plot {", ".join(plots)}
""")
    for mode, target in sorted(targets.items()):
        names = [n for n in runs if mode_of(n) == mode]
        print(f"\n## {mode}: time to a held-out {a.metric} of {target:.4f} (the best fixed {mode} batch's at "
              f"{a.target_seconds:.0f} s, mean of {a.smooth} evaluations)\n")
        print("| run | seconds to target | last evaluation (s) |")
        print("|---|---|---|")
        times = {}
        for name in names:
            t = reached(runs[name], target)
            times[name] = t
            print(f"| {name} | {f'{t:.0f}' if t is not None else 'not reached'} | {runs[name][-1][0]:.0f} |")
        best, median, count = best_and_median(mode, target)
        for name in sorted(n for n in times if n.startswith("auto_")):
            auto = times[name]
            # The goal: auto within 10% of the best fixed batch, and faster than the median one
            # (a run that never reached the target counts as infinitely slow).
            a_s = "not reached" if auto is None else f"{auto:.0f} s"
            ratio = float("inf") if auto is None else auto / best
            print(f"\n{name}: {a_s}, best fixed {best:.0f} s ({f'{ratio:.2f}x' if ratio < float('inf') else '—'}), median fixed {median:.0f} s, "
                  f"over {count} fixed batches: within 10% of the best: {'yes' if ratio <= 1.10 else 'no'}; "
                  f"faster than the median: {'yes' if auto is not None and auto < median else 'no'}")

    if runs and a.levels:
        print(f"\n## Seconds (and millions of samples) to each held-out {a.metric}, mean of {a.smooth} evaluations\n")
        print("| run | " + " | ".join(f"{v:g}" for v in a.levels) + " | lowest (s) |")
        print("|---|" + "---|" * (len(a.levels) + 1))
        for name, smooth in runs.items():
            cells = []
            for v in a.levels:
                i = next((i for i, (_, m) in enumerate(smooth) if m <= v), None)
                cells.append("—" if i is None else f"{smooth[i][0]:.0f} ({samples[name][i] / 1e6:.1f}M)")
            low = min(range(len(smooth)), key=lambda i: smooth[i][1])
            print(f"| {name} | " + " | ".join(cells) + f" | {smooth[low][1]:.4f} ({smooth[low][0]:.0f}) |")
        # The goal read at each level: each auto run's seconds against the best and the median fixed run
        # of its mode.
        for name in sorted(n for n in runs if n.startswith("auto_")):
            mode = mode_of(name)
            for v in a.levels:
                if not fixed_batches(mode):
                    continue
                best, median, count = best_and_median(mode, v)
                auto = reached(runs[name], v)
                ratio = f"{auto / best:.2f}x the best" if auto is not None and best < float("inf") else "—"
                print(f"\n{name} at {v:g}: {f'{auto:.0f} s' if auto is not None else 'not reached'}, best fixed "
                      f"{best:.0f} s, median fixed {median:.0f} s ({count} batches): {ratio}; faster than the "
                      f"median: {'yes' if auto is not None and auto < median else 'no'}", end="")
            print()



def predictions(a):
    """What the tuner's step-time model predicts for 2, 4 and 8 GPUs."""
    models = {mode: model_of(f"tuner_{mode}.jsonl") for mode in ("nccl", "host")}
    nccl, host = models["nccl"], models["host"]
    host_one = a.host_one_ms if a.host_one_ms is not None else host["t_n_ms"]
    cands = [8 << k for k in range(8)]
    rows = [r for path in a.multi for r in multi_gpu_rows(path)]
    fits = {mode: fit_multi(rows, mode) for mode in ("nccl", "host") if any(r["mode"] == mode for r in rows)}
    print("\n## Predictions for N GPUs (per-GPU batch chosen from 8..1024)\n")
    if fits:
        print(f"Communication per step from {', '.join(a.multi)}: " + "; ".join(
            f"{mode} {f[0]:.3f} + {f[1]:.3f} N ms, gamma {f[2]:.2f} (rms error of the measured steps "
            f"{100 * (math.exp(f[3]) - 1):.1f}%)" for mode, f in fits.items()) + ". Compute: the one-GPU model.\n")
        print("| N | aggregation | per-GPU batch | measured step ms | compute ms | comm alone ms | "
              "step from measured parts ms | step from the models ms |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            f = fits[r["mode"]]
            print(f"| {r['n']} | {r['mode']} | {r['batch']} | {r['step']:.3f} | {r['compute']:.3f} | {r['comm']:.3f} | "
                  f"{combine(r['compute'], r['comm'], f[2]):.3f} | {step_ms(nccl, r['batch'], f[0] + f[1] * r['n'], f[2]):.3f} |")
        print()
    else:
        print(f"Communication per step: NCCL {a.nccl_ms} ms x (N-1)/(N/2) (ring all-reduce, the measured 2-GPU time "
              f"at the same bus bandwidth), overlapped with the backward pass (gamma 10); host "
              f"{host_one:.2f} ms + (N-1) x {a.host_two_ms - host_one:.2f} ms (the 1-GPU copies, then one more "
              f"gradient summed per GPU), not overlapped (gamma 1).\n")
    print("| N | aggregation | B_noise | T_n ms | gamma | per-GPU batch | step ms | samples/s | efficiency | goodput |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in (1, 2, 4, 8):
        for mode in ("nccl", "host"):
            if n == 1:  # one GPU: the tuner's own model of the mode
                t_n, g = (0.0, 10.0) if mode == "nccl" else (host_one, host["gamma"])
            elif mode in fits:
                t_n, g = fits[mode][0] + fits[mode][1] * n, fits[mode][2]
            elif mode == "nccl":
                t_n, g = a.nccl_ms * 2 * (n - 1) / n, 10.0
            else:
                t_n, g = host_one + (n - 1) * (a.host_two_ms - host_one), 1.0
            for noise in a.noise:
                best = None
                for b in cands:
                    t = step_ms(nccl, b, t_n, g)
                    rate = n * b / t * 1e3
                    eff = (noise + 8 * n) / (noise + n * b)
                    if best is None or rate * eff > best[3] * best[4]:
                        best = (b, t, rate, rate, eff)
                b, t, rate, _, eff = best
                print(f"| {n} | {mode} | {noise:.0f} | {t_n:.3f} | {g:.2f} | {b} | {t:.3f} | {rate:.0f} | {eff:.3f} | "
                      f"{rate * eff:.0f} |")


if __name__ == "__main__":
    sys.exit(main())
