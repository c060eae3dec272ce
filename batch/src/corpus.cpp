// Streaming corpus reader (corpus.h).
#include "focal_batch/corpus.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "focal/error.h"
#include "focal/log.h"
#include "focal/tokenizer.h"

namespace focal::batch {

namespace {
bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}
bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }
}  // namespace

bool CorpusReader::utf8_or_skip(const std::string& text, const std::string& file, int64_t first_line) {
  Utf8Fault f;
  if (!find_non_utf8(text, &f)) return true;
  char b[8];
  std::snprintf(b, sizeof b, "0x%02x", (unsigned)(unsigned char)text[f.offset]);
  const std::string msg = "--data '" + file + "' line " + std::to_string(first_line + (int64_t)f.line - 1) +
                          " is not UTF-8 text: byte " + b + " at column " + std::to_string(f.column) +
                          " starts no UTF-8 character; convert the file (iconv -f latin1 -t utf-8, say)";
  if (on_error_ == OnError::kFail) throw Error(msg + " or use --on-error skip to skip such documents");
  if (!quiet_) log_warning(msg + "; its document is skipped (--on-error skip)");
  ++skipped_;
  return false;
}

CorpusReader::CorpusReader(const std::string& path, OnError on_error, bool quiet)
    : path_(path), on_error_(on_error), quiet_(quiet) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error("--data '" + path + "' does not exist: give a .jsonl file, a text file or a directory of .txt files");
  if (S_ISDIR(st.st_mode)) {
    kind_ = Kind::kDir;
    DIR* d = ::opendir(path.c_str());
    if (!d) throw Error("--data '" + path + "': cannot list the directory");
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (ends_with(n, ".txt")) files_.push_back(path + "/" + n);
    }
    ::closedir(d);
    std::sort(files_.begin(), files_.end());
  } else {
    kind_ = ends_with(path, ".jsonl") ? Kind::kJsonl : Kind::kText;
    files_.push_back(path);
  }
  if (!files_.empty()) {
    in_.open(files_[0], std::ios::binary);
    if (!in_) throw Error("--data '" + files_[0] + "': cannot open the file for reading");
  }
}

CorpusReader::~CorpusReader() = default;

bool CorpusReader::next_line(std::string& line) {
  if (file_i_ >= files_.size()) return false;
  if (std::getline(in_, line)) {
    ++line_no_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  }
  return false;
}

bool CorpusReader::parse_jsonl(const std::string& line, Document& doc) {
  std::string why;
  try {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (!j.is_object()) {
      why = "the line is not a JSON object";
    } else if (!j.contains("text") || !j["text"].is_string()) {
      why = "no string field \"text\"";
    } else {
      doc.text = j["text"].get<std::string>();
      doc.id = path_ + ":" + std::to_string(line_no_);
      if (j.contains("id")) doc.id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
      doc.relevant.clear();
      if (j.contains("relevant")) {
        if (!j["relevant"].is_array()) {
          why = "\"relevant\" is not an array of key positions";
        } else {
          for (const auto& v : j["relevant"]) {
            if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
              why = "\"relevant\" holds " + v.dump() + ", not a key position (an integer >= 0)";
              break;
            }
            doc.relevant.push_back((int32_t)v.get<int64_t>());
          }
        }
      }
    }
  } catch (const nlohmann::json::exception& e) { why = std::string("malformed JSON (") + e.what() + ")"; }
  if (why.empty()) return true;
  const std::string msg = "--data '" + path_ + "' line " + std::to_string(line_no_) + ": " + why;
  if (on_error_ == OnError::kFail) throw Error(msg + " (use --on-error skip to skip such lines)");
  if (!quiet_) log_warning(msg + "; skipped (--on-error skip)");
  ++skipped_;
  return false;
}

bool CorpusReader::next(Document& doc) {
  std::string line;
  for (;;) {
    if (file_i_ >= files_.size()) return false;
    if (kind_ == Kind::kJsonl) {
      if (!next_line(line)) {
        file_i_ = files_.size();
        return false;
      }
      if (blank(line)) continue;
      if (!parse_jsonl(line, doc) || blank(doc.text)) continue;  // an empty "text" is no document, as a blank block
    } else if (kind_ == Kind::kText) {
      // One document per blank-line-separated block; its lines joined by "\n".
      std::string text;
      int64_t first = 0;
      while (next_line(line)) {
        if (blank(line)) {
          if (!text.empty()) break;
          continue;
        }
        if (text.empty()) first = line_no_;
        text += text.empty() ? line : "\n" + line;
      }
      if (text.empty()) {
        file_i_ = files_.size();
        return false;
      }
      if (!utf8_or_skip(text, path_, first)) continue;
      doc.text = std::move(text);
      doc.id = path_ + ":" + std::to_string(first);
      doc.relevant.clear();
    } else {
      std::stringstream ss;
      ss << in_.rdbuf();
      doc.text = ss.str();
      doc.id = files_[file_i_].substr(files_[file_i_].find_last_of('/') + 1);
      doc.relevant.clear();
      in_.close();
      in_.clear();
      if (++file_i_ < files_.size()) {
        in_.open(files_[file_i_], std::ios::binary);
        if (!in_) throw Error("--data '" + files_[file_i_] + "': cannot open the file for reading");
      }
      if (blank(doc.text) || !utf8_or_skip(doc.text, files_[file_i_ - 1], 1)) continue;
    }
    doc.index = next_index_++;
    return true;
  }
}

Document read_document(const std::string& path, int64_t index) {
  CorpusReader r(path, OnError::kSkip);
  Document d;
  while (r.next(d))
    if (d.index == index) return d;
  throw Error("corpus '" + path + "' has no document " + std::to_string(index) +
              " (it has fewer documents than when the statistics were made)");
}

}  // namespace focal::batch
