#include "pipeline/kernels/cache_state.hpp"

#include "pipeline/runtime/status.hpp"

namespace conveyor::kernels {

namespace {
constexpr const char* kTag = "cache";
}

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
  out.put_bool(complete);
  out.put_int(position);
  out.put_bool(ended);
  out.put_int(file_size);
  out.put_bool(recording);
  out.put_status(pending);
  out.put_bool(input.has_value());
  if (input)
    out.put_bytes(*input);
}

Expected<CacheState> CacheState::read(IteratorStateReader& in) {
  CONVEYOR_RETURN_IF_ERROR(in.expect_tag(kTag));
  CacheState s;
  s.complete = in.get_bool();
  s.position = in.get_int();
  s.ended = in.get_bool();
  s.file_size = in.get_int();
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
