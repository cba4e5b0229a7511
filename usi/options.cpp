// USI option table with validation.
#include "usi/options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>

namespace jiriki::usi {

namespace {
bool iequals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower((unsigned char)x) == std::tolower((unsigned char)y);
         });
}
}  // namespace

std::string Option::usi_line() const {
  std::string s = "option name " + name + " type ";
  switch (type) {
    case CHECK: return s + "check default " + default_value;
    case SPIN:
      return s + "spin default " + default_value + " min " + std::to_string(min) + " max " + std::to_string(max);
    case COMBO:
      s += "combo default " + default_value;
      for (const auto& v : vars) s += " var " + v;
      return s;
    case STRING: return s + "string default " + (default_value.empty() ? "<empty>" : default_value);
    case FILENAME: return s + "filename default " + (default_value.empty() ? "<empty>" : default_value);
  }
  return s;
}

void Options::add_check(const std::string& name, bool def) {
  Option o;
  o.type = Option::CHECK;
  o.name = name;
  o.default_value = o.value = def ? "true" : "false";
  options_.push_back(o);
}

void Options::add_spin(const std::string& name, int64_t def, int64_t min, int64_t max) {
  Option o;
  o.type = Option::SPIN;
  o.name = name;
  o.default_value = o.value = std::to_string(def);
  o.min = min;
  o.max = max;
  options_.push_back(o);
}

void Options::add_combo(const std::string& name, const std::string& def, std::vector<std::string> vars) {
  Option o;
  o.type = Option::COMBO;
  o.name = name;
  o.default_value = o.value = def;
  o.vars = std::move(vars);
  options_.push_back(o);
}

void Options::add_string(const std::string& name, const std::string& def, bool filename) {
  Option o;
  o.type = filename ? Option::FILENAME : Option::STRING;
  o.name = name;
  o.default_value = o.value = def;
  options_.push_back(o);
}

void Options::add_alias(const std::string& alias, const std::string& name) {
  (void)(*this)[name];  // throws when the option is absent: an alias must name one
  aliases_.emplace_back(alias, name);
}

std::optional<std::string> Options::canonical(const std::string& name) const {
  for (const auto& o : options_)
    if (iequals(o.name, name)) return o.name;
  for (const auto& [alias, target] : aliases_)
    if (iequals(alias, name)) return target;
  return std::nullopt;
}

Option* Options::find(const std::string& name) {
  const std::optional<std::string> c = canonical(name);
  if (!c) return nullptr;
  for (auto& o : options_)
    if (o.name == *c) return &o;
  return nullptr;
}

const Option& Options::operator[](const std::string& name) const {
  for (const auto& o : options_)
    if (o.name == name) return o;
  throw std::out_of_range("no option " + name);
}

std::optional<std::string> Options::set(const std::string& name, const std::string& value) {
  Option* o = find(name);
  if (!o) return "unknown option '" + name + "'";
  switch (o->type) {
    case Option::CHECK:
      if (value != "true" && value != "false") return "option " + o->name + " takes true or false, not '" + value + "'";
      break;
    case Option::SPIN: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || end != value.data() + value.size())
        return "option " + o->name + " takes an integer, not '" + value + "'";
      if (v < o->min || v > o->max)
        return "option " + o->name + " value " + value + " is out of range [" + std::to_string(o->min) + ", " +
               std::to_string(o->max) + "]";
      o->value = std::to_string(v);
      return std::nullopt;
    }
    case Option::COMBO:
      if (std::find(o->vars.begin(), o->vars.end(), value) == o->vars.end()) {
        std::string vars;
        for (const auto& v : o->vars) vars += (vars.empty() ? "" : ", ") + v;
        return "option " + o->name + " takes one of " + vars + ", not '" + value + "'";
      }
      break;
    case Option::STRING:
    case Option::FILENAME: break;
  }
  o->value = (o->type == Option::STRING || o->type == Option::FILENAME) && value == "<empty>" ? "" : value;
  return std::nullopt;
}

}  // namespace jiriki::usi
