// The loop's settings: a JSON object of documented keys with defaults that run on a CPU-only
// machine. One table (config.cpp) holds every key, its default and its help text; `jiriki loop
// --config-help` prints it and the README copies it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loop/window.h"

namespace jiriki::loop {

struct ConfigKey {
  const char* name;
  nlohmann::json def;  // also fixes the key's type: number, string or boolean
  const char* help;
};
const std::vector<ConfigKey>& config_keys();

class Config {
 public:
  Config();  // every default
  // Overlays `j` on the defaults. Throws std::invalid_argument naming the key on an unknown key or
  // a value of the wrong type or range.
  explicit Config(const nlohmann::json& j);
  static Config load(const std::string& path);  // a JSON file; throws with the path on error

  int64_t integer(const std::string& key) const;
  double real(const std::string& key) const;
  std::string str(const std::string& key) const;
  bool flag(const std::string& key) const;
  void set(const std::string& key, const nlohmann::json& value);  // checked as the constructor does
  const nlohmann::json& values() const { return values_; }

  WindowConfig window() const;
  std::string backend() const;         // "auto" resolved: cuda when this jiriki has CUDA, else cpu (training's)
  std::string search_backend() const;  // the network backend of self-play and the engine
  // gpus with "all" made the list of this machine's CUDA devices ("0" without any), so that one config
  // serves a run that moves between machines of different sizes.
  std::string gpus() const;

 private:
  void check() const;
  nlohmann::json values_;
};

// The help table: one line per key with its default.
std::string config_help();

}  // namespace jiriki::loop
