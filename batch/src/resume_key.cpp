// The options key of a batch's checkpoint (docs/batch.md "--resume"): what a resumed run must share with the run
// that wrote the checkpoint (model weights, --data and its contents, every option that shapes the statistics), and
// the options that differ, named, when it does not.
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "batch_internal.h"
#include "focal/model.h"
#include "focal_batch/batch.h"
#include "focal_batch/corpus.h"

namespace focal::batch {

// --data as an absolute path (a stats file records it so that its documents reopen from any directory; a relative
// one worked only from the directory the batch ran in).
std::string absolute_data_path(const std::string& p) {
  std::error_code ec;
  if (p.empty() || p[0] == '/' || !std::filesystem::exists(p, ec)) return p;
  const std::filesystem::path abs = std::filesystem::absolute(p, ec);
  return ec ? p : abs.lexically_normal().string();
}

namespace {

// What --data holds, cheaply: FNV-1a 64 over the name, size and modification time of each file the corpus reader
// reads (a resumed batch over an edited corpus kept the old documents' statistics under the new file's name; files
// it does not read, such as the batch's own -o beside a directory's .txt files, do not count).
std::string data_stamp(const std::string& path) {
  uint64_t h = 1469598103934665603ULL;
  auto add = [&](const std::string& s) {
    for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ULL;
  };
  const CorpusReader reader(path, OnError::kSkip, /*quiet=*/true);  // named: a temporary's files() would dangle
  for (const std::string& f : reader.files()) {
    struct stat st {};
    add(f.substr(f.find_last_of('/') + 1) + "=");
    if (::stat(f.c_str(), &st) == 0)
      add(std::to_string((long long)st.st_size) + "@" + std::to_string((long long)st.st_mtim.tv_sec) + "." +
          std::to_string((long long)st.st_mtim.tv_nsec) + ";");
  }
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)h);
  return b;
}

// A key field's value as the option is spelled: --long cut / window, --on-error fail / skip, --limit all, --runs
// as its run names (a changed setting under the same names says so).
std::string option_value(const std::string& field, const std::string& v) {
  if (field == "window") return v == "1" ? "window" : v == "0" ? "cut" : v;
  if (field == "on_error") return v == "1" ? "skip" : v == "0" ? "fail" : v;
  if (field == "limit") return v == "0" ? "all" : v;
  if (field != "run") return v;
  std::string names;  // "name:{spec};name:{spec}" -> "name,name"
  size_t at = 0;
  while (at < v.size()) {
    const size_t colon = v.find(':', at);
    names += (names.empty() ? "" : ",") + v.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
    const size_t next = v.find(';', at);  // a spec's JSON holds no ';' (the key's separator)
    if (colon == std::string::npos || next == std::string::npos) break;
    at = next + 1;
  }
  return names;
}

}  // namespace

std::string options_key(const Model& model, const BatchOptions& o) {
  std::string k = "weights=" + std::to_string(model.weights_checksum()) + ";data=" + absolute_data_path(o.data_path) +
                  ";data_stamp=" + data_stamp(o.data_path) + ";max_tokens=" + std::to_string(o.max_tokens) +
                  ";window=" + std::to_string(o.window) + ";keep_rows=" + std::to_string(o.keep_rows) +
                  ";seed=" + std::to_string(o.seed) + ";bins=" + std::to_string(o.n_bins) +
                  ";topk=" + std::to_string(o.topk_mass_k) + ";limit=" + std::to_string(o.limit) +
                  ";on_error=" + std::to_string((int)o.on_error);
  for (const BatchRun& r : o.runs) k += ";run=" + r.name + ":" + r.spec.to_json();
  return k;
}

// What differs between a checkpoint's options key and this run's, named as the options that set it; fields are
// compared by name (the runs as one list), so a checkpoint of an older key names what it can.
std::string key_difference(const std::string& was, const std::string& now) {
  auto fields = [](const std::string& k) {
    std::map<std::string, std::string> out;
    size_t at = 0;
    while (at <= k.size()) {
      const size_t end = std::min(k.find(';', at), k.size());
      const std::string item = k.substr(at, end - at);
      const size_t eq = item.find('=');
      std::string& v = out[item.substr(0, eq)];
      v += (v.empty() ? "" : ";") + (eq == std::string::npos ? "" : item.substr(eq + 1));
      at = end + 1;
    }
    return out;
  };
  static const std::map<std::string, std::string> kNames = {{"weights", "the model (its weights)"},
                                                            {"data", "--data"},
                                                            {"data_stamp", "--data's contents"},
                                                            {"max_tokens", "--max-tokens"},
                                                            {"window", "--long"},
                                                            {"keep_rows", "--keep-rows"},
                                                            {"seed", "--seed"},
                                                            {"bins", "--bins"},
                                                            {"topk", "--topk-mass"},
                                                            {"limit", "--limit"},
                                                            {"on_error", "--on-error"},
                                                            {"run", "--runs"}};
  const auto a = fields(was), b = fields(now);
  std::vector<std::string> names;
  std::set<std::string> all;
  for (const auto& [f, v] : a) all.insert(f);
  for (const auto& [f, v] : b) all.insert(f);
  for (const std::string& f : all) {
    const auto ia = a.find(f), ib = b.find(f);
    if (ia != a.end() && ib != b.end() && ia->second == ib->second) continue;
    const auto it = kNames.find(f);
    std::string name = it == kNames.end() ? f : it->second;
    if (f != "weights" && f != "data_stamp" && ia != a.end() && ib != b.end()) {
      const std::string then = option_value(f, ia->second), now = option_value(f, ib->second);
      name += then == now ? " (" + then + ", with other settings)" : " (" + then + " then, " + now + " now)";
    }
    names.push_back(name);
  }
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "its options" : s;
}

}  // namespace focal::batch
