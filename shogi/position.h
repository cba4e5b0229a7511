// The board position: pieces, hands, side to move, an incremental Zobrist key and the history of
// states since the position was set up, so that repetitions over the whole game can be seen.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shogi/bitboard.h"
#include "shogi/types.h"

namespace jiriki {

// Everything do_move computes that undo_move must restore or that the next move needs.
struct StateInfo {
  uint64_t key = 0;                         // Zobrist key of board, hands and side to move
  Bitboard checkers;                        // enemy pieces giving check to the side to move
  Bitboard pinned;                          // side-to-move pieces pinned to their own king
  Move move = MOVE_NONE;                    // the move that led here
  Piece captured = NO_PIECE;                // piece captured by that move
  int continuous_check[COLOR_NB] = {0, 0};  // consecutive checking moves by each colour
};

enum class EnteringKingRule { NONE, POINT27, POINT24 };

// Result of the repetition check at the current position.
enum class Repetition { NONE, DRAW, WIN, LOSE };  // WIN/LOSE: for the side to move (perpetual check)

class Position {
 public:
  // The largest SFEN move number accepted: a game's moves can follow it without overflow.
  static constexpr int MAX_MOVE_NUMBER = 1000000000;
  static constexpr const char* STARTPOS_SFEN = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1";

  static void init();  // builds attack tables and Zobrist keys; safe to call more than once

  Position() { set_startpos(); }
  void set_startpos();
  // Parses and validates an SFEN ("startpos" is accepted too). On error returns a message that
  // names the problem and leaves the position unchanged. One side may have no king, as the attacker
  // of a mate problem (tsume shogi) has none: that side is never in check.
  std::optional<std::string> set_sfen(std::string_view sfen);
  std::string sfen(bool with_ply = true) const;

  // Accessors.
  Color side_to_move() const { return side_; }
  Piece piece_on(Square s) const { return board_[s]; }
  const Hand& hand(Color c) const { return hand_[c]; }
  Square king_square(Color c) const { return king_[c]; }  // SQ_NONE when c has no king (a mate problem)
  Bitboard pieces() const { return occupied_; }
  Bitboard pieces(Color c) const { return by_color_[c]; }
  Bitboard pieces(PieceType pt) const { return by_type_[pt]; }
  Bitboard pieces(Color c, PieceType pt) const { return by_color_[c] & by_type_[pt]; }
  // Pieces that move like a gold: gold and the four promoted minors.
  Bitboard golds() const {
    return by_type_[GOLD] | by_type_[PRO_PAWN] | by_type_[PRO_LANCE] | by_type_[PRO_KNIGHT] | by_type_[PRO_SILVER];
  }
  uint64_t key() const { return st().key; }
  Bitboard checkers() const { return st().checkers; }
  bool in_check() const { return bool(st().checkers); }
  Bitboard pinned() const { return st().pinned; }
  int game_ply() const { return start_ply_ + int(states_.size()) - 1; }  // SFEN move number
  int plies_from_root() const { return int(states_.size()) - 1; }
  Move last_move() const { return st().move; }
  const StateInfo& state() const { return st(); }

  // Pieces of colour c attacking square s, given the occupancy occ.
  Bitboard attackers_to(Color c, Square s, Bitboard occ) const;
  Bitboard attackers_to(Color c, Square s) const { return attackers_to(c, s, occupied_); }
  // Pieces of either colour that block a slider's line to the king of colour king_color.
  Bitboard slider_blockers(Color king_color, Bitboard occ) const;

  // Full legality check for any 16-bit value (moves from USI, a book or a hash table).
  bool is_legal(Move m) const;
  bool gives_check(Move m) const;
  // True when dropping a pawn on `to` by the side to move would checkmate (illegal).
  bool pawn_drop_mates(Square to) const;
  // The piece a (pseudo-legal) move moves, before any promotion.
  Piece moved_piece(Move m) const { return is_drop(m) ? make_piece(side_, drop_type(m)) : board_[move_from(m)]; }

  void do_move(Move m);
  void undo_move();
  void do_null_move();  // passes the turn (mate search and tests)
  void undo_null_move();

  // Game rules. `max_previous` is how many earlier occurrences make a repetition: 3 for the
  // fourfold sennichite of the rules, 1 for a search that scores the first return as final.
  Repetition repetition(int max_previous = 3) const;
  // Declaration win for the side to move under the given rule (CSA 27-point: Black 28, White 27).
  bool declaration_win(EnteringKingRule rule) const;

  // Recomputes the key from scratch (tests compare it with the incremental one).
  uint64_t compute_key() const;
  // Consistency of the internal bitboards with the board array (tests).
  bool is_consistent() const;

 private:
  struct Blank {};
  explicit Position(Blank) {}  // uninitialised, filled by set_sfen
  void put_piece(Piece p, Square s);
  void remove_piece(Square s);
  void update_check_info();
  const StateInfo& st() const { return states_.back(); }
  StateInfo& st() { return states_.back(); }

  Piece board_[SQ_NB];
  Bitboard by_color_[COLOR_NB];
  Bitboard by_type_[PIECE_TYPE_NB];
  Bitboard occupied_;
  Hand hand_[COLOR_NB];
  Square king_[COLOR_NB];
  Color side_;
  int start_ply_ = 1;
  std::vector<StateInfo> states_;
};

namespace zobrist {
extern uint64_t PSQ[PIECE_NB][SQ_NB];
extern uint64_t HAND[COLOR_NB][HAND_TYPE_NB];  // added once per piece in hand
constexpr uint64_t SIDE = 1;                   // bit 0 set when White is to move
}  // namespace zobrist

// USI move text: "7g7f", "7g7f+", "P*5e". Parsing checks syntax only; use Position::is_legal.
std::string move_to_usi(Move m);
Move move_from_usi(const Position& pos, std::string_view text);  // MOVE_NONE when malformed

}  // namespace jiriki
