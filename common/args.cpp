#include "common/args.h"

#include <iostream>
#include <sstream>
#include <stdexcept>

namespace jiriki {

std::string number_text(double v) {
  std::ostringstream os;
  os << v;  // six significant digits, without trailing zeros: what a user would type
  return os.str();
}

int64_t parse_integer(const std::string& name, const std::string& text) {
  size_t pos = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &pos);
  } catch (...) {
    pos = 0;
  }
  if (text.empty() || pos != text.size())
    throw std::invalid_argument("--" + name + " expects an integer, got '" + text + "'");
  return v;
}

double parse_real(const std::string& name, const std::string& text) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    pos = 0;
  }
  if (text.empty() || pos != text.size())
    throw std::invalid_argument("--" + name + " expects a number, got '" + text + "'");
  return v;
}

Args& Args::add(const std::string& name, const std::string& def, const std::string& help, bool multi,
                std::function<void(const Values&)> store, bool is_flag) {
  opts_[name] = Opt{def, help, is_flag, multi, std::move(store), {}};
  order_.push_back(name);
  return *this;
}

Args& Args::bind(const std::string& name, std::string& field, const std::string& help) {
  return add(name, field, help, false, [&field](const Values& v) { field = v.back(); });
}

Args& Args::bind(const std::string& name, std::vector<std::string>& field, const std::string& help) {
  std::string shown;
  for (const std::string& s : field) shown.append(shown.empty() ? "" : " ").append(s);
  return add(name, shown, help, true, [&field](const Values& v) { field = v; });
}

Args& Args::flag(const std::string& name, bool& field, const std::string& help, bool value) {
  return add(
      name, "", help, false, [&field, value](const Values&) { field = value; }, true);
}

Args& Args::flag(const std::string& name, const std::string& help) { return add(name, "", help, false, nullptr, true); }

std::vector<std::string> Args::split_list(const std::string& name, const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty())
      throw std::invalid_argument("--" + name + " expects comma-separated integers, got '" + text + "'");
    out.push_back(item);
  }
  if (out.empty()) throw std::invalid_argument("--" + name + " expects comma-separated integers, got '" + text + "'");
  return out;
}

void Args::throw_out_of_range(const std::string& name, const std::string& text) {
  throw std::invalid_argument("--" + name + " is out of range: '" + text + "'");
}

void Args::throw_range(const std::string& name, const std::string& min, const std::string& max) {
  if (!min.empty() && !max.empty())
    throw std::invalid_argument("--" + name + " must be between " + min + " and " + max);
  if (!min.empty()) throw std::invalid_argument("--" + name + " must be at least " + min);
  throw std::invalid_argument("--" + name + " must be at most " + max);
}

std::string Args::help_text() const {
  std::ostringstream os;
  os << "usage: " << usage_ << "\n" << summary_ << "\n";
  if (!order_.empty()) os << "\noptions:\n";
  for (const auto& name : order_) {
    const Opt& o = opts_.at(name);
    std::string left = (name.size() == 1 ? "  -" : "  --") + name + (o.is_flag ? "" : " X");
    os << left;
    if (left.size() < 24) os << std::string(24 - left.size(), ' ');
    else os << "\n" << std::string(24, ' ');
    os << o.help;
    if (!o.is_flag && !o.def.empty()) os << " (default: " << o.def << ")";
    os << "\n";
  }
  os << "  --help                print this help\n";
  return os.str();
}

int Args::parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << help_text();
      return 0;
    }
    // "--name", "--name=value", or "-x" for a one-letter option name such as -o.
    bool short_opt = a.size() == 2 && a[0] == '-' && opts_.count(a.substr(1));
    if (short_opt || (a.size() > 2 && a.rfind("--", 0) == 0)) {
      std::string name = a.substr(short_opt ? 1 : 2), value;
      bool inline_value = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        inline_value = true;
      }
      auto it = opts_.find(name);
      if (it == opts_.end()) {
        std::cerr << "error: unknown option --" << name << "\n"
                  << "usage: " << usage_ << " (see --help)\n";
        return 2;
      }
      Opt& o = it->second;
      if (o.is_flag) {
        if (inline_value) {
          std::cerr << "error: --" << name << " takes no value\n";
          return 2;
        }
        o.values.push_back("1");
        continue;
      }
      if (!inline_value) {
        if (i + 1 >= argc) {
          std::cerr << "error: --" << name << " needs a value\n";
          return 2;
        }
        value = argv[++i];
      }
      if (!o.multi) o.values.clear();
      o.values.push_back(value);
      // A multi option swallows following non-option words too: "--data a.hcpe b.hcpe".
      while (o.multi && i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) o.values.push_back(argv[++i]);
      continue;
    }
    if (!positionals_allowed_) {
      std::cerr << "error: unexpected argument '" << a << "'\n"
                << "usage: " << usage_ << " (see --help)\n";
      return 2;
    }
    rest_.push_back(a);
  }
  // The fields are written once the whole line is read, in declaration order, so that --help
  // anywhere on the line wins over a bad value.
  for (const auto& name : order_) {
    const Opt& o = opts_.at(name);
    if (o.store && !o.values.empty()) o.store(o.values);
  }
  return -1;
}

bool Args::has(const std::string& name) const {
  auto it = opts_.find(name);
  return it != opts_.end() && !it->second.values.empty();
}

}  // namespace jiriki
