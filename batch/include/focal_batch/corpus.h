// Documents of a corpus, read one at a time (memory does not grow with the corpus): a JSONL file (a "text" field,
// optional "id" and "relevant" key positions), a plain-text file (one document per blank-line-separated block) or a
// directory of .txt files (one document each, in name order).
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace focal::batch {

struct Document {
  int64_t index = 0;  // ordinal among the corpus's valid documents, 0-based: the same on every rank
  std::string id;     // "id" field, else "<file>:<line>" of its first line
  std::string text;
  std::vector<int32_t> relevant;  // key positions for the relevant_mass metric (JSONL "relevant"), may be empty
};

enum class OnError { kFail, kSkip };

class CorpusReader {
 public:
  // Throws Error naming the path when it does not exist or cannot be read. A directory lists its *.txt files.
  // quiet: skipped lines are counted but not logged (the batch's readers; its counting pass reports them once).
  CorpusReader(const std::string& path, OnError on_error, bool quiet = false);
  ~CorpusReader();
  // The next valid document, false at the end. A malformed JSONL line, or a text document that is not UTF-8, is an
  // Error naming the file and line under kFail; under kSkip it is reported through log_warning (same message) and
  // counted in skipped().
  bool next(Document& doc);
  uint64_t skipped() const { return skipped_; }
  const std::string& path() const { return path_; }
  const std::vector<std::string>& files() const { return files_; }  // the files it reads, in order

 private:
  bool next_line(std::string& line);  // from the current file; opens the next file of a directory at its end
  bool parse_jsonl(const std::string& line, Document& doc);
  // True when `text` (from `file`, starting at line `first_line`) is UTF-8; else refused or skipped as parse_jsonl's
  // malformed lines are.
  bool utf8_or_skip(const std::string& text, const std::string& file, int64_t first_line);

  enum class Kind { kJsonl, kText, kDir } kind_;
  std::string path_;
  OnError on_error_;
  std::vector<std::string> files_;  // kDir: the .txt files in name order
  size_t file_i_ = 0;
  std::ifstream in_;
  int64_t line_no_ = 0;
  int64_t next_index_ = 0;
  uint64_t skipped_ = 0;
  bool quiet_ = false;
};

// Reads document `index` of `path` again (the app opens a document of a stats file); throws Error when the corpus
// has fewer documents.
Document read_document(const std::string& path, int64_t index);

}  // namespace focal::batch
