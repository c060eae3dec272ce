// Containment of the HDF5 library against damaged files (issue 36). libhdf5 1.10 trusts a file's internal
// addresses: a flipped byte in a global-heap entry or an object header can make it copy past a buffer (SIGSEGV in
// H5HG_read under H5T__conv_vlen) or loop forever. Before a file written elsewhere is opened in this process, a
// child process (fork) reads every object header, attribute, string and chunk index of it, with a time limit; a
// crash or a hang there becomes one Error naming the file, and the caller (CLI, app, Python kernel) lives on. The
// child sends back every variable-length string it read, and the readers take them from there (checked_strings)
// instead of sending libhdf5 through the file's global heap a second time.
//
// The result is cached per (path, device, inode, size, modification time), and files this process has just written
// (write_atomically) skip the check. FOCAL_H5_CHECK=0 turns the check off (to measure its cost);
// FOCAL_H5_CHECK_TIMEOUT_S sets the time limit (default 10 s).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace focal::h5 {

// Throws Error("<where> is damaged: the HDF5 library crashed reading it (signal 11, SIGSEGV) ...") when reading
// `path` in a child process crashes or does not finish in time. A read error inside the child is not a failure
// here: the caller's own reader reports it with its own message. `where` is the caller's error prefix, e.g.
// "capture file 'a.h5'". Call with the HDF5 lock held (H5Call), so no other thread is inside the library at fork.
void check_in_child(const std::string& path, const std::string& where);

// Every variable-length string value the check's child read, by key: "/@name" or "/runs/x@name" for an attribute,
// "/tokens/pieces" for a dataset. The readers take their strings from here rather than read them a second time:
// libhdf5 copies a damaged global-heap object past its buffer, and whether that faults depends on the heap around it,
// so a read that passed in the child can still crash the caller.
using CheckedStrings = std::map<std::string, std::vector<std::string>>;

// The strings the check read from `path` as it is on disk now; null when it was not checked in this process (a file
// this process wrote, the check off) or it changed since.
std::shared_ptr<const CheckedStrings> checked_strings(const std::string& path);

// Marks `path`, as it now is on disk, as checked (a file this process has just written and renamed into place).
void note_written(const std::string& path);

// How many checks this process has run in a child so far (a test sees the cache and the skip of own files).
long checks_run();

// Reads everything check_in_child reads, in this process: the child's work, exposed for the fuzzer and tests.
// Returns the number of objects visited (groups and datasets, the root included).
long walk_file(const std::string& path);

}  // namespace focal::h5
