// Hugging Face names in the local hub cache (focal/hf_cache.h).
#include "focal/hf_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "focal/error.h"

namespace focal {

namespace fs = std::filesystem;

namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}

// models--ORG--NAME <-> ORG/NAME (huggingface_hub's repo folder name: '/' becomes "--").
std::string repo_folder(const std::string& name) {
  std::string out = "models--";
  for (char ch : name) out += ch == '/' ? std::string("--") : std::string(1, ch);
  return out;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = (char)std::tolower((unsigned char)ch);
  return s;
}

// Levenshtein distance of two short strings.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    prev.swap(cur);
  }
  return prev[b.size()];
}

std::string read_ref(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  while (!s.empty() && std::isspace((unsigned char)s.back())) s.pop_back();
  return s;
}

}  // namespace

std::string hf_hub_cache_dir() {
  if (const char* c = std::getenv("HF_HUB_CACHE"); c && *c) return c;
  if (const char* h = std::getenv("HF_HOME"); h && *h) return std::string(h) + "/hub";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/huggingface/hub";
}

bool is_hf_model_name(const std::string& s) {
  const std::string repo = s.substr(0, s.find('@'));
  const size_t slash = repo.find('/');
  if (repo.empty() || slash == std::string::npos || slash == 0 || slash + 1 == repo.size()) return false;
  if (repo.find('/', slash + 1) != std::string::npos || repo.find("..") != std::string::npos) return false;
  if (repo[0] == '.' || repo[0] == '~') return false;
  for (char ch : repo)
    if (!(std::isalnum((unsigned char)ch) || ch == '-' || ch == '_' || ch == '.' || ch == '/')) return false;
  const size_t at = s.find('@');
  return at == std::string::npos || (at + 1 < s.size() && s.find('/', at) == std::string::npos);
}

std::vector<std::string> hf_cached_models() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(hf_hub_cache_dir(), ec)) {
    const std::string folder = e.path().filename().string();
    if (folder.rfind("models--", 0) != 0 || !is_dir(e.path().string() + "/snapshots")) continue;
    std::string name = folder.substr(8);
    const size_t sep = name.find("--");
    if (sep == std::string::npos) continue;
    name.replace(sep, 2, "/");
    out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string resolve_model_path(const std::string& model, std::string* note) {
  if (note) note->clear();
  const bool name = is_hf_model_name(model);
  const std::string hub = hf_hub_cache_dir();
  const std::string repo = model.substr(0, model.find('@'));
  if (exists(model)) {
    if (name && note && is_dir(hub + "/" + repo_folder(repo)))
      *note = "'" + model + "' is a path here and also a model in the Hugging Face cache (" + hub +
              "): the path is used (give ./" + model + " or the snapshot directory to be explicit)";
    return model;
  }
  if (!name) return model;
  const std::string revision = model.find('@') == std::string::npos ? "main" : model.substr(model.find('@') + 1);
  const std::string base = hub + "/" + repo_folder(repo);
  if (is_dir(base)) {
    std::string commit = revision;
    if (exists(base + "/refs/" + revision)) commit = read_ref(base + "/refs/" + revision);
    std::string snap = base + "/snapshots/" + commit;
    if (!commit.empty() && is_dir(snap)) return snap;
    std::vector<std::string> snaps;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(base + "/snapshots", ec)) snaps.push_back(e.path().filename().string());
    std::sort(snaps.begin(), snaps.end());
    std::string list;
    for (const std::string& s : snaps) list += (list.empty() ? "" : ", ") + s;
    throw Error("model '" + model + "': revision '" + revision + "' is not in the Hugging Face cache (" + base +
                "; cached snapshots: " + (list.empty() ? "none" : list) +
                "). focalscope never downloads: fetch it with huggingface-cli download " + repo +
                (revision == "main" ? "" : " --revision " + revision) + " first");
  }
  // Not cached: the cached names closest to it (by edit distance of the lower-case names, or one containing the
  // other's NAME part).
  const std::string want = lower(repo), want_name = want.substr(want.find('/') + 1);
  std::vector<std::pair<size_t, std::string>> close;
  for (const std::string& c : hf_cached_models()) {
    const std::string lc = lower(c), lc_name = lc.substr(lc.find('/') + 1);
    const size_t d = edit_distance(want, lc);
    if (d <= std::max<size_t>(3, want.size() / 4) || lc_name.find(want_name) != std::string::npos ||
        want_name.find(lc_name) != std::string::npos)
      close.emplace_back(d, c);
  }
  std::sort(close.begin(), close.end());
  std::string list;
  for (size_t i = 0; i < close.size() && i < 5; ++i) list += (i ? ", " : "") + close[i].second;
  throw Error("model '" + model + "' is neither a path nor a model in the Hugging Face cache (" + hub + ")" +
              (list.empty() ? std::string() : "; cached models close to it: " + list) +
              ". focalscope never downloads: fetch it with huggingface-cli download " + repo +
              " first, or give the model's directory or .gguf file");
}

}  // namespace focal
