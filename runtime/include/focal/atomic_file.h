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

}  // namespace focal
