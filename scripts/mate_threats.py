#!/usr/bin/env python3
"""Which of jiriki's moves in lost games allowed a forced mate that the df-pn solver finds.

For each lost game (CSA, as `jiriki match` writes them) it finds the first move at which the opponent
announced a mate in its comment, and asks `jiriki` (`go mate MS`) whether the opponent mates after
jiriki's move just before it, and after jiriki's two moves before that; jiriki's own score for each
of those moves is shown beside the answer and the solver's time.

  scripts/mate_threats.py [--jiriki build/jiriki] [--ms 1000] [--name-prefix g1] GAME.csa ...
"""
import argparse
import re
import subprocess
import time

UNPROMOTED = {'FU': 'P', 'KY': 'L', 'KE': 'N', 'GI': 'S', 'KI': 'G', 'KA': 'B', 'HI': 'R', 'OU': 'K'}
PROMOTED = {'TO', 'NY', 'NK', 'NG', 'UM', 'RY'}
MOVE = re.compile(r'^([+-])(\d)(\d)(\d)(\d)([A-Z]{2})')
COMMENT = re.compile(r"^'time [\d.]+ score (cp|mate) (-?\d+)")


def square(file, rank):
    return f"{file}{'abcdefghi'[rank - 1]}"


def usi_moves(lines):
    """The game's moves in USI, from the standard start position (CSA `PI`)."""
    back = ['KY', 'KE', 'GI', 'KI', 'OU', 'KI', 'GI', 'KE', 'KY']
    board = {}
    for i, f in enumerate(range(9, 0, -1)):
        board[(f, 1)] = board[(f, 9)] = back[i]
        board[(f, 3)] = board[(f, 7)] = 'FU'
    board[(8, 2)] = board[(2, 8)] = 'HI'
    board[(2, 2)] = board[(8, 8)] = 'KA'
    out = []
    for line in lines:
        m = MOVE.match(line)
        if not m:
            continue
        ff, fr, tf, tr = (int(m.group(i)) for i in range(2, 6))
        piece = m.group(6)
        if ff == 0:
            out.append(f"{UNPROMOTED[piece]}*{square(tf, tr)}")
        else:
            before = board.pop((ff, fr))
            promotes = piece in PROMOTED and before not in PROMOTED
            out.append(square(ff, fr) + square(tf, tr) + ('+' if promotes else ''))
        board[(tf, tr)] = piece
    return out


def go_mate(jiriki, moves, ms):
    p = subprocess.Popen([jiriki], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    p.stdin.write("usi\nposition startpos moves " + ' '.join(moves) + "\n")
    p.stdin.flush()
    start = time.time()
    p.stdin.write(f"go mate {ms}\n")
    p.stdin.flush()
    answer = ''
    for answer in p.stdout:
        if answer.startswith('checkmate'):
            break
    elapsed = time.time() - start
    p.stdin.write("quit\n")
    p.stdin.flush()
    p.wait()
    words = answer.split()
    verdict = words[1] if len(words) > 1 and words[1] in ('nomate', 'timeout') else f"mate in {len(words) - 1}"
    return verdict, round(elapsed * 1000)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--jiriki', default='build/jiriki')
    ap.add_argument('--ms', type=int, default=1000, help='go mate time limit')
    ap.add_argument('--name-prefix', default='g', help="jiriki's name in the games starts with this")
    ap.add_argument('games', nargs='+')
    a = ap.parse_args()
    for path in a.games:
        lines = open(path).read().split('\n')
        me = '+' if lines[1][2:].startswith(a.name_prefix) else '-'
        moves, events, last = [], [], None
        for line in lines:
            if MOVE.match(line):
                last = line
                moves.append(line)
            m = COMMENT.match(line)
            if m and last:
                events.append((len(moves), last[0] == me, m.group(1), int(m.group(2))))
        if not moves or moves[-1][0] == me:
            continue  # a game jiriki won
        announced = next((e for e in events if not e[1] and e[2] == 'mate'), None)
        if not announced:
            continue
        ours = {e[0]: f"{e[2]} {e[3]}" for e in events if e[1]}
        usi = usi_moves(lines)
        report = []
        for ply in (announced[0] - 1, announced[0] - 3, announced[0] - 5):
            verdict, ms = go_mate(a.jiriki, usi[:ply], a.ms)
            report.append(f"after move {ply} (jiriki's score {ours.get(ply)}): {verdict}, {ms} ms")
        print(path, '|', ' | '.join(report), flush=True)


if __name__ == '__main__':
    main()
