// A recorded game as the CSA and KIF formats hold it (start position, moves, how it ended, names,
// times), and the pieces both formats and the hcpe coder share: building a position from a board
// array, and the text encodings (UTF-8, Shift_JIS/CP932) of Japanese record files.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shogi/position.h"

namespace jiriki {

// How a recorded game ended. "Side to move" is the side to move after the last recorded move.
enum class GameEnd {
  NONE,                  // the record stops without an end statement
  RESIGN,                // CSA %TORYO, KIF 投了: the side to move resigned
  MATE,                  // %TSUMI, 詰み: the side to move is checkmated
  SENNICHITE,            // %SENNICHITE, 千日手: repetition (a draw, unless by perpetual check)
  DECLARATION,           // %KACHI, 入玉勝ち: the side to move declared an entering-king win
  IMPASSE,               // %JISHOGI, 持将棋: draw by impasse
  TIME_UP,               // %TIME_UP, 切れ負け: the side to move lost on time
  ILLEGAL_MOVE,          // %ILLEGAL_MOVE, 反則負け: the side to move lost by an illegal move
  BLACK_ILLEGAL_ACTION,  // %+ILLEGAL_ACTION: Black lost by an illegal action
  WHITE_ILLEGAL_ACTION,  // %-ILLEGAL_ACTION: White lost by an illegal action
  ABORT,                 // %CHUDAN, 中断: the game was stopped without a result
  MAX_MOVES,             // %MAX_MOVES, 最大手数: drawn at the maximum game length
};

// Game result with dlshogi's hcpe values (the low two bits of hcpe's result byte).
enum GameResult : uint8_t { DRAW = 0, BLACK_WIN = 1, WHITE_WIN = 2 };

// The longest time for one move a record may hold (over three years): CSA's T line and KIF's
// "(minutes:seconds/...)" both hold it, and a whole game's total still fits in 64 bits. A file
// with more is refused rather than cut.
constexpr int MAX_MOVE_SECONDS = 99999999;

struct GameRecord {
  Position start;                     // the position before the first move
  std::vector<Move> moves;            // the moves played, each verified legal when read
  std::vector<int> seconds;           // time spent on each move (same length as moves), -1 where unknown
  std::vector<std::string> comments;  // empty, or one per move ("" for none): CSA ' lines after the move
  GameEnd end = GameEnd::NONE;
  std::string black, white;  // player names, UTF-8
  std::string event;         // CSA $EVENT, KIF 棋戦
  std::string start_time;    // CSA $START_TIME, KIF 開始日時, as written (e.g. "2024/05/01 10:00:00")

  // Appends a move (with its time, -1 when unknown).
  void add_move(Move m, int secs = -1) {
    moves.push_back(m);
    seconds.push_back(secs);
  }
  // The position after every recorded move.
  Position final_position() const;
};

// The winner of a recorded game, or nullopt when the record does not say (no end, aborted).
std::optional<GameResult> game_result(const GameRecord& rec);

// SFEN of a position given square by square (board[sq] by our square index), with move number 1.
// Nothing is validated here: Position::set_sfen does that.
std::string sfen_from_board(const std::array<Piece, SQ_NB>& board, const Hand hands[COLOR_NB], Color side);

// Text encodings of record files.
enum class TextEncoding { UTF8, UTF8_BOM, SHIFT_JIS };

// Converts the bytes of a record file to UTF-8: a UTF-8 BOM is dropped, valid UTF-8 is kept, and
// anything else is read as Shift_JIS (CP932). Returns an error when it is neither.
std::optional<std::string> decode_record_text(std::string_view bytes, std::string& utf8);
// Converts UTF-8 text to the requested encoding; throws std::runtime_error naming the first
// character Shift_JIS cannot hold.
std::string encode_record_text(std::string_view utf8, TextEncoding enc);

// The record files' lines without their line ends ("\n" or "\r\n").
std::vector<std::string> split_lines(std::string_view text);

}  // namespace jiriki
