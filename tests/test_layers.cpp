// The layers run one way: reads every `#include "folder/..."` of the source tree, prints the
// folder-level graph and fails on a cycle, on an edge that goes up the declared order, or where
// the graph differs from the one docs/architecture.md writes, so that the document cannot drift.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
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

// The graph docs/architecture.md writes: the indented lines "folder -> folders ..." that follow
// the line naming "The folder-level include graph", up to the first other line. Empty when the
// document has no such block.
Graph documented_graph(const fs::path& doc) {
  static const std::regex edge_line(R"(^\s+([A-Za-z0-9_]+) ->((?: [A-Za-z0-9_]+)*)\s*$)");
  std::ifstream in(doc);
  Graph g;
  std::string line;
  bool after_title = false;
  std::smatch m;
  while (std::getline(in, line)) {
    if (!after_title) {
      after_title = line.find("The folder-level include graph") != std::string::npos;
      continue;
    }
    if (std::regex_match(line, m, edge_line)) {
      std::istringstream deps(m[2].str());
      auto& to = g[m[1].str()];
      for (std::string d; deps >> d;) to.insert(d);
    } else if (!g.empty()) {
      break;  // the block ended (lines before it, blank or not, are passed over)
    }
  }
  return g;
}

// "a b c" for a set of folders.
std::string words(const std::set<std::string>& s) {
  std::string text;
  for (const auto& w : s) text += (text.empty() ? "" : " ") + w;
  return text;
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

TEST_CASE("layers: docs/architecture.md writes the include graph the code has", "[layers]") {
  const fs::path doc = fs::path(JIRIKI_SOURCE_DIR) / "docs" / "architecture.md";
  const Graph documented = documented_graph(doc);
  INFO(doc.string() << " must hold the graph as test_layers prints it, after \"The folder-level include graph\"");
  REQUIRE_FALSE(documented.empty());
  const Graph actual = include_graph(JIRIKI_SOURCE_DIR);
  std::set<std::string> folders;
  for (const auto* g : {&documented, &actual})
    for (const auto& [folder, _] : *g) folders.insert(folder);
  for (const auto& folder : folders) {
    const auto doc_it = documented.find(folder), code_it = actual.find(folder);
    const std::set<std::string> doc_deps = doc_it == documented.end() ? std::set<std::string>{} : doc_it->second;
    const std::set<std::string> code_deps = code_it == actual.end() ? std::set<std::string>{} : code_it->second;
    std::set<std::string> undocumented, gone;
    for (const auto& d : code_deps)
      if (!doc_deps.count(d)) undocumented.insert(d);
    for (const auto& d : doc_deps)
      if (!code_deps.count(d)) gone.insert(d);
    INFO("docs/architecture.md: \"" << folder << " -> " << words(doc_deps) << "\"; the includes: \"" << folder << " -> "
                                    << words(code_deps) << "\"");
    INFO("included but not in the doc: " << (undocumented.empty() ? "-" : words(undocumented))
                                         << "; in the doc but not included: " << (gone.empty() ? "-" : words(gone)));
    CHECK(doc_it != documented.end());  // a folder of code the doc does not list
    CHECK(code_it != actual.end());     // a folder the doc lists that has no code
    CHECK(undocumented.empty());
    CHECK(gone.empty());
  }
}

TEST_CASE("layers: the documented graph is read line by line, and a drifted one is seen", "[layers]") {
  const std::string text =
      "intro\nThe folder-level include graph, as the test prints it:\n\n    a ->\n    b -> a\n    c -> a b\n\nmore\n"
      "    d -> a\n";
  const fs::path path = fs::temp_directory_path() / "jiriki_test_layers_doc.md";
  {
    std::ofstream out(path);
    out << text;
  }
  const Graph g = documented_graph(path);
  fs::remove(path);
  CHECK(g == Graph{{"a", {}}, {"b", {"a"}}, {"c", {"a", "b"}}});  // d is past the block
}
