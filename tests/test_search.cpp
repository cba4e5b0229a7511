// Tree search with a tiny network: forced mates found and avoided, repetitions and declarations at
// the root, node limits, tree reuse, the memory bound; the evaluation queue; time allocation.
// Every claim about a position is checked independently with the rules core (brute force).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>

#include <chrono>
#include <cmath>
#include <thread>

#include "engine/search/search.h"
#include "nn/features.h"
#include "shogi/movegen.h"
#include "tests/tiny_network.h"

using namespace jiriki;
using namespace jiriki::search;
using jiriki::testing::tiny_eval_queue;

namespace {

Move parse(const Position& pos, const std::string& usi) {
  Move m = move_from_usi(pos, usi);
  REQUIRE(m != MOVE_NONE);
  REQUIRE(pos.is_legal(m));
  return m;
}

std::vector<Move> parse_moves(const std::string& sfen, const std::vector<std::string>& usi) {
  Position pos;
  REQUIRE(!pos.set_sfen(sfen));
  std::vector<Move> moves;
  for (const auto& u : usi) {
    moves.push_back(parse(pos, u));
    pos.do_move(moves.back());
  }
  return moves;
}

// True when the side to move can checkmate in one move (found by trying every move).
bool has_mate_in_1(Position& pos) {
  for (Move m : legal_moves(pos)) {
    pos.do_move(m);
    bool mated = legal_moves(pos).size() == 0;
    pos.undo_move();
    if (mated) return true;
  }
  return false;
}

struct Fixture {
  std::unique_ptr<EvalQueue> queue = tiny_eval_queue(16);
  Searcher searcher{size_t(64) << 20};
  Fixture() {
    SearchParams p;
    p.threads = 2;
    p.batch_size = 8;
    searcher.set_params(p);
    searcher.set_eval_queue(queue.get());
  }
  SearchResult search(const std::string& sfen, const std::vector<Move>& moves, int64_t nodes) {
    REQUIRE(!searcher.set_position(sfen, moves));
    SearchLimits limits;
    limits.nodes = nodes;
    return searcher.run(limits);
  }
  void set(const std::function<void(SearchParams&)>& f) {
    SearchParams p = searcher.params();
    f(p);
    searcher.set_params(p);
  }
};

int64_t root_visits(const SearchInfo& info) {
  int64_t n = 0;
  for (const auto& l : info.lines) n += l.visits;
  return n;
}

const RootLine* line_of(const SearchInfo& info, Move m) {
  for (const auto& l : info.lines)
    if (l.move == m) return &l;
  return nullptr;
}

}  // namespace

TEST_CASE("search: takes a mate in 1", "[search]") {
  // G*5b mates (the pawn on 5c guards the gold); the random network does not know that.
  const std::string sfen = "4k4/9/4P4/9/9/9/9/9/4K4 b G 1";
  Fixture f;
  f.set([](SearchParams& p) { p.leaf_mate_plies = 0; });  // found by the tree itself
  SearchResult r = f.search(sfen, {}, 5000);
  REQUIRE(r.kind == SearchResult::MOVE);
  Position pos;
  pos.set_sfen(sfen);
  REQUIRE(pos.is_legal(r.best));
  pos.do_move(r.best);
  CHECK(legal_moves(pos).size() == 0);  // checkmate, by the rules core
  CHECK(r.info.lines[0].mate == 1);
  CHECK(r.info.nodes < 5000);  // a proven root ends the search
}

TEST_CASE("search: a mate in 3 is proven by the leaf mate search and by the root mate thread", "[search]") {
  // White: king 1a, pawn 1b. Black: bishop and gold in hand. No mate in 1; a mate in 3 (brute force).
  const std::string sfen = "8k/8p/9/9/9/9/9/9/K8 b BG 1";
  Position pos;
  pos.set_sfen(sfen);
  REQUIRE_FALSE(has_mate_in_1(pos));
  auto mates_in_3 = [&](Move m) {  // every reply to m allows a mate in 1
    pos.do_move(m);
    bool all = legal_moves(pos).size() > 0;
    for (Move r : legal_moves(pos)) {
      pos.do_move(r);
      all &= has_mate_in_1(pos);
      pos.undo_move();
    }
    pos.undo_move();
    return all;
  };
  for (bool root_mate : {false, true}) {
    Fixture f;
    f.set([&](SearchParams& p) {
      p.root_mate_search = root_mate;
      p.leaf_mate_plies = root_mate ? 0 : 1;
    });
    SearchResult r = f.search(sfen, {}, root_mate ? 1000000 : 20000);
    INFO("root mate thread " << root_mate << ": " << move_to_usi(r.best) << " after " << r.info.nodes << " playouts");
    REQUIRE(r.kind == SearchResult::MOVE);
    CHECK(mates_in_3(r.best));
    CHECK(r.info.lines[0].mate == 3);
  }
}

TEST_CASE("search: the move limit makes every move a draw", "[search]") {
  // Move 100 with MaxMovesToDraw 100: whatever Black plays ends the game drawn.
  const std::string sfen = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 100";
  Fixture f;
  f.set([](SearchParams& p) {
    p.rules.max_plies = 100;
    p.draw_value_black = 0.3f;
    p.multipv = 600;
  });
  SearchResult r = f.search(sfen, {}, 300);
  int visited = 0;
  for (const auto& l : r.info.lines)
    if (l.visits > 0) {
      ++visited;
      CHECK(l.winrate == Approx(0.3f));
    }
  CHECK(visited >= 10);
  // One move earlier the limit is not reached yet: values are the network's, not all 0.3.
  f.set([](SearchParams& p) { p.rules.max_plies = 101; });
  r = f.search(sfen, {}, 300);
  bool other = false;
  for (const auto& l : r.info.lines) other |= l.visits > 0 && std::abs(l.winrate - 0.3f) > 1e-3f;
  CHECK(other);
}

TEST_CASE("search: avoids a mate in 1 against it", "[search]") {
  // White threatens G*5h mate (the pawn on 5g guards 5h). Brute force splits Black's moves into
  // those that allow a mate in 1 and those that do not; the engine must pick one of the latter.
  Position pos;
  REQUIRE(!pos.set_sfen("4k4/9/9/9/9/9/PP2p2PP/9/4K3L w g 1"));  // the threat: White to move mates
  REQUIRE(has_mate_in_1(pos));
  const std::string game = "4k4/9/9/9/9/9/PP2p2PP/9/4K3L b g 1";
  REQUIRE(!pos.set_sfen(game));
  int safe = 0, unsafe = 0;
  for (Move m : legal_moves(pos)) {
    pos.do_move(m);
    (has_mate_in_1(pos) ? unsafe : safe) += 1;
    pos.undo_move();
  }
  REQUIRE(safe >= 1);
  REQUIRE(unsafe >= 5);

  for (int leaf_mate : {1, 0}) {
    Fixture f;
    f.set([&](SearchParams& p) { p.leaf_mate_plies = leaf_mate; });
    SearchResult r = f.search(game, {}, 3000);
    REQUIRE(r.kind == SearchResult::MOVE);
    REQUIRE(pos.is_legal(r.best));
    pos.do_move(r.best);
    CHECK_FALSE(has_mate_in_1(pos));
    pos.undo_move();
  }
}

TEST_CASE("search: repetitions at the root follow the draw value and the perpetual-check rule", "[search]") {
  const std::string sfen = "4k4/9/9/9/9/9/9/9/K2R5 b - 1";
  // A quiet cycle: from here 6i7i repeats the position after Black's first move (a draw).
  const std::vector<Move> quiet = parse_moves(sfen, {"6i7i", "5a4a", "7i6i", "4a5a"});
  Position root;
  root.set_sfen(sfen);
  for (Move m : quiet) root.do_move(m);
  const Move repeat = parse(root, "6i7i");
  root.do_move(repeat);
  REQUIRE(root.repetition(1) == Repetition::DRAW);  // independent check by the rules core

  Fixture f;
  f.set([](SearchParams& p) {
    p.draw_value_black = 1.0f;
    p.multipv = 600;
  });
  SearchResult r = f.search(sfen, quiet, 2000);
  CHECK(r.best == repeat);  // a draw is worth a win to this engine
  f.set([](SearchParams& p) { p.draw_value_black = 0.0f; });
  r = f.search(sfen, quiet, 2000);
  CHECK(r.best != repeat);  // ... and a loss to this one
  REQUIRE(line_of(r.info, repeat));
  CHECK(line_of(r.info, repeat)->winrate == Approx(0.0f));

  // Perpetual check: Black has checked on every move, and 4i5i would repeat: Black would lose,
  // whatever a draw is worth.
  const std::vector<Move> checks = parse_moves(sfen, {"6i5i", "5a4a", "5i4i", "4a5a"});
  Position p2;
  p2.set_sfen(sfen);
  for (Move m : checks) p2.do_move(m);
  const Move perpetual = parse(p2, "4i5i");
  p2.do_move(perpetual);
  REQUIRE(p2.repetition(1) == Repetition::WIN);  // for White, the side checked
  f.set([](SearchParams& p) { p.draw_value_black = 1.0f; });
  r = f.search(sfen, checks, 2000);
  CHECK(r.best != perpetual);
  REQUIRE(line_of(r.info, perpetual));
  CHECK(line_of(r.info, perpetual)->mate < 0);
}

TEST_CASE("search: a declaration at the root wins at once", "[search]") {
  // 28 points for Black under the 27-point rule (the rules core's own test position).
  const std::string sfen = "+P+P+PS1S+P+P+P/1R2K2B1/9/9/9/9/9/9/4k4 b 10P 1";
  Position pos;
  pos.set_sfen(sfen);
  REQUIRE(pos.declaration_win(EnteringKingRule::POINT27));
  Fixture f;
  SearchResult r = f.search(sfen, {}, 1000);
  CHECK(r.kind == SearchResult::WIN);
  CHECK(r.info.nodes == 0);
  // Without the rule it is an ordinary position and the search plays a move.
  f.set([](SearchParams& p) { p.rules.entering_king_rule = EnteringKingRule::NONE; });
  r = f.search(sfen, {}, 200);
  CHECK(r.kind == SearchResult::MOVE);
  CHECK(pos.is_legal(r.best));
}

TEST_CASE("search: the node limit is exact and the tree is reused", "[search]") {
  Fixture f;
  f.set([](SearchParams& p) { p.multipv = 600; });
  SearchResult r = f.search(Position::STARTPOS_SFEN, {}, 500);
  CHECK(r.info.nodes == 500);
  CHECK(root_visits(r.info) == 500);  // every playout landed on a root move
  REQUIRE(r.best != MOVE_NONE);
  REQUIRE(r.ponder != MOVE_NONE);
  // Two plies on, the subtree under the expected reply is kept: it already holds playouts.
  r = f.search(Position::STARTPOS_SFEN, {r.best, r.ponder}, 100);
  CHECK(r.info.nodes == 100);
  CHECK(root_visits(r.info) > 100);
  CHECK(root_visits(r.info) < 600);
  // A position that does not follow from the tree starts afresh.
  r = f.search(Position::STARTPOS_SFEN, parse_moves(Position::STARTPOS_SFEN, {"2g2f"}), 100);
  CHECK(root_visits(r.info) == 100);
}

TEST_CASE("search: memory stays within the hash and released trees are freed", "[search]") {
  Fixture f;
  f.searcher.set_hash_size(256 << 10);
  SearchResult r = f.search(Position::STARTPOS_SFEN, {}, 1000000);
  CHECK(r.kind == SearchResult::MOVE);
  CHECK(r.info.nodes < 1000000);  // stopped by the full pool
  CHECK(f.searcher.pool().full());
  CHECK(f.searcher.pool().used() <= size_t(256) << 10);
  CHECK(r.info.hashfull >= 900);
  f.searcher.clear_tree();
  for (int i = 0; i < 500 && f.searcher.pool().used() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  CHECK(f.searcher.pool().used() == 0);
}

TEST_CASE("search: stop ends an infinite search promptly", "[search]") {
  Fixture f;
  REQUIRE(!f.searcher.set_position(Position::STARTPOS_SFEN, {}));
  SearchLimits limits;
  limits.infinite = true;
  std::atomic<bool> done{false};
  f.searcher.start(limits, nullptr, [&](const SearchResult&) { done = true; });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK_FALSE(done);
  auto t0 = std::chrono::steady_clock::now();
  f.searcher.stop();
  while (!done && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2)) std::this_thread::yield();
  CHECK(done);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(200));
  f.searcher.wait();
}

// fuzz_usi_engine found info() sorting the root's moves by counts the workers were still changing:
// the sort ran off its array (heap-buffer-overflow under ASan). Lines read again and again during a
// search must be distinct legal moves, every one of them when MultiPV asks for all.
TEST_CASE("search: lines read while the workers search are whole and distinct", "[search]") {
  Fixture f;
  f.set([](SearchParams& p) { p.multipv = 1000; });
  REQUIRE(!f.searcher.set_position(Position::STARTPOS_SFEN, {}));
  Position pos;
  REQUIRE(!pos.set_sfen(Position::STARTPOS_SFEN));
  const size_t legal = legal_moves(pos).size();
  SearchLimits limits;
  limits.infinite = true;
  f.searcher.start(limits, nullptr, nullptr);
  int reads = 0, full = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(300)) {
    const SearchInfo info = f.searcher.info();
    ++reads;
    if (info.lines.empty()) continue;
    std::set<uint32_t> seen;
    for (const RootLine& l : info.lines) {
      CHECK(pos.is_legal(l.move));
      seen.insert(uint32_t(l.move));
    }
    CHECK(seen.size() == info.lines.size());
    if (info.lines.size() == legal) ++full;
  }
  f.searcher.stop();
  f.searcher.wait();
  CAPTURE(reads);
  CHECK(full > 0);
}

namespace {
// Evaluator whose answers are a function of each position's own features, slow enough that
// requests pile up behind it: value = the number the first 8 planes' first elements spell in
// binary (the first byte of the packed planes, expanded by Evaluator::evaluate_packed), policy[0] =
// twice that.
class SlowEcho : public nn::Evaluator {
 public:
  void evaluate(const float* f, int n, float* policy, float* value) override {
    nn::check_batch_size(n, 8);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (int i = 0; i < n; ++i) {
      float id = 0;
      for (int k = 0; k < 8; ++k) id += f[size_t(i) * nn::INPUT_SIZE + k] * float(1 << k);
      value[i] = id;
      policy[size_t(i) * nn::POLICY_SIZE] = id * 2.0f;
    }
  }
  int max_batch() const override { return 8; }
  std::string name() const override { return "slow echo"; }
};
}  // namespace

TEST_CASE("evaluation queue: waiting batches are merged and answered in their own slots", "[search][queue][time]") {
  std::vector<std::unique_ptr<nn::Evaluator>> evals;
  evals.push_back(std::make_unique<SlowEcho>());
  EvalQueue queue(std::move(evals));
  // Client 0 sends a full batch first; clients 1..3 send 2 positions each while it runs: they fit
  // in one call together.
  std::vector<std::unique_ptr<EvalBatch>> batches;
  for (int c = 0; c < 4; ++c) {
    batches.push_back(std::make_unique<EvalBatch>(8));
    for (int i = 0; i < (c == 0 ? 8 : 2); ++i) batches[c]->add()[0] = uint8_t(c * 10 + i);
  }
  std::vector<std::thread> clients;
  clients.emplace_back([&] { queue.evaluate(*batches[0]); });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  for (int c = 1; c < 4; ++c) clients.emplace_back([&, c] { queue.evaluate(*batches[c]); });
  for (auto& t : clients) t.join();
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < batches[c]->size(); ++i) {
      CHECK(batches[c]->value(i) == float(c * 10 + i));
      CHECK(batches[c]->policy(i)[0] == float(2 * (c * 10 + i)));
    }
  CHECK(queue.stats().calls == 2);
  CHECK(queue.stats().positions == 14);
  // A batch of the wrong size is refused.
  EvalBatch empty(8);
  CHECK_THROWS_AS(queue.evaluate(empty), std::invalid_argument);
}

namespace {
// Evaluator that notes the thread calling it and how many calls run at once; value = the batch's
// first byte (expanded as SlowEcho's), or it throws when that byte is 255.
class ThreadNoting : public nn::Evaluator {
 public:
  ThreadNoting(std::atomic<int>& running, std::atomic<int>& most) : running_(running), most_(most) {}
  void evaluate(const float* f, int n, float* policy, float* value) override {
    const int now = ++running_;
    int seen = most_.load();
    while (now > seen && !most_.compare_exchange_weak(seen, now)) {}
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --running_;
    float id = 0;
    for (int k = 0; k < 8; ++k) id += f[k] * float(1 << k);
    if (id == 255) throw std::runtime_error("bad batch");
    for (int i = 0; i < n; ++i) value[i] = id, policy[size_t(i) * nn::POLICY_SIZE] = 0;
    std::lock_guard lock(mutex);
    callers.push_back(std::this_thread::get_id());
  }
  int max_batch() const override { return 8; }
  std::string name() const override { return "thread noting"; }
  std::mutex mutex;
  std::vector<std::thread::id> callers;

 private:
  std::atomic<int>&running_, &most_;
};
}  // namespace

TEST_CASE("evaluation queue: CALLER runs each batch on the client's thread, never two on one evaluator",
          "[search][queue]") {
  std::atomic<int> running{0}, most{0};
  std::vector<ThreadNoting*> noted;
  std::vector<std::unique_ptr<nn::Evaluator>> evals;
  for (int i = 0; i < 2; ++i) {
    auto e = std::make_unique<ThreadNoting>(running, most);
    noted.push_back(e.get());
    evals.push_back(std::move(e));
  }
  EvalQueue queue(std::move(evals), Dispatch::CALLER);
  // Three clients on two evaluators: the third waits for a free one.
  std::vector<std::thread::id> client_ids(3);
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 3; ++c)
    clients.emplace_back([&, c] {
      client_ids[c] = std::this_thread::get_id();
      for (int k = 0; k < 20; ++k) {
        EvalBatch b(8);
        for (int i = 0; i < 3; ++i) b.add()[0] = uint8_t(c * 20 + k);
        queue.evaluate(b);
        for (int i = 0; i < 3; ++i) wrong += b.value(i) != float(c * 20 + k);
      }
    });
  for (auto& t : clients) t.join();
  CHECK(wrong == 0);
  CHECK(most <= 2);
  CHECK(queue.stats().calls == 60);  // nothing merged
  CHECK(queue.stats().positions == 180);
  size_t calls = 0;
  for (ThreadNoting* e : noted) {
    calls += e->callers.size();
    for (std::thread::id id : e->callers)
      CHECK(std::find(client_ids.begin(), client_ids.end(), id) != client_ids.end());
  }
  CHECK(calls == 60);
  // An evaluator's exception reaches its client, and the evaluator serves the next batch.
  EvalBatch bad(8);
  bad.add()[0] = 255;
  CHECK_THROWS_AS(queue.evaluate(bad), std::runtime_error);
  for (int k = 0; k < 3; ++k) {
    EvalBatch b(8);
    b.add()[0] = 7;
    queue.evaluate(b);
    CHECK(b.value(0) == 7.0f);
  }
}

TEST_CASE("time: clocks too long to be real are capped, never overflow", "[search][time]") {
  // Found by fuzz_usi_engine: `go btime 5166693099849646060` overflowed remain * 3 / 10.
  TimeOptions o;
  GoClock c;
  c.time[BLACK] = 5166693099849646060;
  c.byoyomi[BLACK] = std::numeric_limits<int64_t>::max();
  c.inc[BLACK] = std::numeric_limits<int64_t>::max();
  const TimeBudget b = allocate_time(c, BLACK, 1, o);
  const int64_t cap = int64_t(1) << 40;
  CHECK(b.minimum == 2000);
  CHECK(b.optimum >= b.minimum);
  CHECK(b.maximum >= b.optimum);
  CHECK(b.maximum <= 3 * cap);  // time, increment and byoyomi, each capped at 2^40 ms
  c = GoClock{};
  c.movetime = std::numeric_limits<int64_t>::max();
  CHECK(allocate_time(c, BLACK, 1, o).maximum == cap - o.network_delay);
}

TEST_CASE("time: budgets worked out by hand", "[search][time]") {
  TimeOptions o;  // NetworkDelay 120, NetworkDelay2 1120, MinimumThinkingTime 2000, SlowMover 100
  GoClock c;
  // Byoyomi only: the whole byoyomi less a tenth of it (1000 < NetworkDelay2 1120).
  c.byoyomi[BLACK] = c.byoyomi[WHITE] = 10000;
  TimeBudget b = allocate_time(c, BLACK, 1, o);
  CHECK(b.maximum == 9000);
  CHECK(b.optimum == 9000);
  CHECK(b.minimum == 2000);
  // A long byoyomi keeps NetworkDelay2 in hand: 30000 - 1120.
  c.byoyomi[BLACK] = 30000;
  CHECK(allocate_time(c, BLACK, 1, o).maximum == 28880);
  // A short byoyomi is used to the end less NetworkDelay (a tenth, 100, is below it): 1000 - 120.
  c.byoyomi[BLACK] = 1000;
  b = allocate_time(c, BLACK, 1, o);
  CHECK(b.maximum == 880);
  CHECK(b.optimum == 880);
  CHECK(b.minimum == 880);
  // Main time left beside the byoyomi: 500 + 1000 less the same margin.
  c.time[BLACK] = 500;
  CHECK(allocate_time(c, BLACK, 1, o).maximum == 1380);
  c.time[BLACK] = 0;
  // Fischer 10 s + 1 s at move 1: 40 moves to go, share (10000 + 40 * 1000) / 40 = 1250, raised
  // to the minimum 2000; maximum min(5 * 1250, (10000 + 1000) / 4) = 2750.
  c = GoClock{};
  c.time[WHITE] = 10000;
  c.inc[WHITE] = 1000;
  b = allocate_time(c, WHITE, 1, o);
  CHECK(b.optimum == 2000);
  CHECK(b.maximum == 2750);
  // Fischer with no main time: the increment this move brings is the clock, less NetworkDelay2:
  // 2000 - 1120 = 880 (it was 0, an answer at depth 1).
  c = GoClock{};
  c.inc[BLACK] = c.inc[WHITE] = 2000;
  b = allocate_time(c, BLACK, 1, o);
  CHECK(b.minimum == 880);
  CHECK(b.optimum == 880);
  CHECK(b.maximum == 880);
  // Sudden death, 60 s left at move 100: 30 moves to go, share 2000, maximum min(10000, 15000).
  c = GoClock{};
  c.time[BLACK] = 60000;
  b = allocate_time(c, BLACK, 100, o);
  CHECK(b.optimum == 2000);
  CHECK(b.maximum == 10000);
  // SlowMover 200 doubles the share.
  o.slow_mover = 200;
  o.minimum_thinking_time = 0;
  b = allocate_time(c, BLACK, 100, o);
  CHECK(b.optimum == 4000);
  // movetime: exactly that, less NetworkDelay; no rounding.
  c.movetime = 3000;
  b = allocate_time(c, BLACK, 100, o);
  CHECK(b.minimum == 2880);
  CHECK(b.maximum == 2880);
  CHECK(stop_time(b, 1500) == 1500);
}

TEST_CASE("time: a stop is moved to the end of the charged second", "[search][time]") {
  TimeBudget b;
  b.network_delay = 120;
  b.round_to_seconds = true;
  b.maximum = 5000;
  CHECK(stop_time(b, 1500) == 1880);  // the GUI sees 1620 ms: charged 1 s until 1999
  CHECK(stop_time(b, 1880) == 1880);
  CHECK(stop_time(b, 1881) == 2880);
  CHECK(stop_time(b, 4500) == 4880);
  CHECK(stop_time(b, 4900) == 5000);  // never past the maximum
  CHECK(stop_time(b, 6000) == 5000);
}

TEST_CASE("score: win rate to centipawns", "[search]") {
  CHECK(winrate_to_cp(0.5f) == 0);
  CHECK(winrate_to_cp(float(1.0 / (1.0 + std::exp(-1.0)))) == 756);
  CHECK(winrate_to_cp(float(1.0 / (1.0 + std::exp(2.0)))) == -1512);
}

TEST_CASE("search: the root threat search turns away from moves that allow a mate", "[search]") {
  // 2026-11-28, a game lost to gpsshogi: jiriki (Black) played a move here at a score of +296 and was
  // mated in 5. Of Black's 175 moves, 145 allow White a mate within 5 plies (the fixed-depth
  // mate_in_ply, not the df-pn solver that the threat search uses, says which).
  const std::string sfen = "lns1g3+B/4k4/p1pppp1pp/9/7b1/2P6/P2PPPP1P/1Sg3S2/LN2KG1NL b RNL3Prgsp 57";
  Position pos;
  REQUIRE(!pos.set_sfen(sfen));
  auto allows_mate = [&](Move m, int plies) {
    pos.do_move(m);
    const bool mate = mate_in_ply(pos, plies);
    pos.undo_move();
    return mate;
  };
  int unsafe = 0;
  for (Move m : legal_moves(pos)) unsafe += allows_mate(m, 5);
  REQUIRE(legal_moves(pos).size() == 175);
  REQUIRE(unsafe == 145);

  Fixture f;
  f.set([](SearchParams& p) {
    p.root_mate_search = true;
    p.root_threat_search = true;
    p.leaf_mate_plies = 0;
    p.multipv = 200;
  });
  // 300 playouts and no leaf mate search: the tree alone proves none of these mates, and without
  // the threat search the move chosen allowed one in each of three tries here.
  int proven_lost = 0;
  for (int run = 0; run < 3; ++run) {
    SearchResult r = f.search(sfen, {}, 300);
    f.searcher.clear_tree();
    REQUIRE(r.kind == SearchResult::MOVE);
    INFO("run " << run << ": " << move_to_usi(r.best) << " after " << r.info.nodes << " playouts");
    CHECK_FALSE(allows_mate(r.best, 5));
    for (const RootLine& l : r.info.lines)
      if (l.mate < 0 && -l.mate - 1 <= 7) {  // longer mates cost mate_in_ply too much to check
        ++proven_lost;
        INFO(move_to_usi(l.move) << " is mated in " << -l.mate);
        CHECK(allows_mate(l.move, -l.mate - 1));  // the opponent's mate, independently
      }
  }
  CHECK(proven_lost >= 1);
}
