// One way to write a whole file that is not HDF5 (figures, JSON, checkpoints, safetensors): the bytes go to a
// temporary beside the target (PATH.tmp.PID, same directory so the rename stays on one file system) and are renamed
// into place. A reader never sees half a file, and a failed write removes the temporary and leaves any earlier file
// of that name as it was. HDF5 files have their own writer (h5_io's write_atomically), built on the same rule.
#pragma once

#include <string>
#include <string_view>

namespace focal {

struct AtomicWriteOptions {
  // What to do next when the disk is full, after "no space left on 'PATH' (the file system is full): ".
  const char* when_full =
      "nothing was written and any earlier file of that name is untouched; free some space, or "
      "write elsewhere, and run again";
  bool fsync = false;  // flush to the disk before the rename (checkpoints that a resume must find whole)
};

// Writes `bytes` to `path` as above. Throws focal::Error naming `path` and the reason (permission denied, directory
// 'D' does not exist, no space left, ...).
void write_file_atomically(const std::string& path, std::string_view bytes, const AtomicWriteOptions& opt = {});

// The file a write to `path` replaces: `path` itself, or, when it is a symbolic link, the file the link names
// (followed, so the link stays a link and its file gets the new bytes). Throws focal::Error when that is an existing
// directory, device (/dev/null), FIFO or socket, which the rename into place would replace with a plain file.
// Both atomic writers call it; the CLI's early output checks too, before any model runs.
std::string output_target(const std::string& path);

// For a reader: throws focal::Error ("WHAT 'PATH' is a FIFO, not a file: ...") when `path` exists and is not a
// regular file. A FIFO would block its open or read for ever (Ctrl-C included), a directory or device fail oddly.
// A path that does not exist passes: the open says so.
void require_regular_input(const std::string& path, const std::string& what);

// For a directory a command writes into (a checkpoint's --out, a gallery): throws focal::Error ("WHAT 'PATH' is a
// device, not a directory: ...") when `path` exists and is not a directory (a link to one passes). The swap that
// puts a new checkpoint in place would otherwise move a file or a device (/dev/null, as root) aside and delete it.
void require_directory_or_absent(const std::string& path, const std::string& what);

// For an input that may come through a pipe (--prompt-file /dev/stdin, a FIFO of <(...)): throws focal::Error
// ("WHAT 'PATH' is a directory, not a file: give a file") for a directory only, which a read would take as empty.
void require_not_directory(const std::string& path, const std::string& what);

// For a file a model directory may hold (tokenizer.model, tokenizer.json, ...): throws focal::Error when `path` is a
// symbolic link to nothing ("'m/tokenizer.model' is a symbolic link to '../tokenizer.model', which does not exist:
// ..."). `cp -r` of a bundled model keeps its relative link; the file then read as absent, without a word.
void require_link_target(const std::string& path);

// Whether a file inside a directory is one a command reads from it (a model's weights, configuration and tokenizer;
// a corpus's texts; training data), not an output written beside them (a capture or figure saved into the model
// directory, a batch's stats file among its .txt documents).
bool read_from_a_directory(const std::string& file);

// For a writer that knows the model its data came from (a capture's or sweep's model_path, the app's loaded model):
// throws focal::Error ("WHAT 'OUT' is the model file 'M/model.safetensors' ...") when `out` is an existing file of
// that model (the .gguf itself, or a file of its directory that read_from_a_directory names): the write would
// replace the model. A new file, or one the model does not read, passes.
void require_not_model_file(const std::string& out, const std::string& model_path, const std::string& what);

// What an existing path's type is for a message: "a directory", "a device", "a FIFO", "a socket"; nullptr for a
// regular file.
const char* not_a_file_kind(const std::string& path);

// The temporaries PATH.tmp.PID that a killed process (kill -9, a crash) left beside `path`: each whose PID names no
// running process is removed (a live one's is not touched: it may be writing). Long work calls it for its outputs
// when it starts or resumes, so that a kill leaves nothing behind once the work is done.
void remove_stale_temporaries(const std::string& path);

// Temporaries being written now (the atomic writers register theirs while they write), for a signal handler:
// remove_pending_temporaries unlinks each and is async-signal-safe (fixed slots, no allocation), so that an
// interrupted command (Ctrl-C, a kill) leaves no PATH.tmp.PID behind. A program that wants this installs its own
// handler (the `focal` CLI does); a library never installs one.
class PendingTemporary {
 public:
  explicit PendingTemporary(const std::string& path);
  ~PendingTemporary();
  PendingTemporary(const PendingTemporary&) = delete;
  PendingTemporary& operator=(const PendingTemporary&) = delete;

 private:
  int slot_ = -1;
};
void remove_pending_temporaries() noexcept;

}  // namespace focal
