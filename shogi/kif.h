// KIF game records (Kifu for Windows, ShogiGUI, ShogiHome): read from UTF-8 or Shift_JIS with
// every move checked legal, and write as UTF-8 with a BOM or as Shift_JIS. The reader takes the
// header lines (開始日時, 棋戦, 手合割, 先手/後手, 下手/上手), a BOD board (持駒 lines, the |
// board rows, 後手番), moves such as "７六歩(77)", "同　歩(23)", "２二角成(88)", "４五角打",
// "２四銀不成(33)" with optional times "( 0:01/00:00:01)", and the end words (投了, 詰み, 千日手,
// 入玉勝ち, 持将棋, 切れ負け, 反則負け, 反則勝ち, 中断). Comments (*, &, #) are skipped, and
// reading stops at the first variation (変化：).
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "shogi/record.h"

namespace jiriki {

// Parses a KIF record from the bytes of a file. Returns an error that names the line; `rec` is
// unspecified then.
std::optional<std::string> read_kif(std::string_view bytes, GameRecord& rec);
// The record as KIF text, UTF-8 with a BOM by default. With SHIFT_JIS, throws std::runtime_error
// when a name holds a character Shift_JIS lacks.
std::string write_kif(const GameRecord& rec, TextEncoding enc = TextEncoding::UTF8_BOM);

// The position as KIF's board diagram (BOD: hands, the 9x9 board, whose turn), UTF-8: what a person
// reads at the end of a game shown on a terminal.
std::string board_diagram(const Position& pos);
// A move as KIF writes it ("７六歩(77)", "同　銀(58)"; `previous` gives 同), UTF-8.
std::string move_to_kif(const Position& pos, Move m, Move previous);

}  // namespace jiriki
