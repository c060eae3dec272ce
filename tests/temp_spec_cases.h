// The shared table of the temperature-spec grammar (tests/data/temp_specs.tsv): every consumer of
// focal::TempSpec::parse (runtime, CLI, app script, Python) walks the same cases.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace focal::test {

struct SpecCase {
  std::string spec;       // as typed
  std::string canonical;  // TempSpec::text() of the parsed and validated spec; empty when it must fail
  std::string error;      // a phrase the one error message contains; empty when it must parse
};

inline std::vector<SpecCase> temp_spec_cases(const std::string& source_dir) {
  const std::string path = source_dir + "/tests/data/temp_specs.tsv";
  std::ifstream f(path);
  std::vector<SpecCase> out;
  for (std::string line; std::getline(f, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, '\t');) cols.push_back(c);
    if (cols.size() == 2) {
      out.push_back({cols[0], cols[1], ""});
    } else if (cols.size() == 3 && cols[1] == "error") {
      out.push_back({cols[0], "", cols[2]});
    } else {
      ADD_FAILURE() << path << ": malformed line '" << line << "'";
    }
  }
  EXPECT_GE(out.size(), 30u) << "cannot read " << path;
  return out;
}

}  // namespace focal::test
