// USI options: the table the engine announces after `usi` and changes with `setoption`. Each option
// is declared once, bound to the field it fills, with its scale (C_init counts hundredths of
// SearchParams::c_init): its default is the field's value at declaration, and a value set is
// written into the field. Every value is checked against the option's type and range; a bad one is
// refused with a message and the field keeps its value.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace jiriki::usi {

struct Option {
  enum Type { CHECK, SPIN, COMBO, STRING, FILENAME };
  Type type = STRING;
  std::string name;
  std::string default_value;
  int64_t min = 0, max = 0;                       // SPIN
  std::vector<std::string> vars;                  // COMBO
  std::string help;                               // what it does, for `jiriki usi --help`
  std::function<void(const std::string&)> write;  // stores a checked value into the field

  // The `option name ... type ...` line that `usi` prints.
  std::string usi_line() const;
  // "Name  type, default: help", the line `jiriki usi --help` prints.
  std::string help_line() const;
};

class Options {
 public:
  // A spin option filling a number field that holds value / scale (scale 100: the option counts
  // hundredths of the field).
  template <typename T>
  requires std::is_arithmetic_v<T>
  void spin(const std::string& name, T& field, int64_t min, int64_t max, const std::string& help, int64_t scale = 1) {
    Option o{Option::SPIN, name, "", min, max, {}, help, nullptr};
    const int64_t def = std::is_integral_v<T> && scale == 1 ? int64_t(field) : std::llround(double(field) * scale);
    if (def < min || def > max) throw std::logic_error("option " + name + ": default out of range");
    o.default_value = std::to_string(def);
    o.write = [&field, scale](const std::string& v) {
      if constexpr (std::is_floating_point_v<T>) field = T(std::stoll(v)) / T(scale);
      else field = T(std::stoll(v) / scale);
    };
    options_.push_back(std::move(o));
  }
  // A check option filling a bool.
  void check(const std::string& name, bool& field, const std::string& help);
  // A string option (a file name with `filename`) filling a string; "<empty>" sets it empty.
  void string(const std::string& name, std::string& field, const std::string& help, bool filename = false);
  // A combo option: each var names the value it puts into the field.
  template <typename T>
  void combo(const std::string& name, T& field, const std::vector<std::pair<std::string, T>>& vars,
             const std::string& help) {
    Option o{Option::COMBO, name, "", 0, 0, {}, help, nullptr};
    for (const auto& [var, value] : vars) {
      o.vars.push_back(var);
      if (value == field) o.default_value = var;
    }
    if (o.default_value.empty()) throw std::logic_error("option " + name + ": default is none of its vars");
    o.write = [&field, vars](const std::string& v) {
      for (const auto& [var, value] : vars)
        if (var == v) field = value;
    };
    options_.push_back(std::move(o));
  }
  // Another name for an option of the same meaning (as dlshogi or YaneuraOu call it); `setoption`
  // and engine_options.txt take it, `usi` does not announce it.
  void alias(const std::string& alias, const std::string& name);

  // Sets an option (names match without regard to case). Returns a message naming the problem
  // when the name is unknown or the value does not fit the type or range.
  std::optional<std::string> set(const std::string& name, const std::string& value);
  const std::vector<Option>& all() const { return options_; }  // in announcement order
  // The announced name of an option or alias (any case), or nullopt when there is none.
  std::optional<std::string> canonical(const std::string& name) const;
  const std::vector<std::pair<std::string, std::string>>& aliases() const { return aliases_; }  // alias, name

 private:
  std::vector<Option> options_;
  std::vector<std::pair<std::string, std::string>> aliases_;
};

}  // namespace jiriki::usi
