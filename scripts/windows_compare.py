#!/usr/bin/env python3
"""Compares jiriki.exe (the Windows build, run under Wine) with the Linux build on this machine:
  1. playouts/s of `jiriki bench search` with the shipped CPU network, 2 threads, each build's
     default CPU backend, one after the other in this one run;
  2. the move each engine chooses at a fixed number of playouts, single-threaded, both on the same
     backend, from the positions along a game the Linux engine plays against itself.
Everything either engine prints goes to the log.

usage: windows_compare.py WINDOWS_EXE LINUX_JIRIKI [--positions N] [--nodes N] [--seconds S]"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from windows_wine import WINE, Usi  # noqa: E402  (the test's pipe driver: one way to speak USI here)


def bench(argv, env, label):
    print(f"$ {' '.join(argv)}", flush=True)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    text = (out.stdout + out.stderr).replace("\r", "")
    print(text, flush=True)
    rate = [l for l in text.splitlines() if l.startswith("playouts ")]
    return f"{label}: {rate[-1].strip() if rate else 'no playouts line'}"


def engine(argv, env, cwd, options):
    e = Usi(argv, env, cwd)
    e.send("usi")
    e.expect("usiok", 180)
    for o in options:
        e.send("setoption name " + o)
    e.send("isready")
    for line in e.expect("readyok", 180):
        print("  " + line, flush=True)
    e.send("usinewgame")
    return e


def bestmove(e, moves, nodes):
    e.send("position startpos" + (" moves " + " ".join(moves) if moves else ""))
    e.send(f"go nodes {nodes}")
    return e.expect("bestmove", 600)[-1].split()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("linux")
    ap.add_argument("--positions", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--backend", default="reference", help="the backend both engines search with in part 2")
    a = ap.parse_args()
    exe, linux = os.path.abspath(a.exe), os.path.abspath(a.linux)
    tmp = tempfile.mkdtemp(prefix="jiriki-wine-")
    env = dict(os.environ, WINEPREFIX=os.path.join(tmp, "prefix"), WINEDEBUG="-all", WINEDLLOVERRIDES="mscoree,mshtml=")
    wineserver = os.path.join(os.path.dirname(WINE), "wineserver")
    try:
        subprocess.run([wineserver, "-p"], env=env, capture_output=True)
        subprocess.run([WINE, exe, "--version"], env=env, capture_output=True, timeout=300)
        for argv in ([linux, "--version"], [WINE, exe, "--version"]):
            print(subprocess.run(argv, env=env, capture_output=True, text=True).stdout.strip(), flush=True)
        print(f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()}", flush=True)

        print("\n== 1. playouts/s, shipped networks/cpu.jnn, 2 threads, default backend ==", flush=True)
        args = ["bench", "search", "--model", "Z:" + os.path.abspath("networks/cpu.jnn").replace("/", "\\"),
                "--threads", "2", "--seconds", str(a.seconds)]
        rates = [bench([linux] + args[:3] + [os.path.abspath("networks/cpu.jnn")] + args[4:], env, "linux"),
                 bench([WINE, exe] + args, env, "windows (wine)")]
        if a.backend != "cpu":
            rates.append(bench([linux] + args[:3] + [os.path.abspath("networks/cpu.jnn")] + args[4:] +
                               ["--backend", a.backend], env, f"linux --backend {a.backend}"))

        print(f"\n== 2. bestmove at go nodes {a.nodes}, Threads 1, Backend {a.backend}, "
              f"{a.positions} positions ==", flush=True)
        options = ["Threads value 1", f"Backend value {a.backend}", "USI_Ponder value false"]
        lin = engine([linux], env, tmp, options)
        win = engine([WINE, exe], env, tmp, options)
        moves, same = [], 0
        for i in range(a.positions):
            t0 = time.monotonic()
            m_lin = bestmove(lin, moves, a.nodes)
            m_win = bestmove(win, moves, a.nodes)
            same += m_lin == m_win
            print(f"position {i + 1:2d} (ply {len(moves):2d}): linux {m_lin}  windows {m_win}  "
                  f"{'same' if m_lin == m_win else 'DIFFERENT'}  ({time.monotonic() - t0:.1f} s)", flush=True)
            if m_lin in ("resign", "win"):
                break
            moves.append(m_lin)  # the next position: the game goes on by the Linux engine's choice
        lin.quit()
        win.quit()
        print("\n== summary ==")
        for r in rates:
            print(r)
        print(f"same bestmove: {same} of {i + 1} positions")
    finally:
        subprocess.run([wineserver, "-k"], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
