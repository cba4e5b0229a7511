#include "common/args.h"

#include <iostream>
#include <sstream>
#include <stdexcept>

namespace jiriki {

Args& Args::option(const std::string& name, const std::string& def, const std::string& help, bool multi) {
  opts_[name] = Opt{def, help, false, multi, {}};
  order_.push_back(name);
  return *this;
}

Args& Args::flag(const std::string& name, const std::string& help) {
  opts_[name] = Opt{"", help, true, false, {}};
  order_.push_back(name);
  return *this;
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
  return -1;
}

bool Args::has(const std::string& name) const {
  auto it = opts_.find(name);
  return it != opts_.end() && !it->second.values.empty();
}

std::string Args::str(const std::string& name) const {
  const Opt& o = opts_.at(name);
  return o.values.empty() ? o.def : o.values.back();
}

std::vector<std::string> Args::all(const std::string& name) const {
  const Opt& o = opts_.at(name);
  if (o.values.empty() && !o.def.empty()) return {o.def};
  return o.values;
}

int64_t Args::integer(const std::string& name) const {
  std::string s = str(name);
  size_t pos = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &pos);
  } catch (...) {
    pos = 0;
  }
  if (s.empty() || pos != s.size()) throw std::invalid_argument("--" + name + " expects an integer, got '" + s + "'");
  return v;
}

double Args::real(const std::string& name) const {
  std::string s = str(name);
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (...) {
    pos = 0;
  }
  if (s.empty() || pos != s.size()) throw std::invalid_argument("--" + name + " expects a number, got '" + s + "'");
  return v;
}

std::vector<int64_t> Args::int_list(const std::string& name) const {
  std::vector<int64_t> out;
  std::string s = str(name);
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t pos = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &pos);
    } catch (...) {
      pos = 0;
    }
    if (item.empty() || pos != item.size())
      throw std::invalid_argument("--" + name + " expects comma-separated integers, got '" + s + "'");
    out.push_back(v);
  }
  return out;
}

}  // namespace jiriki
