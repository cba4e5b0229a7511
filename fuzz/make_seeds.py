#!/usr/bin/env python3
"""Writes the fuzz harnesses' seed corpora (fuzz/corpus/NAME/) from the tests' data: the record
texts and SFENs of tests/test_records.cpp and tests/test_rules.cpp, their conversions by
`jiriki records convert` (CSA, KIF in UTF-8 and Shift_JIS, hcpe, hcpe3), a small model file from
`jiriki nn init` (its first bytes), and USI sessions like those of tests/test_usi.cpp.
Usage: fuzz/make_seeds.py BUILD/jiriki"""
import os, re, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JIRIKI = sys.argv[1]
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def c_literals(text):
    """Every statement `const char* NAME = "..." "...";` (or std::string; adjacent literals joined) as bytes."""
    out = {}
    for m in re.finditer(r'const (?:char\*|std::string) (\w+) =\s*((?:"(?:[^"\\]|\\.)*"\s*)+);', text):
        data = b""
        for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2)):
            raw = lit.encode("utf-8")
            i = 0
            while i < len(raw):
                c = raw[i:i + 1]
                if c != b"\\":
                    data += c
                    i += 1
                    continue
                e = raw[i + 1:i + 2]
                if e == b"x":
                    data += bytes([int(raw[i + 2:i + 4], 16)])
                    i += 4
                else:
                    data += {b"n": b"\n", b"r": b"\r", b"t": b"\t"}.get(e, e)
                    i += 2
        out[m.group(1)] = data
    return out


def write(name, seed, data):
    os.makedirs(os.path.join(CORPUS, name), exist_ok=True)
    with open(os.path.join(CORPUS, name, seed), "wb") as f:
        f.write(data)


records = c_literals(open(os.path.join(ROOT, "tests", "test_records.cpp"), encoding="utf-8").read())
csa = {k: v for k, v in records.items() if k in ("OPENING_CSA", "mate")}
kif = {k: v for k, v in records.items() if k in ("OPENING_KIF", "lance", "bod", "promo")}
for k, v in csa.items():
    write("csa", k.lower() + ".csa", v)
for k, v in kif.items():
    write("kif", k.lower() + ".kif", v)

# Conversions: each record as CSA, KIF (UTF-8 with BOM and Shift_JIS), hcpe and hcpe3.
with tempfile.TemporaryDirectory() as tmp:
    for k, v in list(csa.items()) + list(kif.items()):
        src = os.path.join(tmp, k + (".csa" if k in csa else ".kif"))
        open(src, "wb").write(v)
        for fmt in ("csa", "kif", "hcpe", "hcpe3"):
            out = os.path.join(tmp, k + "." + fmt)
            r = subprocess.run([JIRIKI, "records", "convert", "--to", fmt, "-o", out, src], capture_output=True)
            files = [out] if os.path.isfile(out) else [os.path.join(out, f) for f in sorted(os.listdir(out))] \
                if os.path.isdir(out) else []
            for f in files:  # csa and kif go to a directory, one file per game
                if r.returncode == 0 and os.path.getsize(f) > 0:
                    write(fmt, k.lower() + "_converted." + fmt, open(f, "rb").read())
    for k, v in kif.items():
        try:
            sjis = v.decode("utf-8").encode("cp932")
            write("kif", k.lower() + "_sjis.kif", sjis)
        except (UnicodeDecodeError, UnicodeEncodeError):
            pass
    model = os.path.join(tmp, "tiny.jnn")
    subprocess.run([JIRIKI, "nn", "init", "--blocks", "1", "--channels", "2", "-o", model], check=True,
                   capture_output=True)
    # A whole model is 2.2 MB (the value head alone is 256 x 2187): the seeds are its first bytes,
    # as a file (byte 0 even) and as a payload the harness frames (byte 0 odd; see fuzz_model.cpp).
    data = open(model, "rb").read()
    write("model", "file_head", b"\x00" + data[:4096])
    write("model", "header_only", b"\x00" + data[:20])
    write("model", "payload_head", b"\x01" + data[20:4096])
    write("model", "payload_arch", b"\x01" + data[20:44])
    bf16 = os.path.join(tmp, "tiny_bf16.jnn")  # the same network with bf16 weights (jiriki nn convert)
    subprocess.run([JIRIKI, "nn", "convert", model, "-o", bf16], check=True, capture_output=True)
    data = open(bf16, "rb").read()
    write("model", "file_head_bf16", b"\x00" + data[:4096])
    write("model", "payload_head_bf16", b"\x01" + data[20:4096])

rules = open(os.path.join(ROOT, "tests", "test_rules.cpp"), encoding="utf-8").read()
sfens = sorted(set(re.findall(r'"([1-9+A-Za-z/]+ [bw] [-0-9A-Za-z]+(?: \d+)?)"', rules)))
for i, s in enumerate(sfens):
    write("sfen", "rules_%02d" % i, s.encode())
write("sfen", "startpos", b"startpos")
write("sfen", "hand_repeated", b"8k/9/9/9/9/9/9/9/K8 b GG2Pp3P 1")

book = c_literals(open(os.path.join(ROOT, "tests", "test_book.cpp"), encoding="utf-8").read())
write("book", "hand_book.db", book["HAND_BOOK"])
write("book", "no_ply.db", b"#YANEURAOU-DB2016 1.00\nsfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -\n"
      b"7g7f 3c3d 50 32 10\n")

for i, text in enumerate(["7g7f", "8h2b+", "P*5e", "G*5e", "7g7f+", "resign", "3c3d", "2b3c", "8h2b"]):
    for pos in range(5):
        write("usi_move", "m%d_p%d" % (i, pos), bytes([pos]) + text.encode())

sessions = {
    "game": "usi\nisready\nusinewgame\nposition startpos\ngo btime 0 wtime 0 byoyomi 1000\n"
            "position startpos moves 7g7f\ngo ponder btime 0 wtime 0 byoyomi 1000\nponderhit\nstop\ngameover win\n",
    "ponder_miss": "position startpos moves 7g7f 3c3d\ngo ponder byoyomi 1000\nstop\n"
                   "position startpos moves 7g7f 8c8d\ngo byoyomi 1000\ngameover lose\nquit\n",
    "errors": "go wtime abc\nposition sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL q - 1\ngo nodes 10\n"
              "setoption name MultiPV value two\nsetoption name USI_Ponder value maybe\nfoo\nposition startpos moves 7g7x\n",
    "mate": "position sfen 4k4/9/4P4/9/9/9/9/9/4K4 b G 1\ngo mate 1000\nposition sfen 4k4/9/9/9/9/9/9/9/4K4 b P 1\n"
            "go mate infinite\nstop\ngo mate soon\n",
    "infinite": "setoption name MultiPV value 3\nposition startpos\ngo infinite\nisready\nstop\ngo infinite\n"
                "position startpos moves 2g2f\ngo movetime 100\nusinewgame\n",
    "declare": "position sfen +P+P+PS1S+P+P+P/1R2K2B1/9/9/9/9/9/9/4k4 b 10P 1\ngo btime 1000 wtime 1000 byoyomi 100\n"
               "setoption name ResignValue value 1000\nposition startpos\ngo nodes 10\n",
}
for k, v in sessions.items():
    write("usi_engine", k + ".txt", v.encode())
