#include "pipeline/kernels/cache_state.hpp"

#include "pipeline/runtime/status.hpp"

namespace conveyor::kernels {

namespace {
constexpr const char* kTag = "cache";
// Written after the tag since file_checksum was added; an older state has the `complete` flag
// there (0 or 1), and is still read (its file_checksum unknown).
constexpr int64_t kLayout2 = -2;
} // namespace

Status CacheState::save_input(Iterator& it, IteratorStateWriter& out) {
  IteratorStateWriter nested;
  CONVEYOR_RETURN_IF_ERROR(it.save(nested));
  if (nested.has_read_cursor())
    out.set_read_cursor(nested.read_cursor());
  input = nested.bytes();
  return Status::OK();
}

void CacheState::write(IteratorStateWriter& out) const {
  out.put_tag(kTag);
  out.put_int(kLayout2);
  out.put_bool(complete);
  out.put_int(position);
  out.put_bool(ended);
  out.put_int(file_size);
  out.put_int(file_checksum);
  out.put_bool(recording);
  out.put_status(pending);
  out.put_bool(input.has_value());
  if (input)
    out.put_bytes(*input);
}

Expected<CacheState> CacheState::read(IteratorStateReader& in) {
  CONVEYOR_RETURN_IF_ERROR(in.expect_tag(kTag));
  CacheState s;
  const int64_t first = in.get_int();
  const bool layout2 = first == kLayout2;
  s.complete = (layout2 ? in.get_int() : first) != 0;
  s.position = in.get_int();
  s.ended = in.get_bool();
  s.file_size = in.get_int();
  if (layout2)
    s.file_checksum = in.get_int();
  s.recording = in.get_bool();
  s.pending = in.get_status();
  if (in.get_bool())
    s.input = in.get_bytes();
  CONVEYOR_RETURN_IF_ERROR(in.status());
  if (s.position < 0 || (s.complete && s.input))
    return data_loss("pipeline state: a `cache` state with a negative position or an input's "
                     "state for a complete cache");
  return s;
}

Status CacheState::restore_input(Iterator& it) const {
  if (!input)
    return data_loss("pipeline state: a filling `cache` without its input's state");
  IteratorStateReader nested(*input);
  CONVEYOR_RETURN_IF_ERROR(it.restore(nested));
  if (!nested.at_end())
    return data_loss("pipeline state: bytes left after the state of `cache`'s input");
  return Status::OK();
}

} // namespace conveyor::kernels
