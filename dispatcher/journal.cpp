#include "dispatcher/journal.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <type_traits>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/log.hpp"
#include "pipeline/io/tfrecord.hpp" // crc32c
#include "pipeline/runtime/thread_name.hpp"

namespace conveyor::actors {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLog = "journal";
constexpr char kSegmentMagic[8] = {'C', 'V', 'J', 'O', 'U', 'R', 'N', '1'};
constexpr char kSnapshotMagic[8] = {'C', 'V', 'S', 'N', 'A', 'P', 'S', '1'};
constexpr std::size_t kHeaderBytes = 16;
constexpr std::size_t kFrameBytes = 8;
constexpr uint32_t kMaxRecordBytes = 1u << 30; // a snapshot is one frame

// --- codec: one inspector that writes, one that reads (inspect() of every record and entry)

template <class T>
struct is_seq : std::false_type {};
template <class T, class A>
struct is_seq<std::vector<T, A>> : std::true_type {};
template <class T>
struct is_set : std::false_type {};
template <class T, class C, class A>
struct is_set<std::set<T, C, A>> : std::true_type {};

class Encoder {
public:
  using result_type = void;
  static constexpr bool reads_state = true;
  static constexpr bool writes_state = false;
  explicit Encoder(std::string& out) : out_(out) {}

  template <class... Ts>
  void operator()(Ts&... xs) {
    (put(xs), ...);
  }

  template <class T>
  void put(const T& x) {
    if constexpr (std::is_same_v<T, bool>) {
      out_.push_back(x ? 1 : 0);
    } else if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      U v = static_cast<U>(x);
      for (std::size_t i = 0; i < sizeof(T); ++i)
        out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    } else if constexpr (std::is_enum_v<T>) {
      put(static_cast<std::underlying_type_t<T>>(x));
    } else if constexpr (std::is_same_v<T, std::string>) {
      put(static_cast<uint64_t>(x.size()));
      out_.append(x);
    } else if constexpr (is_seq<T>::value || is_set<T>::value) {
      put(static_cast<uint64_t>(x.size()));
      for (const auto& e : x)
        put(e);
    } else {
      inspect(*this, const_cast<T&>(x));
    }
  }

private:
  std::string& out_;
};

class Decoder {
public:
  using result_type = void;
  static constexpr bool reads_state = false;
  static constexpr bool writes_state = true;
  explicit Decoder(std::string_view in) : in_(in) {}

  template <class... Ts>
  void operator()(Ts&... xs) {
    (get(xs), ...);
  }

  template <class T>
  void get(T& x) {
    if (!ok_)
      return;
    if constexpr (std::is_same_v<T, bool>) {
      uint8_t b = 0;
      get(b);
      if (b > 1)
        fail("a bool is neither 0 nor 1");
      x = b == 1;
    } else if constexpr (std::is_integral_v<T>) {
      if (in_.size() - pos_ < sizeof(T))
        return fail("the record ends inside a number");
      using U = std::make_unsigned_t<T>;
      U v = 0;
      for (std::size_t i = 0; i < sizeof(T); ++i)
        v |= static_cast<U>(static_cast<unsigned char>(in_[pos_ + i])) << (8 * i);
      pos_ += sizeof(T);
      x = static_cast<T>(v);
    } else if constexpr (std::is_enum_v<T>) {
      std::underlying_type_t<T> v{};
      get(v);
      x = static_cast<T>(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      uint64_t n = 0;
      get(n);
      if (!ok_ || n > in_.size() - pos_)
        return fail("a string is longer than the record");
      x.assign(in_.data() + pos_, n);
      pos_ += n;
    } else if constexpr (is_seq<T>::value || is_set<T>::value) {
      uint64_t n = 0;
      get(n);
      if (!ok_ || n > in_.size() - pos_) // every element takes at least one byte
        return fail("a list is longer than the record");
      x.clear();
      for (uint64_t i = 0; i < n && ok_; ++i) {
        typename T::value_type e{};
        get(e);
        if constexpr (is_seq<T>::value)
          x.push_back(std::move(e));
        else
          x.insert(std::move(e));
      }
    } else {
      inspect(*this, x);
    }
  }

  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == in_.size(); }
  const std::string& error() const { return error_; }
  void fail(std::string why) {
    if (ok_) {
      ok_ = false;
      error_ = std::move(why);
    }
  }

private:
  std::string_view in_;
  std::size_t pos_ = 0;
  bool ok_ = true;
  std::string error_;
};

template <std::size_t I = 0>
bool decode_alternative(Decoder& d, std::size_t tag, msg::Update& out) {
  if constexpr (I < std::variant_size_v<msg::Update>) {
    if (tag == I) {
      std::variant_alternative_t<I, msg::Update> record{};
      d.get(record);
      out = std::move(record);
      return true;
    }
    return decode_alternative<I + 1>(d, tag, out);
  } else {
    return false;
  }
}

void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

uint32_t frame_crc(const char* length_bytes, std::string_view payload) {
  uint32_t crc = crc32c(length_bytes, 4);
  crc = crc32c(payload.data(), payload.size(), crc);
  return mask_crc32c(crc);
}

void append_frame(std::string& out, std::string_view payload) {
  char head[kFrameBytes];
  put_u32(head, static_cast<uint32_t>(payload.size()));
  put_u32(head + 4, frame_crc(head, payload));
  out.append(head, kFrameBytes);
  out.append(payload);
}

std::string header(const char (&magic)[8]) {
  std::string h(magic, 8);
  char v[8] = {};
  put_u32(v, kJournalFormatVersion);
  h.append(v, 8);
  return h;
}

std::string errno_text() { return std::strerror(errno); }

Status write_all(int fd, const char* data, std::size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return io_error("writing " + path + ": " + errno_text());
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return Status::OK();
}

Status sync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return io_error("opening directory " + dir + ": " + errno_text());
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0)
    return io_error("syncing directory " + dir + ": " + errno_text());
  return Status::OK();
}

Expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return io_error("cannot read " + path + ": " + errno_text());
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad())
    return io_error("reading " + path + " failed");
  return data;
}

bool all_zero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == 0; });
}

Status bad(const std::string& path, std::size_t offset, const std::string& why) {
  return data_loss(path + " at byte " + std::to_string(offset) + ": " + why);
}

// Parses a "<prefix>-<20 digits><suffix>" name; false for anything else.
bool parse_generation(const std::string& name, const std::string& prefix,
                      const std::string& suffix, uint64_t& out) {
  if (name.size() != prefix.size() + 1 + 20 + suffix.size() || name.rfind(prefix + "-", 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  auto digits = name.substr(prefix.size() + 1, 20);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  out = std::stoull(digits);
  return true;
}

std::string generation_name(const char* prefix, uint64_t g, const char* suffix) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%020llu%s", prefix, static_cast<unsigned long long>(g),
                suffix);
  return buf;
}

} // namespace

// --- codec

std::string Journal::encode(const msg::Update& update) {
  std::string out;
  out.push_back(static_cast<char>(update.index()));
  Encoder e{out};
  std::visit([&](const auto& record) { e.put(record); }, update);
  return out;
}

Expected<msg::Update> Journal::decode(std::string_view payload) {
  if (payload.empty())
    return data_loss("an empty record");
  auto tag = static_cast<unsigned char>(payload[0]);
  Decoder d{payload.substr(1)};
  msg::Update out;
  if (!decode_alternative(d, tag, out))
    return data_loss("unknown record type " + std::to_string(tag) +
                     " (written by a newer conveyor?)");
  if (!d.ok())
    return data_loss("record type " + std::to_string(tag) + ": " + d.error());
  if (!d.at_end())
    return data_loss("record type " + std::to_string(tag) + " has trailing bytes");
  return out;
}

std::string Journal::encode_snapshot(const StateSnapshot& snapshot) {
  std::string out;
  Encoder e{out};
  e.put(snapshot);
  return out;
}

Expected<StateSnapshot> Journal::decode_snapshot(std::string_view payload) {
  Decoder d{payload};
  StateSnapshot s;
  d.get(s);
  if (!d.ok())
    return data_loss("snapshot: " + d.error());
  if (!d.at_end())
    return data_loss("snapshot has trailing bytes");
  return s;
}

std::string Journal::segment_path(const std::string& dir, uint64_t generation) {
  return (fs::path(dir) / generation_name("journal", generation, ".log")).string();
}

std::string Journal::snapshot_path(const std::string& dir, uint64_t generation) {
  return (fs::path(dir) / generation_name("snapshot", generation, ".bin")).string();
}

// --- open and replay

Journal::Journal(JournalOptions options) : options_(std::move(options)) {}

namespace {

// Checks a file header; `what` is "journal segment" or "snapshot".
Status check_header(const std::string& path, std::string_view data, const char (&magic)[8],
                    const char* what) {
  if (std::memcmp(data.data(), magic, 8) != 0)
    return bad(path, 0, std::string{"not a conveyor "} + what + " (bad magic)");
  uint32_t version = get_u32(data.data() + 8);
  // Format 6 differs only by lacking the record types 7 added (its records and snapshot
  // layout are the same), so a work dir written by the previous release is read as it is.
  if (version < kOldestJournalFormatVersion || version > kJournalFormatVersion)
    return bad(path, 8, std::string{what} + " format version " + std::to_string(version) +
                          " (this build reads versions " +
                          std::to_string(kOldestJournalFormatVersion) + " to " +
                          std::to_string(kJournalFormatVersion) + ")");
  return Status::OK();
}

// Replays one segment into `state`. `last`: a torn tail is allowed (its valid length is
// returned in `valid`), otherwise every byte must belong to a good record.
Status replay_segment(const std::string& path, bool last, DispatcherState& state,
                      int64_t& records, int64_t& valid) {
  auto data = read_file(path);
  if (!data.ok())
    return data.status();
  std::string_view d = *data;
  valid = 0;
  if (d.size() < kHeaderBytes) {
    if (!last)
      return bad(path, 0, "the file is shorter than its header");
    // A segment whose header was never completely written holds no record.
    if (!d.empty())
      log::warning(kLog, path + ": the segment header is torn (" + std::to_string(d.size()) +
                           " bytes); starting the segment again");
    valid = -1; // rewrite the header
    return Status::OK();
  }
  CONVEYOR_RETURN_IF_ERROR(check_header(path, d, kSegmentMagic, "journal segment"));
  std::size_t pos = kHeaderBytes;
  while (pos < d.size()) {
    std::size_t left = d.size() - pos;
    auto torn = [&](const std::string& why) -> Status {
      if (!last)
        return bad(path, pos, why + " (in a segment that is not the last)");
      log::warning(kLog, path + ": truncating a torn record at byte " + std::to_string(pos) +
                           " (" + why + "; " + std::to_string(left) +
                           " byte(s) dropped: the dispatcher stopped in the middle of an append, "
                           "which was never acknowledged)");
      return Status::OK();
    };
    if (left < kFrameBytes) {
      CONVEYOR_RETURN_IF_ERROR(torn("an incomplete record header"));
      break;
    }
    uint32_t len = get_u32(d.data() + pos);
    uint32_t crc = get_u32(d.data() + pos + 4);
    if (len > kMaxRecordBytes || kFrameBytes + len > left) {
      if (kFrameBytes + static_cast<std::size_t>(len) > left) {
        CONVEYOR_RETURN_IF_ERROR(torn("an incomplete record"));
        break;
      }
      return bad(path, pos, "a record length of " + std::to_string(len) + " bytes");
    }
    auto payload = d.substr(pos + kFrameBytes, len);
    if (frame_crc(d.data() + pos, payload) != crc) {
      bool tail = pos + kFrameBytes + len == d.size() || all_zero(d.substr(pos));
      if (!last || !tail)
        return bad(path, pos, "the record's CRC32C does not match (corrupt record)");
      CONVEYOR_RETURN_IF_ERROR(torn("a CRC mismatch in the last record"));
      break;
    }
    auto update = Journal::decode(payload);
    if (!update.ok())
      return bad(path, pos, update.status().message());
    if (auto s = state.apply(*update); !s.ok())
      return bad(path, pos, "the state refused the record: " + s.to_string());
    ++records;
    pos += kFrameBytes + len;
  }
  valid = static_cast<int64_t>(pos);
  return Status::OK();
}

Status load_snapshot(const std::string& path, DispatcherState& state) {
  auto data = read_file(path);
  if (!data.ok())
    return data.status();
  std::string_view d = *data;
  if (d.size() < kHeaderBytes + kFrameBytes)
    return bad(path, 0, "the snapshot is shorter than its header");
  CONVEYOR_RETURN_IF_ERROR(check_header(path, d, kSnapshotMagic, "snapshot"));
  std::size_t pos = kHeaderBytes;
  uint32_t len = get_u32(d.data() + pos);
  uint32_t crc = get_u32(d.data() + pos + 4);
  if (kFrameBytes + static_cast<std::size_t>(len) != d.size() - pos)
    return bad(path, pos, "the snapshot's length field does not match the file");
  auto payload = d.substr(pos + kFrameBytes, len);
  if (frame_crc(d.data() + pos, payload) != crc)
    return bad(path, pos, "the snapshot's CRC32C does not match (corrupt snapshot)");
  auto snapshot = Journal::decode_snapshot(payload);
  if (!snapshot.ok())
    return bad(path, pos, snapshot.status().message());
  if (auto s = state.restore(*snapshot); !s.ok())
    return bad(path, pos, s.message());
  return Status::OK();
}

} // namespace

Expected<std::unique_ptr<Journal>> Journal::open(JournalOptions options, DispatcherState& state,
                                                 JournalReplay* replay) {
  auto started = std::chrono::steady_clock::now();
  if (options.dir.empty())
    return invalid_argument("the journal needs a directory");
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec)
    return io_error("cannot create the work dir " + options.dir + ": " + ec.message());
  std::set<uint64_t> snapshots, segments;
  for (const auto& entry : fs::directory_iterator(options.dir, ec)) {
    auto name = entry.path().filename().string();
    uint64_t g = 0;
    if (parse_generation(name, "snapshot", ".bin", g))
      snapshots.insert(g);
    else if (parse_generation(name, "journal", ".log", g))
      segments.insert(g);
    else if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0)
      fs::remove(entry.path(), ec); // an unfinished snapshot: never renamed, never used
  }
  if (ec)
    return io_error("cannot list the work dir " + options.dir + ": " + ec.message());

  std::unique_ptr<Journal> j{new Journal(std::move(options))};
  JournalReplay r;
  DispatcherState fresh;
  uint64_t generation = 0;
  if (!snapshots.empty()) {
    generation = *snapshots.rbegin();
    CONVEYOR_RETURN_IF_ERROR(load_snapshot(snapshot_path(j->options_.dir, generation), fresh));
    r.snapshot_loaded = true;
  } else if (!segments.empty()) {
    generation = *segments.begin();
  }
  std::vector<uint64_t> replayed;
  for (auto g : segments)
    if (g >= generation)
      replayed.push_back(g);
  int64_t valid = 0;
  for (std::size_t i = 0; i < replayed.size(); ++i) {
    bool last = i + 1 == replayed.size();
    CONVEYOR_RETURN_IF_ERROR(replay_segment(segment_path(j->options_.dir, replayed[i]), last,
                                            fresh, r.records, valid));
  }
  uint64_t current = replayed.empty() ? generation : replayed.back();
  if (!replayed.empty()) {
    auto size = static_cast<int64_t>(fs::file_size(segment_path(j->options_.dir, current), ec));
    if (valid >= 0)
      r.truncated_bytes = size - valid;
  }
  // Files older than the snapshot are covered by it.
  for (auto g : snapshots)
    if (g < generation)
      fs::remove(snapshot_path(j->options_.dir, g), ec);
  for (auto g : segments)
    if (g < generation)
      fs::remove(segment_path(j->options_.dir, g), ec);

  j->generation_ = current;
  CONVEYOR_RETURN_IF_ERROR(j->open_segment(current, replayed.empty() ? -1 : valid, replayed.empty()));
  j->segment_records_ = 0;
  state = std::move(fresh);
  r.generation = current;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (replay)
    *replay = r;
  j->writer_ = std::thread([p = j.get()] { p->writer_loop(); });
  return j;
}

// Opens generation `g`'s segment for appending: a new one (create), or an existing one cut to
// `valid_bytes` (-1: its header is torn; write it again).
Status Journal::open_segment(uint64_t g, int64_t valid_bytes, bool create) {
  auto path = segment_path(options_.dir, g);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return io_error("cannot open " + path + ": " + errno_text());
  auto fail = [&](Status s) {
    ::close(fd);
    return s;
  };
  if (create || valid_bytes < 0) {
    if (::ftruncate(fd, 0) != 0)
      return fail(io_error("truncating " + path + ": " + errno_text()));
    auto h = header(kSegmentMagic);
    if (auto s = write_all(fd, h.data(), h.size(), path); !s.ok())
      return fail(s);
  } else {
    if (::ftruncate(fd, valid_bytes) != 0)
      return fail(io_error("truncating " + path + ": " + errno_text()));
    if (::lseek(fd, 0, SEEK_END) < 0)
      return fail(io_error("seeking in " + path + ": " + errno_text()));
  }
  if (options_.sync && ::fsync(fd) != 0)
    return fail(io_error("syncing " + path + ": " + errno_text()));
  if (options_.sync)
    if (auto s = sync_dir(options_.dir); !s.ok())
      return fail(s);
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = fd;
  return Status::OK();
}

Journal::~Journal() {
  {
    std::lock_guard<std::mutex> guard{mu_};
    stop_ = true;
  }
  wake_writer_.notify_all();
  if (writer_.joinable())
    writer_.join();
  if (fd_ >= 0)
    ::close(fd_);
}

// --- appending (group fsync)

uint64_t Journal::append(const msg::Update& update, Done on_durable) {
  auto payload = encode(update);
  std::unique_lock<std::mutex> lock{mu_};
  auto seq = ++appended_;
  if (!failed_.ok()) {
    Status s = failed_;
    lock.unlock();
    if (on_durable)
      on_durable(s);
    return seq;
  }
  append_frame(pending_, payload);
  pending_done_.push_back(std::move(on_durable));
  ++segment_records_;
  lock.unlock();
  wake_writer_.notify_one();
  return seq;
}

void Journal::writer_loop() {
  name_this_thread("conveyor-jrnl");
  std::unique_lock<std::mutex> lock{mu_};
  for (;;) {
    wake_writer_.wait(lock, [this] { return stop_ || !pending_.empty(); });
    if (pending_.empty() && stop_)
      return;
    std::string group;
    group.swap(pending_);
    std::vector<Done> done;
    done.swap(pending_done_);
    writing_ = true;
    Status s = failed_;
    int fd = fd_;
    auto path = segment_path(options_.dir, generation_);
    lock.unlock();
    if (s.ok())
      s = write_all(fd, group.data(), group.size(), path);
    if (s.ok() && options_.sync && ::fdatasync(fd) != 0)
      s = io_error("syncing " + path + ": " + errno_text());
    if (!s.ok())
      log::error(kLog, "the journal failed: " + s.to_string() +
                         " (changes are no longer durable; the dispatcher refuses them)");
    for (auto& d : done)
      if (d)
        d(s);
    lock.lock();
    if (!s.ok() && failed_.ok())
      failed_ = s;
    durable_ += done.size();
    ++groups_;
    writing_ = false;
    synced_cv_.notify_all();
  }
}

Status Journal::flush() {
  std::unique_lock<std::mutex> lock{mu_};
  // Records that failed at append() never reach the writer; count what was queued.
  synced_cv_.wait(lock, [this] { return pending_.empty() && !writing_; });
  return failed_;
}

uint64_t Journal::groups_synced() const {
  std::lock_guard<std::mutex> guard{mu_};
  return groups_;
}

// --- compaction

Status Journal::compact(const DispatcherState& state) {
  CONVEYOR_RETURN_IF_ERROR(flush());
  uint64_t next = generation_ + 1;
  auto final_path = snapshot_path(options_.dir, next);
  auto tmp_path = final_path + ".tmp";
  std::string file = header(kSnapshotMagic);
  append_frame(file, encode_snapshot(state.snapshot()));
  int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return io_error("cannot create " + tmp_path + ": " + errno_text());
  Status s = write_all(fd, file.data(), file.size(), tmp_path);
  if (s.ok() && ::fsync(fd) != 0)
    s = io_error("syncing " + tmp_path + ": " + errno_text());
  ::close(fd);
  if (s.ok() && ::rename(tmp_path.c_str(), final_path.c_str()) != 0)
    s = io_error("renaming " + tmp_path + " to " + final_path + ": " + errno_text());
  if (s.ok())
    s = sync_dir(options_.dir);
  if (!s.ok()) {
    std::error_code ec;
    fs::remove(tmp_path, ec);
    return s;
  }
  // The snapshot covers everything so far: continue in a new segment. The writer is idle
  // (flushed) and only the appending thread, which is here, queues work.
  {
    std::lock_guard<std::mutex> guard{mu_};
    uint64_t old = generation_;
    CONVEYOR_RETURN_IF_ERROR(open_segment(next, -1, true));
    generation_ = next;
    segment_records_ = 0;
    std::error_code ec;
    fs::remove(segment_path(options_.dir, old), ec);
    fs::remove(snapshot_path(options_.dir, old), ec);
  }
  log::info(kLog, "compacted the journal into " + final_path);
  return Status::OK();
}

} // namespace conveyor::actors
