#!/usr/bin/env python3
"""jiriki.exe (the MinGW-w64 Windows build) under Wine, through pipes as a Windows GUI drives it: the USI
handshake, isready naming the embedded network, a book move read on the fly, a 40-ply game of the
engine against itself at byoyomi with no time lost, and perft counts equal to the Linux build's.
Exits 77 (ctest: skipped) with the reason when Wine or the Windows executable is missing.

usage: windows_wine.py WINDOWS_EXE LINUX_JIRIKI"""
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
WINE = os.environ.get("JIRIKI_WINE", "/usr/lib/wine/wine64")
FIRST_START_S = 120  # a fresh Wine prefix takes 10-30 s to set itself up on a loaded 2-core machine
BYOYOMI_MS = 2000
PLIES = 40


def fail(message):
    print("FAIL: " + message, flush=True)
    sys.exit(1)


class Usi:
    """An engine process spoken to through pipes; lines come back without their CR."""

    def __init__(self, argv, env, cwd):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env=env, cwd=cwd)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.p.stdout:
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\r\n"))
        self.lines.put(None)

    def send(self, line):
        # CRLF, as Windows GUIs write their commands
        self.p.stdin.write((line + "\r\n").encode())
        self.p.stdin.flush()

    def expect(self, prefix, timeout_s):
        """Lines up to and including the first that starts with prefix."""
        seen, deadline = [], time.monotonic() + timeout_s
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                fail(f"no '{prefix}' within {timeout_s} s; last lines: {seen[-5:]}")
            if line is None:
                fail(f"the engine exited before '{prefix}'; last lines: {seen[-5:]}")
            seen.append(line)
            if line.startswith(prefix):
                return seen

    def quit(self):
        self.send("quit")
        try:
            return self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            fail("the engine did not exit after quit")


def perft_counts(argv, env):
    """The 'perft(N) = COUNT' part of perft's output, per line, without the timing."""
    out = subprocess.run(argv, env=env, capture_output=True, timeout=600, check=True).stdout.decode()
    return [l.rstrip("\r").split("  (")[0] for l in out.splitlines() if l.strip()]


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    exe, linux = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if not (os.path.isfile(WINE) and os.access(WINE, os.X_OK)):
        print(f"SKIP: no Wine launcher at {WINE} (Debian package wine64)")
        return SKIP
    if not os.path.isfile(exe):
        print(f"SKIP: no Windows build at {exe} (needs g++-mingw-w64-x86-64-posix)")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="jiriki-wine-")
    env = dict(os.environ, WINEPREFIX=os.path.join(tmp, "prefix"), WINEDEBUG="-all", WINEDLLOVERRIDES="mscoree,mshtml=")
    wineserver = os.path.join(os.path.dirname(WINE), "wineserver")
    try:
        # A persistent wineserver spares every later process of the prefix the server's start-up.
        t0 = time.monotonic()
        if os.path.exists(wineserver):
            subprocess.run([wineserver, "-p"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run([WINE, exe, "--version"], env=env, capture_output=True, timeout=FIRST_START_S)
        print(f"Wine prefix {env['WINEPREFIX']} made in {time.monotonic() - t0:.0f} s", flush=True)
        run_checks(exe, linux, env, tmp)
    finally:
        if os.path.exists(wineserver):
            subprocess.run([wineserver, "-k"], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")
    return 0


def run_checks(exe, linux, env, tmp):
    # perft: the Windows and the Linux builds count the same leaves, from the start and from a
    # middle-game position with drops, promotions and checks (--divide: every move's subtree).
    middle = ["--sfen", "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w RGgsn5p 1"]
    for args in (["--depth", "4"], middle + ["--depth", "3", "--divide"]):
        win = perft_counts([WINE, exe, "perft"] + args, env)
        lin = perft_counts([linux, "perft"] + args, env)
        if win != lin or not lin:
            fail(f"perft {' '.join(args)}: Windows {win[-3:]} against Linux {lin[-3:]}")
        print(f"perft {' '.join(args)}: {lin[-1]} on both ({len(lin)} lines)", flush=True)

    # Paths as the engine sees them: Wine maps the Unix root to drive Z:.
    book = os.path.join(tmp, "book.db")
    with open(book, "w", newline="\n") as f:
        f.write("#YANEURAOU-DB2016 1.00\n"
                "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1\n"
                "1g1f 3c3d 50 32 10\n")
    win_book = "Z:" + book.replace("/", "\\")

    engines = [Usi([WINE, exe], env, tmp) for _ in range(2)]
    for e in engines:
        e.send("usi")
        seen = e.expect("usiok", FIRST_START_S)
        if "id name jiriki" not in " | ".join(seen):
            fail(f"no 'id name jiriki' before usiok: {seen}")
        # One thread each, since both share the machine. A network call of the reference backend takes
        # about 0.1 s a position on a 2-core machine (several times that when other work loads it) and
        # the search waits for the call in flight before it answers: BatchSize 1, and NetworkDelay
        # 1000 ms kept in hand (the default margin at byoyomi 2 s is a tenth of it), as a player
        # would set for a slow engine.
        for option in ("Threads value 1", "BatchSize value 1", "NetworkDelay value 1000", "BookFile value " + win_book,
                       "BookOnTheFly value true"):
            e.send("setoption name " + option)
        e.send("isready")
        seen = e.expect("readyok", FIRST_START_S)
        said = " | ".join(seen)
        if "network: the shipped networks/cpu.jnn" not in said:
            fail(f"isready does not name the embedded network: {seen}")
        if "read on the fly" not in said:
            fail(f"isready does not report the book read on the fly: {seen}")
        e.send("usinewgame")
    print("handshake: usiok, isready names the shipped networks/cpu.jnn, the book is read on the fly", flush=True)

    moves, slowest = [], 0.0
    for ply in range(PLIES):
        e = engines[ply % 2]
        e.send("position startpos" + (" moves " + " ".join(moves) if moves else ""))
        t0 = time.monotonic()
        e.send(f"go btime 0 wtime 0 byoyomi {BYOYOMI_MS}")
        seen = e.expect("bestmove", 60)
        took = time.monotonic() - t0
        best = seen[-1].split()[1]
        if ply == 0 and not any(l.startswith("info string book move 1g1f") for l in seen):
            fail(f"the first move did not come from the book: {seen[-3:]}")
        errors = [l for l in seen if l.startswith("info string error")]
        if errors:
            fail(f"ply {ply + 1}: {errors}")
        if best in ("resign", "win"):
            fail(f"ply {ply + 1}: {best} in a {PLIES}-ply game at the engine's own strength")
        # Over the byoyomi is a loss on time in a GUI (the pipe and Wine are part of the engine's time).
        if took * 1000 > BYOYOMI_MS:
            fail(f"ply {ply + 1}: bestmove {best} after {took:.2f} s at byoyomi {BYOYOMI_MS} ms")
        slowest = max(slowest, took)
        moves.append(best)
    for e in engines:
        if e.quit() != 0:
            fail("the engine exited with a failure after quit")
    # Every move legal, by the Linux build's rules code: perft from the final position takes them all.
    check = subprocess.run([linux, "perft", "--moves"] + moves + ["--depth", "1"], capture_output=True, text=True)
    if check.returncode != 0:
        fail(f"an illegal move in the game: {check.stderr.strip()}")
    print(f"game: {len(moves)} plies, slowest move {slowest:.2f} s at byoyomi {BYOYOMI_MS} ms: {' '.join(moves)}")


if __name__ == "__main__":
    sys.exit(main())
