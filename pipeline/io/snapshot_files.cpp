#include "pipeline/io/snapshot_files.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pipeline/io/durable_file.hpp"
#include "pipeline/io/temp_files.hpp"
#include "pipeline/io/tfrecord.hpp" // crc32c
#include "pipeline/runtime/per_process.hpp"
#include "pipeline/tensor/gather_buffer.hpp"

namespace conveyor::snapshot {

namespace fs = std::filesystem;
using namespace durable;

namespace {

constexpr char kChunkMagic[8] = {'C', 'V', 'C', 'H', 'U', 'N', 'K', '1'};
constexpr std::size_t kChunkHeaderBytes = 32;
constexpr char kCheckpointMagic[8] = {'C', 'V', 'C', 'K', 'P', 'T', '0', '1'};
constexpr std::size_t kCheckpointHeaderBytes = 20;
constexpr const char* kMetadataFile = "snapshot.metadata";
constexpr const char* kMetadataMagic = "conveyor-snapshot";

// Writes `pieces` in order with gather writes (up to 1024 pieces a call), retrying short writes.
Status write_pieces(int fd, const std::vector<std::string_view>& pieces, const std::string& path) {
  constexpr std::size_t kMaxIov = 1024; // IOV_MAX on Linux
  std::size_t next = 0, offset = 0;     // the first piece not written whole, and its bytes written
  while (next < pieces.size()) {
    iovec iov[kMaxIov];
    int count = 0;
    for (std::size_t i = next; i < pieces.size() && count < static_cast<int>(kMaxIov); ++i) {
      const std::size_t skip = i == next ? offset : 0;
      iov[count].iov_base = const_cast<char*>(pieces[i].data() + skip);
      iov[count].iov_len = pieces[i].size() - skip;
      ++count;
    }
    const ssize_t wrote = ::writev(fd, iov, count);
    if (wrote < 0 && errno == EINTR)
      continue;
    if (wrote < 0)
      return io_error("writing " + path + ": " + errno_text());
    auto left = static_cast<std::size_t>(wrote);
    while (next < pieces.size() && left >= pieces[next].size() - offset) {
      left -= pieces[next].size() - offset;
      offset = 0;
      ++next;
    }
    offset += left;
  }
  return Status::OK();
}

// The first write of this process into `dir` removes the temporary files there whose writers
// are dead (a crashed process's, pipeline/io/temp_files.hpp); once, so a chunk's write does not
// list the directory.
Status remove_dead_writers_files_once(const std::string& dir) {
  struct Swept {
    std::mutex mu;
    std::set<std::string> dirs;
  };
  static PerProcess<Swept> per_process; // a forked child sweeps again
  Swept& swept = per_process.get([] { return new Swept; });
  {
    std::lock_guard<std::mutex> lock(swept.mu);
    if (!swept.dirs.insert(dir).second)
      return Status::OK();
  }
  auto removed = remove_dead_writers_files(dir, ".tmp-");
  return removed.ok() ? Status::OK() : removed.status();
}

// Writes `pieces` to a temporary file in `dir`, syncs it (when `sync`) and renames it to
// `final_path`: `final_path` never exists half-written. `exclusive`: refuse when it exists.
Status write_atomically(const std::string& dir, const std::string& final_path,
                        const std::vector<std::string_view>& pieces, bool sync, bool exclusive) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  CONVEYOR_RETURN_IF_ERROR(remove_dead_writers_files_once(dir));
  const std::string tmp = dir + "/.tmp-" + temp_writer_tag() + "-" + std::to_string(rng());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return io_error("cannot create " + tmp + ": " + errno_text());
  Status s = write_pieces(fd, pieces, tmp);
  if (s.ok() && sync && ::fsync(fd) != 0)
    s = io_error("syncing " + tmp + ": " + errno_text());
  ::close(fd);
  if (s.ok()) {
    // link() fails when the name exists, rename() would replace it.
    int rc = exclusive ? ::link(tmp.c_str(), final_path.c_str())
                       : ::rename(tmp.c_str(), final_path.c_str());
    if (rc != 0)
      s = errno == EEXIST ? Status{ErrorCode::already_exists, final_path + " already exists"}
                          : io_error("renaming " + tmp + " to " + final_path + ": " + errno_text());
  }
  std::error_code ec;
  fs::remove(tmp, ec); // after link(), or after a failure; gone already after rename()
  if (s.ok() && sync)
    s = sync_dir(dir);
  return s;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "chunk-S-I-N" with S 8 digits, I 10 digits, N any digits.
bool parse_chunk_name(const std::string& name, ChunkRef& out) {
  if (name.rfind("chunk-", 0) != 0)
    return false;
  std::string_view rest(name);
  rest.remove_prefix(6);
  auto a = rest.find('-');
  if (a != 8)
    return false;
  auto b = rest.find('-', a + 1);
  if (b != a + 11)
    return false;
  std::string_view s = rest.substr(0, a), i = rest.substr(a + 1, 10), n = rest.substr(b + 1);
  if (!all_digits(s) || !all_digits(i) || !all_digits(n) || n.size() > 18)
    return false;
  out.stream = std::stoll(std::string(s));
  out.index = std::stoll(std::string(i));
  out.elements = std::stoll(std::string(n));
  return true;
}

Expected<int64_t> parse_int(const std::string& text, const std::string& what) {
  try {
    std::size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used == text.size())
      return static_cast<int64_t>(v);
  } catch (const std::exception&) {
  }
  return data_loss(what + ": not an integer: `" + text + "`");
}

} // namespace

std::string format_spec_components(const ElementSpec& spec) {
  std::string out;
  for (std::size_t i = 0; i < spec.components.size(); ++i) {
    const TensorSpec& c = spec.components[i];
    if (i > 0)
      out += ';';
    out += dtype_name(c.dtype);
    out += ':';
    if (c.unknown_rank) {
      out += '?';
      continue;
    }
    out += '[';
    for (std::size_t d = 0; d < c.shape.size(); ++d)
      out += (d ? "," : "") + std::to_string(c.shape[d]);
    out += ']';
  }
  if (spec.structure && !spec.structure->is_flat())
    out += "|" + spec.structure->to_string(); // its keys escape control bytes: one line
  return out;
}

Expected<ElementSpec> parse_spec_components(const std::string& full_text) {
  ElementSpec spec;
  if (full_text.empty())
    return spec;
  // Components never hold `|`: the first one starts the structure.
  const std::size_t bar = full_text.find('|');
  const std::string text = full_text.substr(0, bar);
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ';')) {
    auto colon = item.find(':');
    auto bad = [&](const std::string& why) {
      return invalid_argument("element spec component `" + item + "`: " + why +
                              " (expected DTYPE:[d0,d1,...] or DTYPE:?)");
    };
    if (colon == std::string::npos)
      return bad("no `:`");
    auto dtype = dtype_from_name(item.substr(0, colon));
    if (!dtype)
      return bad("unknown dtype");
    TensorSpec c;
    c.dtype = *dtype;
    std::string shape = item.substr(colon + 1);
    if (shape == "?") {
      c.unknown_rank = true;
    } else {
      if (shape.size() < 2 || shape.front() != '[' || shape.back() != ']')
        return bad("bad shape");
      std::stringstream dims(shape.substr(1, shape.size() - 2));
      std::string dim;
      while (std::getline(dims, dim, ',')) {
        auto v = parse_int(dim, "dimension");
        if (!v.ok() || *v < kUnknownDim)
          return bad("bad dimension `" + dim + "`");
        c.shape.push_back(*v);
      }
    }
    spec.components.push_back(std::move(c));
  }
  if (bar != std::string::npos) {
    auto structure = Structure::parse(full_text.substr(bar + 1));
    if (!structure.ok())
      return structure.status().with_context("element spec");
    if (structure->flat_size() != spec.components.size())
      return invalid_argument("element spec: the structure " + structure->to_string() + " has " +
                              std::to_string(structure->flat_size()) + " leaves for " +
                              std::to_string(spec.components.size()) + " component(s)");
    spec.structure = std::move(*structure);
  }
  return spec;
}

Status create(const std::string& dir, const Metadata& metadata) {
  if (metadata.compression != Compression::lz4 && metadata.compression != Compression::none)
    return invalid_argument("snapshot compression must be lz4 or none");
  if (metadata.definition.find('\n') != std::string::npos ||
      metadata.fingerprint.find('\n') != std::string::npos)
    return invalid_argument("snapshot metadata: the dataset's text form must be one line");
  std::error_code ec;
  fs::create_directories(dir + "/chunks", ec);
  if (ec)
    return io_error("cannot create the snapshot directory " + dir + ": " + ec.message());
  std::string text = std::string(kMetadataMagic) + " " + std::to_string(kFormatVersion) + "\n" +
                     "fingerprint " + metadata.fingerprint + "\n" + "compression " +
                     (metadata.compression == Compression::lz4 ? "lz4" : "none") + "\n" +
                     "created " + std::to_string(metadata.created_unix_s) + "\n" + "element_spec " +
                     metadata.element_spec + "\n" + "dataset " + metadata.definition + "\n";
  Status s = write_atomically(dir, dir + "/" + kMetadataFile, {text}, true, /*exclusive=*/true);
  if (s.code() == ErrorCode::already_exists)
    return Status{ErrorCode::already_exists,
                  "a snapshot exists at " + dir +
                    " already (snapshot.metadata): a snapshot is written once; choose another "
                    "path or remove it"};
  return s;
}

Expected<Metadata> read_metadata(const std::string& dir) {
  const std::string path = dir + "/" + kMetadataFile;
  std::error_code ec;
  if (!fs::exists(path, ec))
    return not_found("no snapshot at " + dir + " (no snapshot.metadata)");
  auto text = read_file(path);
  if (!text.ok())
    return text.status();
  std::stringstream in(*text);
  std::string line;
  Metadata m;
  bool versioned = false, has_fingerprint = false, has_dataset = false;
  while (std::getline(in, line)) {
    auto space = line.find(' ');
    std::string key = line.substr(0, space);
    std::string value = space == std::string::npos ? "" : line.substr(space + 1);
    if (key == kMetadataMagic) {
      auto v = parse_int(value, path + ": format version");
      if (!v.ok())
        return v.status();
      if (*v != kFormatVersion)
        return Status{ErrorCode::version_mismatch, path + ": snapshot format " + value +
                                                     ", this build reads " +
                                                     std::to_string(kFormatVersion)};
      versioned = true;
    } else if (key == "fingerprint") {
      m.fingerprint = value;
      has_fingerprint = true;
    } else if (key == "compression") {
      if (value != "lz4" && value != "none")
        return data_loss(path + ": unknown compression `" + value + "`");
      m.compression = value == "lz4" ? Compression::lz4 : Compression::none;
    } else if (key == "created") {
      auto v = parse_int(value, path + ": created");
      if (!v.ok())
        return v.status();
      m.created_unix_s = *v;
    } else if (key == "element_spec") {
      m.element_spec = value;
    } else if (key == "dataset") {
      m.definition = value;
      has_dataset = true;
    }
  }
  if (!versioned || !has_fingerprint || !has_dataset)
    return data_loss(path + " is not a conveyor snapshot's metadata (missing " +
                     (!versioned         ? "its first line"
                      : !has_fingerprint ? "fingerprint"
                                         : "dataset") +
                     ")");
  return m;
}

std::string chunk_path(const std::string& dir, int64_t stream, int64_t index, int64_t elements) {
  char name[96];
  std::snprintf(name, sizeof name, "chunk-%08lld-%010lld-%lld", static_cast<long long>(stream),
                static_cast<long long>(index), static_cast<long long>(elements));
  return dir + "/chunks/" + name;
}

Expected<std::vector<ChunkRef>> committed_chunks(const std::string& dir) {
  std::vector<ChunkRef> out;
  std::error_code ec;
  fs::directory_iterator it(dir + "/chunks", ec), end;
  if (ec)
    return io_error("cannot list " + dir + "/chunks: " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec)
      return io_error("listing " + dir + "/chunks: " + ec.message());
    std::string name = it->path().filename().string();
    if (name.rfind(".tmp-", 0) == 0)
      continue;
    ChunkRef c;
    if (!parse_chunk_name(name, c))
      return data_loss(dir + "/chunks holds `" + name +
                       "`, which is not a snapshot chunk: the directory is not conveyor's alone");
    c.path = it->path().string();
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const ChunkRef& a, const ChunkRef& b) {
    return std::tie(a.stream, a.index) < std::tie(b.stream, b.index);
  });
  for (std::size_t i = 1; i < out.size(); ++i)
    if (out[i].stream == out[i - 1].stream && out[i].index == out[i - 1].index)
      return data_loss(dir + ": chunk " + std::to_string(out[i].index) + " of stream " +
                       std::to_string(out[i].stream) + " is there twice (" + out[i - 1].path +
                       ", " + out[i].path + ")");
  return out;
}

Expected<ChunkRef> chunk_from_path(const std::string& path) {
  ChunkRef c;
  if (!parse_chunk_name(fs::path(path).filename().string(), c))
    return data_loss("`" + path + "` does not name a snapshot chunk");
  c.path = path;
  return c;
}

Expected<ChunkRef> write_chunk(const std::string& dir, int64_t stream, int64_t index,
                               const std::vector<Element>& elements, Compression compression,
                               bool sync) {
  if (stream < 0 || stream > 99999999 || index < 0 || index > 9999999999LL)
    return invalid_argument("chunk stream " + std::to_string(stream) + " / index " +
                            std::to_string(index) + " out of range");
  // In pieces: uncompressed, a large payload is written from the tensor that holds it rather
  // than copied into one body buffer first (one copy per element, into the page cache).
  GatherBuffer body;
  encode_batch_gather(elements, compression, body, 0);
  std::vector<std::string_view> pieces;
  pieces.reserve(2 * body.views.size() + 2);
  pieces.emplace_back(); // the header, below
  uint32_t crc = 0;
  body.for_each_piece([&](const char* p, std::size_t n) {
    crc = crc32c(p, n, crc);
    pieces.emplace_back(p, n);
  });
  char header[kChunkHeaderBytes] = {};
  std::memcpy(header, kChunkMagic, 8);
  put_u32(header + 8, kFormatVersion);
  put_u32(header + 12, static_cast<uint32_t>(elements.size()));
  put_u64(header + 16, body.size());
  put_u32(header + 24, mask_crc32c(crc));
  put_u32(header + 28, masked(header, 28));
  pieces.front() = std::string_view(header, kChunkHeaderBytes);
  ChunkRef ref{stream, index, static_cast<int64_t>(elements.size()),
               chunk_path(dir, stream, index, static_cast<int64_t>(elements.size()))};
  // Exclusive: a chunk, once committed, is never replaced (a restarted writer that redoes a chunk
  // it committed before its crash is told so).
  CONVEYOR_RETURN_IF_ERROR(
    write_atomically(dir + "/chunks", ref.path, pieces, sync, /*exclusive=*/true));
  return ref;
}

namespace {

// Chunks smaller than this are read into memory, larger ones mapped read-only. A mapping costs no
// copy between the page cache and the caller (the elements decoded from it view its pages), which
// is what makes loading large chunks as fast as a raw read, but a mapped file truncated under the
// reader faults (SIGBUS) at the next touch of a page past its new end. Committed chunks are never
// rewritten or truncated by conveyor (they are linked into place exclusively and never replaced),
// so only someone else can; a read copy is immune, and under this size it costs little. Nothing
// cheaper prevents the fault (docs/ARCHITECTURE.md, "Not built yet": an fstat is stale at once,
// leases only delay the truncation and need the file's owner).
constexpr std::size_t kMapFromBytes = 1 << 20;

struct MappedFile {
  const char* data = nullptr;
  std::size_t size = 0;
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (size > 0)
      ::munmap(const_cast<char*>(data), size);
  }
};

struct ChunkBytes {
  StorageOwner owner;
  std::string_view bytes; // the whole file
};

struct CloseFd {
  int fd;
  ~CloseFd() { ::close(fd); }
};

Status damaged(const ChunkRef& chunk, const std::string& why) {
  return data_loss("snapshot chunk " + chunk.path + " is damaged: " + why);
}

// Reads exactly n bytes at `offset`; false (errno set, or 0 for end of file) when it cannot.
bool pread_all(int fd, char* out, std::size_t n, off_t offset) {
  while (n > 0) {
    const ssize_t got = ::pread(fd, out, n, offset);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      if (got == 0)
        errno = 0;
      return false;
    }
    out += got;
    n -= static_cast<std::size_t>(got);
    offset += got;
  }
  return true;
}

// The header's own checks (magic, checksum, version) and its body length against `file_size`.
Status check_header(const ChunkRef& chunk, const char* header, uint64_t file_size) {
  if (std::memcmp(header, kChunkMagic, 8) != 0)
    return damaged(chunk, "no chunk header");
  if (masked(header, 28) != get_u32(header + 28))
    return damaged(chunk, "the header's checksum does not match");
  if (get_u32(header + 8) != kFormatVersion)
    return Status{ErrorCode::version_mismatch, "snapshot chunk " + chunk.path + " has format " +
                                                 std::to_string(get_u32(header + 8)) +
                                                 ", this build reads " +
                                                 std::to_string(kFormatVersion)};
  const uint64_t body = get_u64(header + 16);
  if (body != file_size - kChunkHeaderBytes)
    return damaged(chunk, "its header says " + std::to_string(body) + " body bytes, the file has " +
                            std::to_string(file_size - kChunkHeaderBytes));
  return Status::OK();
}

// The chunk file's bytes, read or mapped (see kMapFromBytes). The file's size is checked against
// its header before anything is mapped, and again once the pages are mapped in: a chunk cut
// short before or while it is opened fails naming it. One cut after that, while its elements are
// alive, is the remaining window, and only for mapped chunks.
Expected<ChunkBytes> read_chunk_file(const ChunkRef& chunk) {
  const int fd = ::open(chunk.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return io_error("cannot read " + chunk.path + ": " + errno_text());
  CloseFd closer{fd}; // a mapping keeps the file without it
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return io_error("cannot stat " + chunk.path + ": " + errno_text());
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size < kChunkHeaderBytes)
    return damaged(chunk, "it has " + std::to_string(size) + " bytes, shorter than its header");
  char header[kChunkHeaderBytes];
  if (!pread_all(fd, header, kChunkHeaderBytes, 0))
    return errno == 0 ? damaged(chunk, "it ended inside its header while being read")
                      : io_error("cannot read " + chunk.path + ": " + errno_text());
  CONVEYOR_RETURN_IF_ERROR(check_header(chunk, header, size));
  ChunkBytes out;
  if (size < kMapFromBytes) {
    auto buffer = std::make_shared<std::vector<char>>(size);
    if (!pread_all(fd, buffer->data(), size, 0))
      return errno == 0 ? damaged(chunk, "it was cut short while being read (expected " +
                                           std::to_string(size) + " bytes)")
                        : io_error("cannot read " + chunk.path + ": " + errno_text());
    out.bytes = std::string_view(buffer->data(), size);
    out.owner = std::move(buffer);
    return out;
  }
  // MAP_POPULATE: the pages (in the page cache after the save) are mapped in one call rather
  // than one fault per 64 KiB as the checksum walks them.
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED)
    return io_error("cannot map " + chunk.path + ": " + errno_text());
  auto file = std::make_shared<MappedFile>();
  file->data = static_cast<const char*>(p);
  file->size = size;
  if (::fstat(fd, &st) != 0)
    return io_error("cannot stat " + chunk.path + ": " + errno_text());
  if (static_cast<std::size_t>(st.st_size) != size)
    return damaged(chunk, "it changed size from " + std::to_string(size) + " to " +
                            std::to_string(st.st_size) + " bytes while being mapped");
  out.bytes = std::string_view(file->data, size);
  out.owner = std::move(file);
  return out;
}

} // namespace

Expected<ChunkData> open_chunk(const ChunkRef& chunk) {
  auto file = read_chunk_file(chunk);
  if (!file.ok())
    return file.status();
  const std::string_view d = file->bytes;
  // The header again: what was read or mapped, not what was checked before (a file replaced
  // in between).
  CONVEYOR_RETURN_IF_ERROR(check_header(chunk, d.data(), d.size()));
  const uint64_t count = get_u32(d.data() + 12);
  const uint64_t body = get_u64(d.data() + 16);
  if (masked(d.data() + kChunkHeaderBytes, body) != get_u32(d.data() + 24))
    return damaged(chunk, "the body's checksum does not match");
  if (static_cast<int64_t>(count) != chunk.elements)
    return damaged(chunk, "it holds " + std::to_string(count) + " elements, its name says " +
                            std::to_string(chunk.elements));
  ChunkData out;
  out.body = d.substr(kChunkHeaderBytes);
  out.owner = std::move(file->owner);
  return out;
}

Status read_chunk(const ChunkRef& chunk, std::vector<Element>& out) {
  auto data = open_chunk(chunk);
  if (!data.ok())
    return data.status();
  auto bad = [&](const std::string& why) {
    return data_loss("snapshot chunk " + chunk.path + " is damaged: " + why);
  };
  std::vector<Element> elements;
  Status s = decode_batch(data->owner, data->body, elements);
  if (!s.ok())
    return bad(s.message());
  if (static_cast<int64_t>(elements.size()) != chunk.elements)
    return bad("it decodes to " + std::to_string(elements.size()) + " elements, its header says " +
               std::to_string(chunk.elements));
  out.insert(out.end(), std::make_move_iterator(elements.begin()),
             std::make_move_iterator(elements.end()));
  return Status::OK();
}

std::string checkpoint_path(const std::string& dir, int64_t stream, int64_t index) {
  char name[48];
  std::snprintf(name, sizeof name, "stream-%08lld-%010lld", static_cast<long long>(stream),
                static_cast<long long>(index));
  return dir + "/checkpoints/" + name;
}

Status write_checkpoint(const std::string& dir, int64_t stream, int64_t index,
                        const std::string& state, bool sync) {
  std::error_code ec;
  fs::create_directories(dir + "/checkpoints", ec);
  if (ec)
    return io_error("cannot create " + dir + "/checkpoints: " + ec.message());
  char header[kCheckpointHeaderBytes] = {};
  std::memcpy(header, kCheckpointMagic, 8);
  put_u64(header + 8, state.size());
  put_u32(header + 16, masked(state.data(), state.size()));
  return write_atomically(dir + "/checkpoints", checkpoint_path(dir, stream, index),
                          {std::string_view(header, sizeof header), state}, sync,
                          /*exclusive=*/false);
}

Expected<std::string> read_checkpoint(const std::string& dir, int64_t stream, int64_t index) {
  const std::string path = checkpoint_path(dir, stream, index);
  std::error_code ec;
  if (!fs::exists(path, ec))
    return not_found("no checkpoint " + path);
  auto bytes = read_file(path);
  if (!bytes.ok())
    return bytes.status();
  const std::string& b = *bytes;
  if (b.size() < kCheckpointHeaderBytes || std::memcmp(b.data(), kCheckpointMagic, 8) != 0 ||
      get_u64(b.data() + 8) != b.size() - kCheckpointHeaderBytes ||
      get_u32(b.data() + 16) !=
        masked(b.data() + kCheckpointHeaderBytes, b.size() - kCheckpointHeaderBytes))
    return data_loss("snapshot stream checkpoint " + path +
                     " is damaged (bad magic, length or checksum)");
  return b.substr(kCheckpointHeaderBytes);
}

Status remove_checkpoints(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir + "/DONE", ec))
    return failed_precondition("snapshot " + dir +
                               " is not done: its streams may still need their checkpoints");
  const std::string live = dir + "/checkpoints", doomed = dir + "/.checkpoints-removed";
  if (fs::exists(live, ec)) {
    fs::remove_all(doomed, ec); // one a crash left behind
    if (ec)
      return io_error("cannot remove " + doomed + ": " + ec.message());
    fs::rename(live, doomed, ec);
    if (ec)
      return io_error("cannot rename " + live + " to " + doomed + ": " + ec.message());
  }
  fs::remove_all(doomed, ec);
  if (ec)
    return io_error("cannot remove " + doomed + ": " + ec.message());
  return Status::OK();
}

Expected<Progress> progress(const std::string& dir) {
  std::error_code ec;
  Progress p;
  if (fs::exists(dir + "/ERROR", ec)) {
    auto cause = read_file(dir + "/ERROR");
    if (!cause.ok())
      return cause.status();
    p.state = State::failed;
    p.error = *cause;
    while (!p.error.empty() && p.error.back() == '\n')
      p.error.pop_back();
  } else if (fs::exists(dir + "/DONE", ec)) {
    p.state = State::done;
  }
  return p;
}

Status mark_done(const std::string& dir, int64_t chunks, int64_t elements) {
  std::error_code ec;
  if (fs::exists(dir + "/ERROR", ec))
    return failed_precondition("snapshot " + dir + " is marked failed; it cannot be done too");
  std::string text =
    "chunks " + std::to_string(chunks) + " elements " + std::to_string(elements) + "\n";
  return write_atomically(dir, dir + "/DONE", {text}, true, /*exclusive=*/true);
}

Status mark_failed(const std::string& dir, const Status& cause) {
  std::error_code ec;
  if (fs::exists(dir + "/DONE", ec))
    return failed_precondition("snapshot " + dir + " is done; it cannot be marked failed");
  std::string text = cause.to_string() + "\n";
  return write_atomically(dir, dir + "/ERROR", {text}, true, /*exclusive=*/true);
}

} // namespace conveyor::snapshot
