#include "shogi/position.h"

#include <cctype>
#include <charconv>
#include <random>
#include <sstream>

#include "shogi/movegen.h"

namespace jiriki {

namespace zobrist {
uint64_t PSQ[PIECE_NB][SQ_NB];
uint64_t HAND[COLOR_NB][HAND_TYPE_NB];
}  // namespace zobrist

void Position::init() {
  static bool done = false;
  if (done) return;
  done = true;
  bb::init();
  // Keys are combined by addition (commutative, so hands are just counts times a key); bit 0 is
  // kept clear in every key so that it can hold the side to move.
  std::mt19937_64 rng(20261122);
  for (auto& row : zobrist::PSQ)
    for (auto& k : row) k = rng() & ~1ULL;
  for (auto& row : zobrist::HAND)
    for (auto& k : row) k = rng() & ~1ULL;
}

void Position::put_piece(Piece p, Square s) {
  board_[s] = p;
  Bitboard b = Bitboard::square(s);
  by_color_[color_of(p)] |= b;
  by_type_[type_of(p)] |= b;
  occupied_ |= b;
}

void Position::remove_piece(Square s) {
  Piece p = board_[s];
  Bitboard b = Bitboard::square(s);
  by_color_[color_of(p)] ^= b;
  by_type_[type_of(p)] ^= b;
  occupied_ ^= b;
  board_[s] = NO_PIECE;
}

void Position::set_startpos() { set_sfen(STARTPOS_SFEN); }

namespace {
int char_to_type(char c) {
  switch (std::toupper(static_cast<unsigned char>(c))) {
    case 'P': return PAWN;
    case 'L': return LANCE;
    case 'N': return KNIGHT;
    case 'S': return SILVER;
    case 'B': return BISHOP;
    case 'R': return ROOK;
    case 'G': return GOLD;
    case 'K': return KING;
    default: return NO_PIECE_TYPE;
  }
}
}  // namespace

std::optional<std::string> Position::set_sfen(std::string_view text) {
  std::string s(text);
  if (s == "startpos") s = STARTPOS_SFEN;
  std::istringstream is(s);
  std::string board, side, hands, ply_text, extra;
  is >> board >> side >> hands >> ply_text >> extra;
  if (board.empty() || side.empty() || hands.empty())
    return "SFEN needs a board, a side to move and hands: '" + s + "'";
  if (!extra.empty()) return "unexpected text after the move number in SFEN: '" + extra + "'";

  Position p{Blank{}};  // built aside so that an error leaves *this unchanged
  p.states_.clear();
  for (auto& x : p.board_) x = NO_PIECE;
  for (auto& b : p.by_color_) b = Bitboard();
  for (auto& b : p.by_type_) b = Bitboard();
  p.occupied_ = Bitboard();
  p.hand_[BLACK] = p.hand_[WHITE] = Hand{};
  p.king_[BLACK] = p.king_[WHITE] = SQ_NONE;

  // Board: ranks a..i separated by '/', each from file 9 down to file 1.
  int rank = 0, file = 8;
  bool promote = false;
  for (size_t i = 0; i < board.size(); ++i) {
    char c = board[i];
    if (c == '/') {
      if (file != -1) return "SFEN rank " + std::to_string(rank + 1) + " does not have 9 squares";
      if (promote) return "SFEN has '+' not followed by a piece";
      if (++rank > 8) return "SFEN board has more than 9 ranks";
      file = 8;
    } else if (c >= '1' && c <= '9') {
      if (promote) return "SFEN has '+' before a digit";
      file -= c - '0';
      if (file < -1) return "SFEN rank " + std::to_string(rank + 1) + " has more than 9 squares";
    } else if (c == '+') {
      if (promote) return "SFEN has '++'";
      promote = true;
    } else {
      int pt = char_to_type(c);
      if (pt == NO_PIECE_TYPE) return std::string("SFEN board has an unknown character '") + c + "'";
      if (file < 0) return "SFEN rank " + std::to_string(rank + 1) + " has more than 9 squares";
      if (promote && !can_promote(PieceType(pt)))
        return std::string("SFEN promotes a piece that cannot promote: '+") + c + "'";
      Color col = std::isupper(static_cast<unsigned char>(c)) ? BLACK : WHITE;
      PieceType t = promote ? promoted(PieceType(pt)) : PieceType(pt);
      Square sq = make_square(file, rank);
      if (t == KING) {
        if (p.king_[col] != SQ_NONE)
          return std::string("SFEN has two ") + (col == BLACK ? "Black" : "White") + " kings";
        p.king_[col] = sq;
      }
      p.put_piece(make_piece(col, t), sq);
      --file;
      promote = false;
    }
  }
  if (rank != 8 || file != -1) return "SFEN board does not have 9 full ranks";
  if (promote) return "SFEN ends with '+'";

  if (side == "b") p.side_ = BLACK;
  else if (side == "w") p.side_ = WHITE;
  else return "SFEN side to move must be 'b' or 'w', got '" + side + "'";

  if (hands != "-") {
    int count = 0;
    bool have_count = false;
    for (char c : hands) {
      if (std::isdigit(static_cast<unsigned char>(c))) {
        count = count * 10 + (c - '0');
        have_count = true;
        if (count > 18) return "SFEN hand count too large in '" + hands + "'";
        continue;
      }
      int pt = char_to_type(c);
      if (pt == NO_PIECE_TYPE || pt == KING) return std::string("SFEN hand has an invalid piece '") + c + "'";
      if (have_count && count < 1) return "SFEN hand count must be at least 1 in '" + hands + "'";
      Color col = std::isupper(static_cast<unsigned char>(c)) ? BLACK : WHITE;
      // A letter written again adds up (GG is two golds, as other engines read it); the total is
      // checked here, before it could wrap, and against the board below.
      const int total = p.hand_[col].count[pt] + (have_count ? count : 1);
      if (total > MAX_PIECES[pt])
        return std::string("SFEN has ") + std::to_string(total) + " pieces of type '" + PIECE_CHARS[pt] +
               "' in one hand (at most " + std::to_string(MAX_PIECES[pt]) + ")";
      p.hand_[col].count[pt] = uint8_t(total);
      count = 0;
      have_count = false;
    }
    if (have_count) return "SFEN hand ends with a number: '" + hands + "'";
  }

  p.start_ply_ = 1;
  if (!ply_text.empty()) {
    // Digits only, and small enough that the moves played after it still count in an int.
    int v = 0;
    auto [end, ec] = std::from_chars(ply_text.data(), ply_text.data() + ply_text.size(), v);
    if (ec != std::errc() || end != ply_text.data() + ply_text.size() || v < 1 || v > MAX_MOVE_NUMBER)
      return "SFEN move number must be an integer from 1 to " + std::to_string(MAX_MOVE_NUMBER) + ", got '" + ply_text +
             "'";
    p.start_ply_ = v;
  }

  // Validation of the whole position.
  // A mate problem gives the attacker no king; a position needs the king of one side at least.
  if (p.king_[BLACK] == SQ_NONE && p.king_[WHITE] == SQ_NONE) return std::string("SFEN has no king on either side");
  for (int pt = PAWN; pt <= GOLD; ++pt) {
    int n = p.hand_[BLACK][PieceType(pt)] + p.hand_[WHITE][PieceType(pt)] + p.pieces(PieceType(pt)).popcount();
    if (can_promote(PieceType(pt))) n += p.pieces(promoted(PieceType(pt))).popcount();
    if (n > MAX_PIECES[pt])
      return std::string("SFEN has ") + std::to_string(n) + " pieces of type '" + PIECE_CHARS[pt] + "' (at most " +
             std::to_string(MAX_PIECES[pt]) + ")";
  }
  for (Square sq = 0; sq < SQ_NB; ++sq) {
    Piece pc = p.board_[sq];
    if (pc == NO_PIECE) continue;
    int rr = relative_rank(color_of(pc), rank_of(sq));
    PieceType t = type_of(pc);
    if (((t == PAWN || t == LANCE) && rr == 0) || (t == KNIGHT && rr < 2))
      return "SFEN has a piece that can never move on " + square_to_usi(sq);
  }
  for (Color c : {BLACK, WHITE})
    for (int f = 0; f < 9; ++f)
      if ((p.pieces(c, PAWN) & bb::FILE_BB[f]).more_than_one())
        return "SFEN has two unpromoted " + std::string(c == BLACK ? "Black" : "White") + " pawns on file " +
               std::to_string(f + 1);
  if (p.king_[~p.side_] != SQ_NONE && p.attackers_to(p.side_, p.king_[~p.side_]))
    return std::string("SFEN position has the side not to move in check");

  p.states_.emplace_back();
  p.st().key = p.compute_key();
  p.update_check_info();
  *this = std::move(p);
  return std::nullopt;
}

std::string Position::sfen(bool with_ply) const {
  std::string s;
  for (int r = 0; r < 9; ++r) {
    int empty = 0;
    for (int f = 8; f >= 0; --f) {
      Piece p = board_[make_square(f, r)];
      if (p == NO_PIECE) {
        ++empty;
        continue;
      }
      if (empty) s += char('0' + empty), empty = 0;
      PieceType t = type_of(p);
      if (t > KING) s += '+';
      char c = PIECE_CHARS[unpromoted(t)];
      s += color_of(p) == BLACK ? c : char(std::tolower(c));
    }
    if (empty) s += char('0' + empty);
    if (r < 8) s += '/';
  }
  s += side_ == BLACK ? " b " : " w ";
  std::string h;
  for (Color c : {BLACK, WHITE})
    for (PieceType pt : {ROOK, BISHOP, GOLD, SILVER, KNIGHT, LANCE, PAWN}) {
      int n = hand_[c][pt];
      if (!n) continue;
      if (n > 1) h += std::to_string(n);
      char ch = PIECE_CHARS[pt];
      h += c == BLACK ? ch : char(std::tolower(ch));
    }
  s += h.empty() ? "-" : h;
  if (with_ply) s += " " + std::to_string(game_ply());
  return s;
}

uint64_t Position::compute_key() const {
  uint64_t k = side_ == WHITE ? zobrist::SIDE : 0;
  for (Square s = 0; s < SQ_NB; ++s)
    if (board_[s] != NO_PIECE) k += zobrist::PSQ[board_[s]][s];
  for (Color c : {BLACK, WHITE})
    for (int pt = PAWN; pt <= GOLD; ++pt) k += zobrist::HAND[c][pt] * hand_[c].count[pt];
  return k;
}

bool Position::is_consistent() const {
  Bitboard occ, col[2], typ[PIECE_TYPE_NB];
  for (Square s = 0; s < SQ_NB; ++s) {
    Piece p = board_[s];
    if (p == NO_PIECE) continue;
    occ |= Bitboard::square(s);
    col[color_of(p)] |= Bitboard::square(s);
    typ[type_of(p)] |= Bitboard::square(s);
    if (type_of(p) == KING && king_[color_of(p)] != s) return false;
  }
  if (!(occ == occupied_) || !(col[0] == by_color_[0]) || !(col[1] == by_color_[1])) return false;
  for (int t = 0; t < PIECE_TYPE_NB; ++t)
    if (!(typ[t] == by_type_[t])) return false;
  return compute_key() == key();
}

Bitboard Position::attackers_to(Color c, Square s, Bitboard occ) const {
  Color t = ~c;  // attacks of a c piece onto s are found by looking from s as a piece of colour ~c
  Bitboard a = (bb::STEP_ATTACKS[make_piece(t, PAWN)][s] & by_type_[PAWN]) |
               (bb::STEP_ATTACKS[make_piece(t, KNIGHT)][s] & by_type_[KNIGHT]) |
               (bb::STEP_ATTACKS[make_piece(t, SILVER)][s] & by_type_[SILVER]) |
               (bb::STEP_ATTACKS[make_piece(t, GOLD)][s] & golds()) |
               (bb::king_attacks(s) & (by_type_[KING] | by_type_[HORSE] | by_type_[DRAGON]));
  Bitboard bishops = by_type_[BISHOP] | by_type_[HORSE];
  Bitboard rooks = by_type_[ROOK] | by_type_[DRAGON];
  Bitboard lances = by_type_[LANCE];
  Bitboard mine = by_color_[c];
  if (bishops & mine & bb::BISHOP_PSEUDO[s]) a |= bb::bishop_attacks(s, occ) & bishops;
  if (rooks & mine & bb::ROOK_PSEUDO[s]) a |= bb::rook_attacks(s, occ) & rooks;
  if (lances & mine & bb::LANCE_PSEUDO[t][s]) a |= bb::lance_attacks(t, s, occ) & lances;
  return a & mine;
}

Bitboard Position::slider_blockers(Color kc, Bitboard occ) const {
  Square ksq = king_[kc];
  if (ksq == SQ_NONE) return Bitboard();
  Color e = ~kc;
  Bitboard snipers = ((bb::ROOK_PSEUDO[ksq] & (by_type_[ROOK] | by_type_[DRAGON])) |
                      (bb::BISHOP_PSEUDO[ksq] & (by_type_[BISHOP] | by_type_[HORSE])) |
                      (bb::LANCE_PSEUDO[kc][ksq] & by_type_[LANCE])) &
                     by_color_[e];
  Bitboard blockers;
  while (snipers) {
    Square s = snipers.pop_lsb();
    Bitboard b = bb::BETWEEN[ksq][s] & occ;
    if (b && !b.more_than_one()) blockers |= b;
  }
  return blockers;
}

void Position::update_check_info() {
  StateInfo& s = st();
  s.checkers = king_[side_] == SQ_NONE ? Bitboard() : attackers_to(~side_, king_[side_]);
  s.pinned = slider_blockers(side_, occupied_) & by_color_[side_];
}

void Position::do_move(Move m) {
  const StateInfo& prev = states_.back();
  states_.push_back(
      StateInfo{prev.key, Bitboard(), Bitboard(), m, NO_PIECE, {prev.continuous_check[0], prev.continuous_check[1]}});
  StateInfo& s = states_.back();
  Color us = side_;
  Square to = move_to(m);
  if (is_drop(m)) {
    PieceType pt = drop_type(m);
    Piece p = make_piece(us, pt);
    put_piece(p, to);
    hand_[us].count[pt]--;
    s.key += zobrist::PSQ[p][to] - zobrist::HAND[us][pt];
  } else {
    Square from = move_from(m);
    Piece p = board_[from];
    Piece captured = board_[to];
    if (captured != NO_PIECE) {
      PieceType ct = unpromoted(type_of(captured));
      remove_piece(to);
      hand_[us].count[ct]++;
      s.key += zobrist::HAND[us][ct] - zobrist::PSQ[captured][to];
      s.captured = captured;
    }
    remove_piece(from);
    Piece np = is_promotion(m) ? Piece(p + int(PROMOTED)) : p;
    put_piece(np, to);
    if (type_of(p) == KING) king_[us] = to;
    s.key += zobrist::PSQ[np][to] - zobrist::PSQ[p][from];
  }
  side_ = ~us;
  s.key ^= zobrist::SIDE;
  update_check_info();
  s.continuous_check[us] = s.checkers ? s.continuous_check[us] + 1 : 0;
}

void Position::undo_move() {
  const StateInfo& s = states_.back();
  Move m = s.move;
  side_ = ~side_;
  Color us = side_;
  Square to = move_to(m);
  if (is_drop(m)) {
    remove_piece(to);
    hand_[us].count[drop_type(m)]++;
  } else {
    Square from = move_from(m);
    Piece p = board_[to];
    remove_piece(to);
    Piece orig = is_promotion(m) ? Piece(p - int(PROMOTED)) : p;
    put_piece(orig, from);
    if (type_of(orig) == KING) king_[us] = from;
    if (s.captured != NO_PIECE) {
      put_piece(s.captured, to);
      hand_[us].count[unpromoted(type_of(s.captured))]--;
    }
  }
  states_.pop_back();
}

void Position::do_null_move() {
  const StateInfo& prev = states_.back();
  states_.push_back(StateInfo{prev.key ^ zobrist::SIDE,
                              Bitboard(),
                              Bitboard(),
                              MOVE_NONE,
                              NO_PIECE,
                              {prev.continuous_check[0], prev.continuous_check[1]}});
  side_ = ~side_;
  update_check_info();
}

void Position::undo_null_move() {
  side_ = ~side_;
  states_.pop_back();
}

bool Position::pawn_drop_mates(Square to) const {
  Color us = side_, them = ~us;
  Square ksq = king_[them];
  if (ksq == SQ_NONE || !(bb::STEP_ATTACKS[make_piece(us, PAWN)][to] == Bitboard::square(ksq))) return false;
  Bitboard occ = occupied_ | Bitboard::square(to);
  // Another enemy piece may capture the pawn, unless pinned off the line to the pawn.
  Bitboard capturers = attackers_to(them, to, occ) & ~Bitboard::square(ksq);
  if (capturers) {
    Bitboard pinned_them = slider_blockers(them, occ) & by_color_[them];
    while (capturers) {
      Square c = capturers.pop_lsb();
      if (!pinned_them.test(c) || bb::aligned(c, to, ksq)) return false;
    }
  }
  // The king may take the pawn or step away to a square we do not attack.
  Bitboard escapes = bb::king_attacks(ksq) & ~by_color_[them];
  Bitboard occ_no_king = occ ^ Bitboard::square(ksq);
  while (escapes) {
    Square e = escapes.pop_lsb();
    if (!attackers_to(us, e, occ_no_king)) return false;
  }
  return true;
}

bool Position::is_legal(Move m) const {
  if (m == MOVE_NONE || (m & 0x8000)) return false;
  Color us = side_, them = ~us;
  Square to = move_to(m), from = move_from(m);
  if (to >= SQ_NB || from >= SQ_NB + GOLD) return false;
  int rr = relative_rank(us, rank_of(to));
  if (is_drop(m)) {
    PieceType pt = drop_type(m);
    if (is_promotion(m) || hand_[us][pt] == 0 || board_[to] != NO_PIECE) return false;
    if (((pt == PAWN || pt == LANCE) && rr == 0) || (pt == KNIGHT && rr < 2)) return false;
    if (pt == PAWN && (pieces(us, PAWN) & bb::FILE_BB[file_of(to)])) return false;
    Bitboard chk = checkers();
    if (chk) {
      if (chk.more_than_one()) return false;
      if (!bb::BETWEEN[king_[us]][chk.lsb()].test(to)) return false;
    }
    if (pt == PAWN && pawn_drop_mates(to)) return false;
    return true;
  }
  Piece p = board_[from];
  if (p == NO_PIECE || color_of(p) != us) return false;
  if (board_[to] != NO_PIECE && color_of(board_[to]) == us) return false;
  if (!bb::attacks(p, from, occupied_).test(to)) return false;
  PieceType pt = type_of(p);
  if (is_promotion(m)) {
    if (!can_promote(pt) || !(in_promotion_zone(us, from) || in_promotion_zone(us, to))) return false;
  } else if (((pt == PAWN || pt == LANCE) && rr == 0) || (pt == KNIGHT && rr < 2)) {
    return false;
  }
  // King safety after the move: no enemy piece (other than one captured on `to`) attacks our king.
  Bitboard occ = (occupied_ ^ Bitboard::square(from)) | Bitboard::square(to);
  Square ksq = pt == KING ? to : king_[us];
  return ksq == SQ_NONE || !(attackers_to(them, ksq, occ) & ~Bitboard::square(to));
}

bool Position::gives_check(Move m) const {
  Color us = side_, them = ~us;
  Square ksq = king_[them], to = move_to(m);
  if (ksq == SQ_NONE) return false;
  Piece np =
      is_drop(m) ? make_piece(us, drop_type(m)) : Piece(board_[move_from(m)] + (is_promotion(m) ? int(PROMOTED) : 0));
  Bitboard occ = occupied_ | Bitboard::square(to);
  if (!is_drop(m)) occ ^= Bitboard::square(move_from(m));
  if (bb::attacks(np, to, occ).test(ksq)) return true;
  if (is_drop(m)) return false;
  Square from = move_from(m);
  if (!bb::LINE[from][ksq]) return false;  // not on a line with the king: no discovered check
  Bitboard mine = by_color_[us] & ~Bitboard::square(from);
  Bitboard sliders = (bb::bishop_attacks(ksq, occ) & (by_type_[BISHOP] | by_type_[HORSE])) |
                     (bb::rook_attacks(ksq, occ) & (by_type_[ROOK] | by_type_[DRAGON])) |
                     (bb::lance_attacks(them, ksq, occ) & by_type_[LANCE]);
  return bool(sliders & mine);
}

Repetition Position::repetition(int max_previous) const {
  const int n = int(states_.size());
  const StateInfo& cur = st();
  int count = 0;
  // The same side is to move every 2 plies, and no position repeats within 4 plies.
  for (int i = n - 5; i >= 0; i -= 2) {
    if (states_[i].key != cur.key) continue;
    if (++count < max_previous) continue;
    int dist = n - 1 - i;
    // A side that gave check with every one of its moves in the cycle loses.
    if (cur.continuous_check[~side_] * 2 >= dist) return Repetition::WIN;
    if (cur.continuous_check[side_] * 2 >= dist) return Repetition::LOSE;
    return Repetition::DRAW;
  }
  return Repetition::NONE;
}

bool Position::declaration_win(EnteringKingRule rule) const {
  if (rule == EnteringKingRule::NONE || in_check()) return false;
  Color us = side_;
  Bitboard zone = bb::ZONE[us];
  if (king_[us] == SQ_NONE || !zone.test(king_[us])) return false;
  Bitboard own = by_color_[us] & zone & ~Bitboard::square(king_[us]);
  if (own.popcount() < 10) return false;
  Bitboard big = by_type_[BISHOP] | by_type_[ROOK] | by_type_[HORSE] | by_type_[DRAGON];
  int points = own.popcount() + 4 * (own & big).popcount();
  for (int pt = PAWN; pt <= GOLD; ++pt) points += hand_[us].count[pt] * (pt == BISHOP || pt == ROOK ? 5 : 1);
  if (rule == EnteringKingRule::POINT27) return points >= (us == BLACK ? 28 : 27);
  return points >= 31;
}

std::string move_to_usi(Move m) {
  if (m == MOVE_NONE) return "none";
  // A 16-bit value read from a file may be no move at all: say so rather than index past the tables.
  if (move_to(m) >= SQ_NB || (is_drop(m) && drop_type(m) > GOLD)) return "(not a move: " + std::to_string(m) + ")";
  if (is_drop(m)) return std::string{PIECE_CHARS[drop_type(m)], '*'} + square_to_usi(move_to(m));
  return square_to_usi(move_from(m)) + square_to_usi(move_to(m)) + (is_promotion(m) ? "+" : "");
}

Move move_from_usi(const Position&, std::string_view t) {
  auto sq = [](char f, char r) -> Square {
    if (f < '1' || f > '9' || r < 'a' || r > 'i') return SQ_NONE;
    return make_square(f - '1', r - 'a');
  };
  if (t.size() == 4 && t[1] == '*') {
    int pt = char_to_type(t[0]);
    if (pt == NO_PIECE_TYPE || pt == KING || !std::isupper(static_cast<unsigned char>(t[0]))) return MOVE_NONE;
    Square to = sq(t[2], t[3]);
    return to == SQ_NONE ? MOVE_NONE : make_drop(PieceType(pt), to);
  }
  if (t.size() != 4 && !(t.size() == 5 && t[4] == '+')) return MOVE_NONE;
  Square from = sq(t[0], t[1]), to = sq(t[2], t[3]);
  if (from == SQ_NONE || to == SQ_NONE || from == to) return MOVE_NONE;
  return make_move(from, to, t.size() == 5);
}

}  // namespace jiriki
