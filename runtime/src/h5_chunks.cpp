// Chunked, compressed datasets written chunk by chunk with H5Dwrite_chunk (h5_io.h: write_chunks_deflated).
//
// HDF5's filter pipeline compresses a dataset's chunks one after another on the calling thread: a capture with the
// rows of one 8B layer (1 GB of probabilities and scores) spent ~30 s in deflate. Here each chunk is gathered from
// the caller's array (edge chunks padded with zeros, as the library pads them), shuffled into byte planes and
// deflated exactly as the shuffle + deflate filters the dataset was created with (H5Z_FILTER_SHUFFLE: byte b of
// element i goes to b * n + i; H5Z_FILTER_DEFLATE: zlib's compress2 at the dataset's level), a batch of chunks in
// parallel, and the batch is then written in order. The file reads back through the ordinary filter pipeline.
#include <omp.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "h5_io.h"

namespace focal::h5 {

void write_chunks_deflated(hid_t ds, const std::string& path, const Where& where, const Dims& dims, const Dims& chunk,
                           size_t elem_bytes, const ChunkSource& source, int deflate_level) {
  const size_t rank = dims.size();
  if (rank == 0 || n_elements(dims) == 0) return;
  if (chunk.size() != rank || n_elements(chunk) == 0)
    where.fail("cannot write " + path + ": its chunk shape does not match its " + std::to_string(rank) + " axes");
  Dims n_chunks(rank);  // chunks along each axis
  size_t total = 1;
  for (size_t k = 0; k < rank; ++k) {
    n_chunks[k] = (dims[k] + chunk[k] - 1) / chunk[k];
    total *= size_t(n_chunks[k]);
  }
  const size_t chunk_elems = n_elements(chunk), chunk_bytes = chunk_elems * elem_bytes;
  const hsize_t inner = chunk[rank - 1];  // elements of one chunk row (the last axis)
  const size_t chunk_rows = chunk_elems / size_t(inner);
  std::vector<size_t> dim_stride(rank, 1);  // element strides of the dataset, row-major
  for (size_t k = rank - 1; k > 0; --k) dim_stride[k - 1] = dim_stride[k] * size_t(dims[k]);

  // A batch of chunks in flight: its shuffled bytes and its deflated bytes, ~2 chunk sizes a slot (allocated here:
  // nothing inside the parallel loop allocates or throws).
  const size_t slots = std::min<size_t>(total, size_t(std::min(16, 2 * omp_get_max_threads())));
  const uLong bound = compressBound(uLong(chunk_bytes));
  std::vector<std::vector<unsigned char>> shuffled(slots, std::vector<unsigned char>(chunk_bytes));
  std::vector<std::vector<unsigned char>> packed(slots, std::vector<unsigned char>(bound));
  std::vector<std::vector<unsigned char>> rows(slots, std::vector<unsigned char>(size_t(inner) * elem_bytes));
  std::vector<uLongf> packed_bytes(slots);
  std::vector<int> status(slots);
  std::vector<Dims> origin(slots, Dims(rank));

  for (size_t first = 0; first < total; first += slots) {
    const size_t batch = std::min(slots, total - first);
    for (size_t s = 0; s < batch; ++s) {  // chunk index -> origin, row-major over the chunk grid
      size_t c = first + s;
      for (size_t k = rank; k-- > 0;) {
        origin[s][k] = hsize_t(c % size_t(n_chunks[k])) * chunk[k];
        c /= size_t(n_chunks[k]);
      }
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t s = 0; s < batch; ++s) {
      const Dims& o = origin[s];
      unsigned char* plane = shuffled[s].data();
      std::memset(plane, 0, chunk_bytes);
      unsigned char* row = rows[s].data();  // one chunk row in the file's bytes
      const hsize_t count = std::min(inner, dims[rank - 1] - o[rank - 1]);
      for (size_t r = 0; r < chunk_rows; ++r) {
        size_t rem = r, src = size_t(o[rank - 1]);
        bool inside = true;
        for (size_t k = rank - 1; k-- > 0;) {  // r -> index within the chunk along the leading axes
          const hsize_t g = o[k] + hsize_t(rem % size_t(chunk[k]));
          rem /= size_t(chunk[k]);
          if (g >= dims[k]) inside = false;
          src += size_t(g) * dim_stride[k];
        }
        if (!inside) continue;  // padding of an edge chunk: zeros
        source(src, size_t(count), row);
        const size_t at = r * size_t(inner);  // element index of the row's start within the chunk
        for (size_t e = 0; e < size_t(count); ++e)
          for (size_t b = 0; b < elem_bytes; ++b) plane[b * chunk_elems + at + e] = row[e * elem_bytes + b];
      }
      packed_bytes[s] = bound;
      status[s] = compress2(packed[s].data(), &packed_bytes[s], plane, uLong(chunk_bytes), deflate_level);
    }
    for (size_t s = 0; s < batch; ++s) {
      if (status[s] != Z_OK)
        where.fail("cannot compress a chunk of " + path + " (zlib error " + std::to_string(status[s]) + ")");
      check_h5(H5Dwrite_chunk(ds, H5P_DEFAULT, 0, origin[s].data(), size_t(packed_bytes[s]), packed[s].data()), where,
               "cannot write " + path);
    }
  }
}

}  // namespace focal::h5
