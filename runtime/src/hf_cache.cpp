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

bool is_link(const std::string& p) {
  struct stat st {};
  return lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Whether a local directory holds a model the loader could open: config.json, or a .gguf file given directly.
bool holds_model(const std::string& p) { return !is_dir(p) || exists(p + "/config.json"); }

// A snapshot as a model path: refused when a file links to a blob that is not there (huggingface_hub writes the
// blob, then the link; an interrupted or pruned download leaves the link alone); a snapshot of GGUF files and no
// config.json is its one .gguf file (*note says so), or an error listing them.
std::string checked_snapshot(const std::string& snap, const std::string& model, const std::string& repo,
                             std::string* note) {
  std::vector<std::string> names, missing, ggufs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(snap, ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  // Files the loader reads; a missing README.md or LICENSE does not make the model incomplete.
  auto read_by_loader = [](const std::string& n) {
    const std::string l = lower(n);
    return ends_with(l, ".safetensors") || ends_with(l, ".gguf") || ends_with(l, ".json") || ends_with(l, ".model") ||
           ends_with(l, ".txt") || ends_with(l, ".tiktoken");
  };
  for (const std::string& n : names) {
    const std::string p = snap + "/" + n;
    if (is_link(p) && !exists(p) && read_by_loader(n)) missing.push_back(n);
    if (ends_with(lower(n), ".gguf")) ggufs.push_back(p);
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
  };
  if (!missing.empty())
    throw Error("model '" + model + "': the Hugging Face cache's snapshot " + snap +
                " is an incomplete download: " + join(missing) + (missing.size() == 1 ? " links" : " link") +
                " to a blob that is missing. Fetch it again with huggingface-cli download " + repo);
  // An interrupted download: huggingface_hub writes blobs/SHA.incomplete and links a file only once it is whole, so
  // the snapshot lacks config.json or its weights (the loader said "config.json is missing").
  const bool whole = exists(snap + "/config.json") &&
                     (exists(snap + "/model.safetensors") || exists(snap + "/model.safetensors.index.json"));
  if (!whole && ggufs.empty()) {
    const std::string blobs = snap.substr(0, snap.rfind("/snapshots/")) + "/blobs";
    for (const auto& e : fs::directory_iterator(blobs, ec))
      if (ends_with(e.path().filename().string(), ".incomplete"))
        throw Error("model '" + model + "': the Hugging Face cache's snapshot " + snap +
                    " is an incomplete download (it lacks " +
                    (exists(snap + "/config.json") ? "its weights" : "config.json") + "; " + blobs +
                    " holds a partial blob, *.incomplete). Fetch it again with huggingface-cli download " + repo);
  }
  if (exists(snap + "/config.json") || ggufs.empty()) return snap;
  if (ggufs.size() == 1) {
    if (note)
      *note =
          "'" + model + "' in the Hugging Face cache holds a GGUF file and no config.json: " + ggufs[0] + " is opened";
    return ggufs[0];
  }
  throw Error("model '" + model + "' in the Hugging Face cache holds " + std::to_string(ggufs.size()) +
              " GGUF files and no config.json: give one of them as the model: " + join(ggufs));
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
  // A revision is a branch, tag or commit, or a pull request's ref ("refs/pr/1", as the cache stores it).
  return at == std::string::npos ||
         (at + 1 < s.size() && (s.find('/', at) == std::string::npos || s.compare(at + 1, 8, "refs/pr/") == 0));
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

std::string hf_cache_display_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t m = p.find("/models--"), s = p.find("/snapshots/");
  if (m == std::string::npos || s == std::string::npos || s < m) return "";
  std::string repo = p.substr(m + 9, s - m - 9);
  const size_t dash = repo.find("--");
  if (dash == std::string::npos) return "";
  repo.replace(dash, 2, "/");
  std::string file = p.substr(p.find_last_of('/') + 1);
  if (ends_with(lower(file), ".gguf")) return repo + "/" + file.substr(0, file.size() - 5);
  return repo;
}

std::string resolve_model_path(const std::string& model, std::string* note) {
  if (note) note->clear();
  const bool name = is_hf_model_name(model);
  const std::string hub = hf_hub_cache_dir();
  const std::string repo = model.substr(0, model.find('@'));
  const std::string revision = model.find('@') == std::string::npos ? "main" : model.substr(model.find('@') + 1);
  const std::string base = hub + "/" + repo_folder(repo);
  std::string snap;  // the name's snapshot, when the cache holds it
  if (name && is_dir(base)) {
    const std::string ref = base + (revision.rfind("refs/", 0) == 0 ? "/" : "/refs/") + revision;
    std::string commit = revision;
    if (exists(ref)) {
      commit = read_ref(ref);
    } else if (revision.size() >= 7 && revision.size() <= 40 &&
               revision.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos) {
      // A commit as printed elsewhere: upper case, or a unique prefix (git's 7 digits and more).
      commit = lower(revision);
      if (commit.size() < 40) {
        std::vector<std::string> hits;
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(base + "/snapshots", ec))
          if (e.path().filename().string().rfind(commit, 0) == 0) hits.push_back(e.path().filename().string());
        if (hits.size() > 1)
          throw Error("model '" + model + "': revision '" + revision + "' is the start of " +
                      std::to_string(hits.size()) + " cached commits (" + hits[0] + ", " + hits[1] +
                      "): give more of the commit");
        if (hits.size() == 1) commit = hits[0];
      }
    }
    if (!commit.empty() && is_dir(base + "/snapshots/" + commit)) snap = base + "/snapshots/" + commit;
  }
  if (exists(model)) {
    // A directory here of the same relative name that holds no model (a run's outputs, say) does not hide the
    // cached one; a model here wins, and says so.
    if (!snap.empty() && !holds_model(model)) {
      std::string path = checked_snapshot(snap, model, repo, nullptr);
      if (note)
        *note = "'" + model + "' is a directory here without a model (no config.json): the Hugging Face cache's " +
                "model is used (" + path + ")";
      return path;
    }
    if (name && note && is_dir(base))
      *note = "'" + model + "' is a path here and also a model in the Hugging Face cache (" + hub +
              "): the path is used (give ./" + model + " or the snapshot directory to be explicit)";
    return model;
  }
  if (!name) return model;
  if (is_dir(base)) {
    if (!snap.empty()) return checked_snapshot(snap, model, repo, note);
    std::vector<std::string> snaps;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(base + "/snapshots", ec)) snaps.push_back(e.path().filename().string());
    std::sort(snaps.begin(), snaps.end());
    std::string list;
    for (const std::string& s : snaps) list += (list.empty() ? "" : ", ") + s;
    const std::string ref = base + (revision.rfind("refs/", 0) == 0 ? "/" : "/refs/") + revision;
    if (exists(ref))  // the ref was written, its snapshot is gone (pruned, or the download stopped before it)
      throw Error("model '" + model + "': revision '" + revision + "' points at commit " + read_ref(ref) +
                  ", whose snapshot is not in the Hugging Face cache (" + base +
                  "/snapshots): fetch it again with huggingface-cli download " + repo +
                  (revision == "main" ? "" : " --revision " + revision));
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
