// The consumer actor's bulk channels (net/bulk.hpp): opening one per worker once a reply names
// its bulk port, and the frames, readiness and losses the bulk client reports.
#include <optional>

#include "consumer/consumer_actor_state.hpp"
#include "net/bulk_frame.hpp"
#include "node/log.hpp"
#include "pipeline/tensor/buffer_pool.hpp"
#include "worker/local_workers.hpp"

namespace conveyor::actors::consumer_detail {

std::vector<msg::task_id_t> tasks_of(self_ptr self, const std::string& worker) {
  std::vector<msg::task_id_t> out;
  for (const auto& [task, w] : self->state.task_worker)
    if (w == worker && self->state.core.knows_task(task))
      out.push_back(task);
  return out;
}

// The link whose current bulk channel is `channel` (its worker in `worker`); nullptr once the
// stream is done or for a channel that was replaced or never known.
WorkerLink* current_channel(self_ptr self, uint64_t channel, const std::string*& worker) {
  auto& st = self->state;
  auto w = st.channel_worker.find(channel);
  if (w == st.channel_worker.end() || st.done)
    return nullptr;
  auto& link = st.workers[w->second];
  if (link.channel != channel)
    return nullptr;
  worker = &w->second;
  return &link;
}

// Opens the bulk channel to a worker whose reply named its bulk port.
void open_bulk(self_ptr self, const std::string& worker, uint16_t port) {
  auto& st = self->state;
  auto& link = st.workers[worker];
  if (link.bulk != WorkerLink::Bulk::none || port == 0 || !st.start.bulk_channels)
    return;
  if (link.local) { // in-process channel: the worker's bulk server sends frames as messages
    auto server = LocalWorkers::bulk_server(worker);
    if (!server) {
      link.bulk = WorkerLink::Bulk::lost;
      return;
    }
    link.channel = ++st.next_channel;
    link.bulk = WorkerLink::Bulk::opening;
    st.channel_worker[link.channel] = worker;
    caf::anon_send(server, msg::bulk_open_atom_v, caf::actor_cast<caf::actor>(self), link.channel);
    return;
  }
  auto addr = parse_address(worker);
  if (!addr.ok())
    return;
  if (!st.bulk_client)
    st.bulk_client = st.start.transport->bulk_client(caf::actor_cast<caf::actor>(self));
  if (!st.bulk_client) { // this transport has none: stay inline
    link.bulk = WorkerLink::Bulk::lost;
    return;
  }
  link.channel = ++st.next_channel; // local: the worker assigns the id requests carry
  link.bulk = WorkerLink::Bulk::opening;
  st.channel_worker[link.channel] = worker;
  caf::anon_send(st.bulk_client, msg::bulk_open_atom_v, addr->host, port, link.channel);
}

void on_bulk_ready(self_ptr self, uint64_t channel, uint64_t server_channel) {
  auto& st = self->state;
  const std::string* worker = nullptr;
  WorkerLink* link = current_channel(self, channel, worker);
  if (!link)
    return;
  link->bulk = WorkerLink::Bulk::ready;
  link->server_channel = server_channel;
  for (auto task : tasks_of(self, *worker))
    st.core.set_bulk(task, true);
  log::debug(kLog, "bulk channel " + std::to_string(channel) + " to worker " + *worker + " open");
  pump(self);
}

// An in-process channel's frame (target_workers LOCAL): the task's encoded buffer itself,
// header first; it becomes the elements' storage as a received one does (no copy).
void on_local_frame(self_ptr self, uint64_t channel, std::vector<char>& frame) {
  auto& st = self->state;
  if (st.done || !st.channel_worker.count(channel))
    return;
  bulk::FrameHeader h;
  auto bad = frame.size() < bulk::kFrameHeaderBytes
               ? std::optional<std::string>{"a frame shorter than its header"}
               : bulk::read_frame_header(frame.data(), bulk::kFrameHeaderBytes, h);
  if (!bad && h.length != frame.size() - bulk::kFrameHeaderBytes)
    bad = "a frame whose header and size disagree";
  if (bad) {
    finish(self, Status{ErrorCode::data_loss, "in-process bulk channel to worker " +
                                                st.channel_worker[channel] + ": " + *bad});
    return;
  }
  LocalWorkers::note_frame();
  const std::size_t size = frame.size();
  const char* data = nullptr;
  StorageOwner buf = pooled_storage(std::move(frame), &data);
  std::string_view view{data + bulk::kFrameHeaderBytes, size - bulk::kFrameHeaderBytes};
  ReadyElements elements;
  Status s =
    st.core.on_frame(h.task, h.batch_seq, h.index, h.count, std::move(buf), view, elements);
  deliver(self, std::move(s), elements, h.task);
}

void on_frame(self_ptr self, uint64_t channel, uint64_t task, uint64_t batch_seq, uint32_t index,
              uint32_t count, std::vector<char>& bytes) {
  auto& st = self->state;
  if (st.done || !st.channel_worker.count(channel))
    return;
  // The received buffer becomes the storage of the element(s) it holds: no copy. It goes
  // back to the buffer pool (pipeline/tensor/buffer_pool.hpp) when the last tensor viewing it is gone.
  const std::size_t size = bytes.size();
  const char* data = nullptr;
  StorageOwner buf = pooled_storage(std::move(bytes), &data);
  std::string_view view{data, size};
  ReadyElements elements;
  Status s = st.core.on_frame(task, batch_seq, index, count, std::move(buf), view, elements);
  deliver(self, std::move(s), elements, task);
}

void on_bulk_lost(self_ptr self, uint64_t channel, const std::string& why) {
  auto& st = self->state;
  const std::string* worker = nullptr;
  WorkerLink* link = current_channel(self, channel, worker);
  if (!link || link->bulk == WorkerLink::Bulk::lost) // (each connection of a channel reports it)
    return;
  link->bulk = WorkerLink::Bulk::lost; // stays inline from now on
  bool all_retired = true;
  for (auto task : tasks_of(self, *worker)) {
    st.core.set_bulk(task, false);
    all_retired = all_retired && st.core.retired(task);
  }
  if (!all_retired) // (a drained worker that left closes it too)
    log::warning(kLog, "bulk channel to worker " + *worker + " lost: " + why);
  self->delayed_send(self, kBulkLossGrace, msg::bulk_lost_atom_v, channel);
  pump(self);
}

// The grace period after a loss is over.
void on_bulk_grace_over(self_ptr self, uint64_t channel) {
  auto& st = self->state;
  auto w = st.channel_worker.find(channel);
  if (w == st.channel_worker.end() || st.done)
    return;
  Status s =
    st.core.on_bulk_lost(tasks_of(self, w->second), "frames announced on it never arrived");
  if (!s.ok())
    finish(self, s);
}

} // namespace conveyor::actors::consumer_detail
