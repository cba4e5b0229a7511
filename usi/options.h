// USI options: the table the engine announces after `usi` and changes with `setoption`. Every
// value is checked against the option's type and range; a bad one is refused with a message and
// the option keeps its value.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace jiriki::usi {

struct Option {
  enum Type { CHECK, SPIN, COMBO, STRING, FILENAME };
  Type type = STRING;
  std::string name;
  std::string default_value;
  std::string value;
  int64_t min = 0, max = 0;       // SPIN
  std::vector<std::string> vars;  // COMBO

  // The `option name ... type ...` line that `usi` prints.
  std::string usi_line() const;
  int64_t integer() const { return std::stoll(value); }
  bool check() const { return value == "true"; }
};

class Options {
 public:
  void add_check(const std::string& name, bool def);
  void add_spin(const std::string& name, int64_t def, int64_t min, int64_t max);
  void add_combo(const std::string& name, const std::string& def, std::vector<std::string> vars);
  void add_string(const std::string& name, const std::string& def, bool filename = false);
  // Another name for an option of the same meaning (as dlshogi or YaneuraOu call it); `setoption`
  // and engine_options.txt take it, `usi` does not announce it.
  void add_alias(const std::string& alias, const std::string& name);

  // Sets an option (names match without regard to case). Returns a message naming the problem
  // when the name is unknown or the value does not fit the type or range.
  std::optional<std::string> set(const std::string& name, const std::string& value);
  const Option& operator[](const std::string& name) const;  // by exact name; throws when absent
  int64_t integer(const std::string& name) const { return (*this)[name].integer(); }
  bool check(const std::string& name) const { return (*this)[name].check(); }
  const std::string& str(const std::string& name) const { return (*this)[name].value; }
  const std::vector<Option>& all() const { return options_; }  // in announcement order
  // The announced name of an option or alias (any case), or nullopt when there is none.
  std::optional<std::string> canonical(const std::string& name) const;
  const std::vector<std::pair<std::string, std::string>>& aliases() const { return aliases_; }  // alias, name

 private:
  Option* find(const std::string& name);
  std::vector<Option> options_;
  std::vector<std::pair<std::string, std::string>> aliases_;
};

}  // namespace jiriki::usi
