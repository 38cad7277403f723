// The on-disk form of a snapshot (`conveyor save`, `load(path)`): a dataset's output written once
// as chunk files, read many times.
//
//   DIR/snapshot.metadata   what was saved: format version, dataset fingerprint and text form,
//                           element spec, compression (written first; never rewritten)
//   DIR/chunks/chunk-S-I-N  committed chunk I of stream S holding N elements (S, I: 8 and 10
//                           digits, so names sort in read order)
//   DIR/chunks/.tmp-TAG-N   a chunk being written: never read; TAG names its writer
//                           (pipeline/io/temp_files.hpp), and a process's first write into a
//                           directory removes the dead writers' ones (a crashed process's)
//   DIR/checkpoints/stream-S-I  the state of stream S's pipeline right after chunk I (streams of
//                           a pipeline that is not per-split): written, synced and renamed into
//                           place before chunk I commits, so a committed chunk always has one
//   DIR/DONE                the save finished: every chunk is committed ("chunks C elements E")
//   DIR/ERROR               the save failed: the cause, as the error that stopped it
//
// A chunk file: 32-byte header (magic "CVCHUNK1", format version, element count, body length,
// masked CRC32C of the body, masked CRC32C of the 28 bytes before) + body, one element batch
// buffer of the element codec (pipeline/tensor/codec.hpp; lz4 or not as the snapshot says). A
// chunk is written to a temporary name, synced and renamed into place (then the directory is
// synced), so a crash never leaves a file under a committed name that is not whole; a reader
// checks the length and both checksums before it decodes anything and names the chunk when one
// does not match.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/runtime/status.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/tensor/element.hpp"

namespace conveyor::snapshot {

inline constexpr uint32_t kFormatVersion = 1;

struct Metadata {
  std::string fingerprint;  // Dataset fingerprint of what was saved
  std::string definition;   // its text form
  std::string element_spec; // format_spec_components() of its element spec ("" = unknown)
  Compression compression = Compression::lz4; // lz4 or none
  int64_t created_unix_s = 0;
};

// "int64:[];float32:[3,-1];string:?" (one entry per component: dtype, then the shape with -1 for
// an unknown dimension, or ? for an unknown rank), and back. Empty = unknown spec. A nested
// element appends its structure after `|`: "int64:[];string:[]|{\"id\": _, \"label\": _}".
std::string format_spec_components(const ElementSpec& spec);
Expected<ElementSpec> parse_spec_components(const std::string& text);

// Creates DIR (and DIR/chunks) and writes DIR/snapshot.metadata. A DIR that already holds a
// snapshot is refused (already_exists naming it): a snapshot is written once.
Status create(const std::string& dir, const Metadata& metadata);
// not_found "no snapshot at DIR (no snapshot.metadata)"; data_loss for a damaged file.
Expected<Metadata> read_metadata(const std::string& dir);

struct ChunkRef {
  int64_t stream = 0;
  int64_t index = 0;
  int64_t elements = 0;
  std::string path;
};
std::string chunk_path(const std::string& dir, int64_t stream, int64_t index, int64_t elements);
// The committed chunks in read order (stream, then index). Temporary files are skipped; a file
// in DIR/chunks with any other name is data_loss (someone else writes there).
Expected<std::vector<ChunkRef>> committed_chunks(const std::string& dir);

// The chunk a committed chunk path names (a split of a sharded load); data_loss otherwise.
Expected<ChunkRef> chunk_from_path(const std::string& path);

// Writes one chunk atomically (see the top). `sync` = fsync the file and the directory.
Expected<ChunkRef> write_chunk(const std::string& dir, int64_t stream, int64_t index,
                               const std::vector<Element>& elements, Compression compression,
                               bool sync = true);
// A committed chunk checked (length, both checksums, element count against its name) but not
// decoded: `body` is its element batch buffer (codec.hpp), alive as long as `owner`: the chunk
// file read into memory, or mapped read-only when it is 1 MiB or more. Its size is checked
// against its header before it is mapped and again once mapped, so a chunk cut short fails
// naming it; one truncated by someone else while its elements are alive faults the process
// (SIGBUS) when they are touched if it was mapped (conveyor itself never rewrites or truncates
// a committed chunk). Errors as read_chunk's.
struct ChunkData {
  StorageOwner owner;
  std::string_view body;
};
Expected<ChunkData> open_chunk(const ChunkRef& chunk);
// Appends the chunk's elements to `out` (they view the chunk's bytes, see open_chunk). data_loss
// naming the chunk when it is short, long, fails a checksum, or holds another element count than
// its name says; `out` is then left as it was.
Status read_chunk(const ChunkRef& chunk, std::vector<Element>& out);

// Stream checkpoints (see the top): 8-byte magic "CVCKPT01", body length, masked CRC32C of the
// body, then the body (the writer's opaque state). Written atomically, replacing one a writer
// left behind when it died between the checkpoint and its chunk.
std::string checkpoint_path(const std::string& dir, int64_t stream, int64_t index);
Status write_checkpoint(const std::string& dir, int64_t stream, int64_t index,
                        const std::string& state, bool sync = true);
// not_found when there is none; data_loss naming the file when it is damaged.
Expected<std::string> read_checkpoint(const std::string& dir, int64_t stream, int64_t index);
// Removes the streams' checkpoints of a DONE snapshot (no stream resumes any more); refused
// (failed_precondition) before DONE. DIR/checkpoints is first renamed out of the way, so a crash
// never leaves a partial set under its name, and the call is idempotent: a later one finishes
// what a crash cut short.
Status remove_checkpoints(const std::string& dir);

enum class State { writing, done, failed };
struct Progress {
  State state = State::writing;
  std::string error; // State::failed: the cause the writer recorded
};
Expected<Progress> progress(const std::string& dir);
// DONE and ERROR are written atomically; a snapshot gets at most one of them.
Status mark_done(const std::string& dir, int64_t chunks, int64_t elements);
Status mark_failed(const std::string& dir, const Status& cause);

} // namespace conveyor::snapshot
