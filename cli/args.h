// Minimal option parsing for the `focal` CLI: --name value / --name=value / flags, positional arguments, and the
// list and range syntaxes shared by several commands.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace focal::cli {

// A user mistake on the command line: printed with the usage hint, exit code 2.
struct UsageError {
  std::string msg;
};

class Args {
 public:
  // `flags` take no value; every other --option takes one.
  Args(int argc, char** argv, int first, const std::set<std::string>& flags, const std::set<std::string>& options);
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& def = "") const;
  double get_double(const std::string& name, double def) const;
  // An integer option; out of long long's range (or, for get_int32, of int's; for get_u64, below 0 or past 2^64 - 1)
  // is a UsageError naming it (-n 4294967298 wrapped to 2, --seed -1 became 2^64 - 1).
  long long get_int(const std::string& name, long long def) const;
  int get_int32(const std::string& name, int def) const;
  uint64_t get_u64(const std::string& name, uint64_t def) const;
  const std::vector<std::string>& positional() const { return positional_; }
  const std::map<std::string, std::string>& values() const { return values_; }  // --name -> value ("" for flags)

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// "0,2,5-7" -> {0,2,5,6,7}; "all" or "" -> {}.
std::vector<int> parse_index_list(const std::string& s, const std::string& option);
// "0.3:1.0:0.1" (inclusive) or "0.3,0.4,1" -> values.
std::vector<float> parse_float_range(const std::string& s, const std::string& option);
// "a,b,,c" -> {"a", "b", "c"} (empty items dropped).
std::vector<std::string> split_names(const std::string& s);
// --labels: comma-separated, \, a comma inside a label (\\ a backslash); an empty label is a UsageError.
std::vector<std::string> split_labels(const std::string& s);
// "512M", "2G", "1000000" -> bytes.
size_t parse_bytes(const std::string& s, const std::string& option);
double parse_double(const std::string& s, const std::string& option);

// The bundled default model (assets/models/focal-t0.4 of the source tree this binary was built from).
std::string default_model_dir();
// The MODEL positional argument of `command`, or the bundled default when none is given.
std::string model_arg(const Args& a, const char* command);

// --limit given: at least 1 document (0 ran the whole corpus); throws Error naming the option.
void check_limit_option(const Args& a);

}  // namespace focal::cli
