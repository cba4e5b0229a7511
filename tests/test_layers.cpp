// The layers run one way: reads every `#include "folder/..."` of the source tree, prints the
// folder-level graph and fails on a cycle or on an edge that goes up the declared order.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

using Graph = std::map<std::string, std::set<std::string>>;

// Top-level folder -> the top-level folders its files include (itself left out).
Graph include_graph(const fs::path& root) {
  static const std::regex include_line(R"(^\s*#\s*include\s*"([A-Za-z0-9_]+)/)");
  Graph g;
  for (const auto& top : fs::directory_iterator(root)) {
    const std::string folder = top.path().filename().string();
    if (!top.is_directory() || folder.empty() || folder[0] == '.' || folder.rfind("build", 0) == 0) continue;
    for (const auto& entry : fs::recursive_directory_iterator(top.path())) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh")) continue;
      std::ifstream in(entry.path());
      std::string line;
      std::smatch m;
      g[folder];
      while (std::getline(in, line))
        if (std::regex_search(line, m, include_line) && fs::is_directory(root / m[1].str()) && m[1].str() != folder)
          g[folder].insert(m[1].str());
    }
  }
  return g;
}

// A cycle through `node` as a path, or empty. Colours: 0 unseen, 1 on the stack, 2 done.
bool find_cycle(const Graph& g, const std::string& node, std::map<std::string, int>& colour,
                std::vector<std::string>& path) {
  colour[node] = 1;
  path.push_back(node);
  auto it = g.find(node);
  if (it != g.end())
    for (const auto& next : it->second) {
      if (colour[next] == 1) {
        path.push_back(next);
        return true;
      }
      if (colour[next] == 0 && find_cycle(g, next, colour, path)) return true;
    }
  path.pop_back();
  colour[node] = 2;
  return false;
}

std::vector<std::string> cycle_of(const Graph& g) {
  std::map<std::string, int> colour;
  std::vector<std::string> path;
  for (const auto& [node, _] : g)
    if (colour[node] == 0 && find_cycle(g, node, colour, path)) return path;
  return {};
}

}  // namespace

TEST_CASE("layers: the cycle finder sees a cycle and a clean chain", "[layers]") {
  Graph chain{{"a", {}}, {"b", {"a"}}, {"c", {"a", "b"}}};
  CHECK(cycle_of(chain).empty());
  Graph loop{{"a", {"c"}}, {"b", {"a"}}, {"c", {"b"}}};
  CHECK(cycle_of(loop).size() == 4);
}

TEST_CASE("layers: folders include only folders below them", "[layers]") {
  const Graph g = include_graph(JIRIKI_SOURCE_DIR);
  std::cout << "folder include graph (folder -> folders it includes):\n";
  for (const auto& [folder, deps] : g) {
    std::cout << "  " << folder << " ->";
    for (const auto& d : deps) std::cout << ' ' << d;
    std::cout << '\n';
  }
  const auto cycle = cycle_of(g);
  std::string text;
  for (const auto& f : cycle) text += f + " ";
  INFO("include cycle: " << text);
  CHECK(cycle.empty());

  // The declared order (docs/architecture.md): a folder may include only those of a lower rank.
  const std::map<std::string, int> rank{{"common", 0},  {"shogi", 1}, {"book", 2},     {"nn", 2},    {"training", 3},
                                        {"engine", 3},  {"usi", 4},   {"selfplay", 4}, {"match", 4}, {"loop", 5},
                                        {"command", 6}, {"tests", 7}, {"fuzz", 8}};
  for (const auto& [folder, deps] : g) {
    auto own = rank.find(folder);
    if (own == rank.end()) continue;  // folders without code (docs, scripts, bench)
    for (const auto& d : deps) {
      auto dep = rank.find(d);
      INFO(folder << " includes " << d);
      REQUIRE(dep != rank.end());
      CHECK(dep->second < own->second);
    }
  }
  CHECK(g.count("shogi"));
  CHECK(g.count("engine"));
}
