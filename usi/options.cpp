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

std::string Option::help_line() const {
  std::string s = "  " + name;
  s += std::string(s.size() < 24 ? 24 - s.size() : 1, ' ');
  switch (type) {
    case CHECK: s += "check"; break;
    case SPIN: s += "spin " + std::to_string(min) + ".." + std::to_string(max); break;
    case COMBO:
      s += "combo";
      for (size_t i = 0; i < vars.size(); ++i) s += (i ? "|" : " ") + vars[i];
      break;
    case STRING: s += "string"; break;
    case FILENAME: s += "filename"; break;
  }
  return s + ", default " + (default_value.empty() ? "<empty>" : default_value) + ": " + help;
}

void Options::check(const std::string& name, bool& field, const std::string& help) {
  options_.push_back(
      Option{Option::CHECK, name, field ? "true" : "false", 0, 0, {}, help, [&field](const std::string& v) {
               field = v == "true";
             }});
}

void Options::string(const std::string& name, std::string& field, const std::string& help, bool filename) {
  options_.push_back(
      Option{filename ? Option::FILENAME : Option::STRING, name, field, 0, 0, {}, help, [&field](const std::string& v) {
               field = v == "<empty>" ? "" : v;
             }});
}

void Options::alias(const std::string& alias, const std::string& name) {
  if (!canonical(name) || *canonical(name) != name) throw std::logic_error("alias " + alias + " of no option " + name);
  aliases_.emplace_back(alias, name);
}

std::optional<std::string> Options::canonical(const std::string& name) const {
  for (const auto& o : options_)
    if (iequals(o.name, name)) return o.name;
  for (const auto& [alias, target] : aliases_)
    if (iequals(alias, name)) return target;
  return std::nullopt;
}

std::optional<std::string> Options::set(const std::string& name, const std::string& value) {
  const std::optional<std::string> c = canonical(name);
  if (!c) return "unknown option '" + name + "'";
  Option& o = *std::find_if(options_.begin(), options_.end(), [&](const Option& x) { return x.name == *c; });
  switch (o.type) {
    case Option::CHECK:
      if (value != "true" && value != "false") return "option " + o.name + " takes true or false, not '" + value + "'";
      break;
    case Option::SPIN: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || end != value.data() + value.size())
        return "option " + o.name + " takes an integer, not '" + value + "'";
      if (v < o.min || v > o.max)
        return "option " + o.name + " value " + value + " is out of range [" + std::to_string(o.min) + ", " +
               std::to_string(o.max) + "]";
      o.write(std::to_string(v));
      return std::nullopt;
    }
    case Option::COMBO:
      if (std::find(o.vars.begin(), o.vars.end(), value) == o.vars.end()) {
        std::string vars;
        for (const auto& v : o.vars) vars += (vars.empty() ? "" : ", ") + v;
        return "option " + o.name + " takes one of " + vars + ", not '" + value + "'";
      }
      break;
    case Option::STRING:
    case Option::FILENAME: break;
  }
  o.write(value);
  return std::nullopt;
}

}  // namespace jiriki::usi
