// A small command-line parser shared by every subcommand: declared options with defaults and
// help text, --help, and a clear error for unknown options or bad values.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace jiriki {

class Args {
 public:
  Args(std::string usage, std::string summary) : usage_(std::move(usage)), summary_(std::move(summary)) {}

  // An option taking a value ("--depth 5" or "--depth=5"). A value may repeat when `multi`.
  Args& option(const std::string& name, const std::string& def, const std::string& help, bool multi = false);
  // A boolean switch ("--divide").
  Args& flag(const std::string& name, const std::string& help);
  // Allows positional arguments, described in the usage line.
  Args& positionals(bool allowed = true) {
    positionals_allowed_ = allowed;
    return *this;
  }

  // Parses argv[first..]. Returns -1 to continue, or an exit code (0 after --help, 2 on error,
  // with the message already printed to stderr).
  int parse(int argc, char** argv, int first = 1);

  bool has(const std::string& name) const;  // given on the command line (or flag set)
  std::string str(const std::string& name) const;
  std::vector<std::string> all(const std::string& name) const;  // every value of a multi option
  int64_t integer(const std::string& name) const;               // throws std::invalid_argument with the option name
  double real(const std::string& name) const;
  // Comma-separated integers, e.g. "--batch 1,16,64".
  std::vector<int64_t> int_list(const std::string& name) const;
  const std::vector<std::string>& rest() const { return rest_; }
  std::string help_text() const;

 private:
  struct Opt {
    std::string def, help;
    bool is_flag = false, multi = false;
    std::vector<std::string> values;
  };
  std::string usage_, summary_;
  std::map<std::string, Opt> opts_;
  std::vector<std::string> order_;
  std::vector<std::string> rest_;
  bool positionals_allowed_ = false;
};

}  // namespace jiriki
