// A small command-line parser shared by every subcommand. Each option is declared once, bound to
// the field it fills: the field's value at declaration is the default --help shows, and parse()
// writes the value given, checked against the field's type and the option's range, into it. So a
// default lives in one place, the struct that owns the field. --help, and a clear error for
// unknown options or bad values.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace jiriki {

// A number as --help shows it and a user types it: "800", "0.25", "0.0001".
std::string number_text(double v);
template <typename T>
std::string number_text(T v) requires std::is_integral_v<T> {
  return std::to_string(v);
}
// The integer `text` as option `name` takes it; throws std::invalid_argument naming the option.
int64_t parse_integer(const std::string& name, const std::string& text);
// The number `text` as option `name` takes it; throws std::invalid_argument naming the option.
double parse_real(const std::string& name, const std::string& text);

// A field type that an option takes as a number.
template <typename T>
concept OptionNumber = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;

class Args {
 public:
  Args(std::string usage, std::string summary) : usage_(std::move(usage)), summary_(std::move(summary)) {}

  // An option filling a number field, checked to lie in [min, max] ("--playouts must be between
  // 1 and 1000000"); without a range, any value of the field's type.
  template <OptionNumber T>
  Args& bind(const std::string& name, T& field, const std::string& help,
             std::optional<std::type_identity_t<T>> min = std::nullopt,
             std::optional<std::type_identity_t<T>> max = std::nullopt) {
    return add(name, number_text(field), help, false,
               [&field, name, min, max](const Values& v) { field = checked_number<T>(name, v.back(), min, max); });
  }
  // An option with no default, filling `field` only when given (a config key it replaces, say).
  template <OptionNumber T>
  Args& bind(const std::string& name, std::optional<T>& field, const std::string& help) {
    return add(name, field ? number_text(*field) : "", help, false, [&field, name](const Values& v) {
      field = checked_number<T>(name, v.back(), std::nullopt, std::nullopt);
    });
  }
  // An option filling a string field.
  Args& bind(const std::string& name, std::string& field, const std::string& help);
  // A repeatable option filling a list ("--data a.hcpe b.hcpe --data c.hcpe").
  Args& bind(const std::string& name, std::vector<std::string>& field, const std::string& help);
  // An option filling a list of integers given comma-separated ("--gpus 0,1"), each in [min, max].
  template <OptionNumber T>
  Args& bind(const std::string& name, std::vector<T>& field, const std::string& help, T min, T max) {
    std::string shown;
    for (T x : field) shown.append(shown.empty() ? "" : ",").append(number_text(x));
    return add(name, shown, help, false,
               [&field, name, min, max](const Values& v) { field = integer_list<T>(name, v.back(), min, max); });
  }
  // An option of any other type (an enum): `parse` reads a value (throwing std::invalid_argument on
  // a bad one), `show` writes the default.
  template <typename T, typename Parse, typename Show>
  requires std::is_invocable_r_v<T, Parse, const std::string&> && std::is_invocable_v<Show, const T&> Args& bind(
      const std::string& name, T& field, const std::string& help, Parse parse, Show show) {
    return add(name, std::string(show(field)), help, false,
               [&field, parse](const Values& v) { field = parse(v.back()); });
  }
  // A switch ("--csa") that sets `field` to `value` when given.
  Args& flag(const std::string& name, bool& field, const std::string& help, bool value = true);
  // A switch that fills no field: has() tells whether it was given.
  Args& flag(const std::string& name, const std::string& help);
  // Allows positional arguments, described in the usage line.
  Args& positionals(bool allowed = true) {
    positionals_allowed_ = allowed;
    return *this;
  }

  // Parses argv[first..] and fills the bound fields. Returns -1 to continue, or an exit code (0
  // after --help, 2 on a malformed command line, with the message already printed to stderr).
  // Throws std::invalid_argument, naming the option, on a value its field does not take.
  int parse(int argc, char** argv, int first = 1);

  bool has(const std::string& name) const;  // given on the command line (or flag set)
  const std::vector<std::string>& rest() const { return rest_; }
  std::string help_text() const;

 private:
  using Values = std::vector<std::string>;
  struct Opt {
    std::string def, help;
    bool is_flag = false, multi = false;
    std::function<void(const Values&)> store;  // writes the values given into the bound field
    Values values;
  };
  Args& add(const std::string& name, const std::string& def, const std::string& help, bool multi,
            std::function<void(const Values&)> store, bool is_flag = false);

  template <OptionNumber T>
  static T checked_number(const std::string& name, const std::string& text, std::optional<T> min,
                          std::optional<T> max) {
    T v{};
    if constexpr (std::is_integral_v<T>) {
      const int64_t x = parse_integer(name, text);
      // An unsigned 64-bit field (a seed) takes any integer, as a bit pattern.
      if constexpr (!(std::is_unsigned_v<T> && sizeof(T) == 8))
        if (x < int64_t(std::numeric_limits<T>::lowest()) || x > int64_t(std::numeric_limits<T>::max()))
          throw_out_of_range(name, text);
      v = T(x);
    } else {
      v = T(parse_real(name, text));
    }
    if ((min && v < *min) || (max && v > *max))
      throw_range(name, min ? number_text(*min) : "", max ? number_text(*max) : "");
    return v;
  }
  template <OptionNumber T>
  static std::vector<T> integer_list(const std::string& name, const std::string& text, T min, T max) {
    std::vector<T> out;
    for (const std::string& item : split_list(name, text)) out.push_back(checked_number<T>(name, item, min, max));
    return out;
  }
  static std::vector<std::string> split_list(const std::string& name, const std::string& text);
  [[noreturn]] static void throw_out_of_range(const std::string& name, const std::string& text);
  // "--NAME must be between MIN and MAX" ("at least MIN", "at most MAX" when one is empty).
  [[noreturn]] static void throw_range(const std::string& name, const std::string& min, const std::string& max);

  std::string usage_, summary_;
  std::map<std::string, Opt> opts_;
  std::vector<std::string> order_;
  std::vector<std::string> rest_;
  bool positionals_allowed_ = false;
};

}  // namespace jiriki
