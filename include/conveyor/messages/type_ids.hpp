// The one CAF type-id block of conveyor: every message type and atom. Registration happens in
// one place (node/node_config.cpp: cfg.add_message_types<caf::id_block::conveyor>()), so every
// node registers the same types under the same names. Types only need to be declared here;
// their definitions (plain structs + inspect) live in the per-peer headers of this folder.
#pragma once

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

namespace conveyor::msg {
// worker_consumer.hpp
struct get_elements;
struct element_batch;
// job_task.hpp
struct origin_run;
struct get_splits;
struct splits_reply;
struct splits_update;
struct task_done;
struct cache_trainers;
// dispatcher_worker.hpp
struct task_def;
struct assign_task;
struct task_assigned;
struct stop_task;
struct end_rounds;
struct register_worker;
struct worker_registered;
struct worker_heartbeat;
struct heartbeat_ack;
// job_consumer.hpp
struct join_job;
struct job_joined;
struct get_tasks;
struct leave_job;
struct task_info;
struct task_list;
// dispatcher_job.hpp
struct add_task;
struct remove_task;
struct drain_task;
struct task_finished;
struct job_finished;
struct job_released;
struct persist_splits;
// dispatcher_consumer.hpp
struct client_hello;
struct dispatcher_hello;
struct register_dataset;
struct dataset_registered;
struct get_or_create_job;
struct job_info;
struct get_element_spec;
struct element_spec_reply;
// status.hpp
struct get_status;
struct cluster_status;
struct get_job_status;
struct job_status;
struct rejoin_job;
// snapshot_stream.hpp
struct start_snapshot;
struct snapshot_started;
struct get_snapshot_splits;
struct snapshot_splits;
struct snapshot_nudge;
} // namespace conveyor::msg

CAF_BEGIN_TYPE_ID_BLOCK(conveyor, caf::first_custom_type_id)
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::get_elements))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::element_batch))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::origin_run))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::get_splits))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::splits_reply))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::splits_update))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::leave_job))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::task_done))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::task_def))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::assign_task))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::task_assigned))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::stop_task))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::register_worker))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::worker_registered))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::worker_heartbeat))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::heartbeat_ack))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::join_job))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::job_joined))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::get_tasks))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::task_info))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::task_list))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::add_task))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::remove_task))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::task_finished))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::job_finished))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::job_released))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::client_hello))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::dispatcher_hello))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::register_dataset))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::dataset_registered))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::get_or_create_job))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::job_info))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::get_status))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::cluster_status))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::get_job_status))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::job_status))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::rejoin_job))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::persist_splits))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::end_rounds))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::drain_task))
// Atoms (at most 10 characters). Local timers and the consumer API's flow control.
CAF_ADD_ATOM(conveyor, conveyor::msg, tick_atom, "cv_tick")       // periodic timer
CAF_ADD_ATOM(conveyor, conveyor::msg, produce_atom, "cv_produce") // task: run the pipeline a step
CAF_ADD_ATOM(conveyor, conveyor::msg, expire_atom, "cv_expire")   // a held request's time is up
CAF_ADD_ATOM(conveyor, conveyor::msg, gc_atom, "cv_gc")           // job: consumer-less check
CAF_ADD_ATOM(conveyor, conveyor::msg, ack_atom, "cv_ack")         // consumer API: n elements taken
CAF_ADD_ATOM(conveyor, conveyor::msg, stats_atom, "cv_stats")     // consumer API: counters
CAF_ADD_ATOM(conveyor, conveyor::msg, cancel_atom, "cv_cancel")   // consumer API: stop reading
// Bulk data path (net/bulk.hpp), all local to one node except cv_bframe in the simulator.
CAF_ADD_ATOM(conveyor, conveyor::msg, bulk_send_atom, "cv_bsend")   // task -> bulk server
CAF_ADD_ATOM(conveyor, conveyor::msg, bulk_open_atom, "cv_bopen")   // consumer -> bulk client
CAF_ADD_ATOM(conveyor, conveyor::msg, bulk_ready_atom, "cv_bready") // bulk client -> consumer
CAF_ADD_ATOM(conveyor, conveyor::msg, bulk_frame_atom, "cv_bframe") // a frame for the consumer
CAF_ADD_ATOM(conveyor, conveyor::msg, bulk_lost_atom, "cv_blost")   // a channel broke
CAF_ADD_ATOM(conveyor, conveyor::msg, bulk_hello_atom, "cv_bhello") // simulator: open a channel
CAF_ADD_ATOM(conveyor, conveyor::msg, synced_atom, "cv_synced")     // dispatcher: journal durable
CAF_ADD_ATOM(conveyor, conveyor::msg, retry_atom, "cv_retry")       // retry after a backoff
CAF_ADD_ATOM(conveyor, conveyor::msg, drain_atom, "cv_drain")       // worker/task: graceful stop
CAF_ADD_ATOM(conveyor, conveyor::msg, drained_atom, "cv_drained")   // task: drained yet?
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::cache_trainers))
// TLS sessions of the bulk data path (net/bulk_tls.hpp), local to one node.
CAF_ADD_ATOM(conveyor, conveyor::msg, tls_in_atom, "cv_tlsin")    // socket bytes for a session
CAF_ADD_ATOM(conveyor, conveyor::msg, tls_out_atom, "cv_tlsout")  // session bytes for the socket
CAF_ADD_ATOM(conveyor, conveyor::msg, tls_plain_atom, "cv_tlspt") // plaintext of the TLS records
CAF_ADD_ATOM(conveyor, conveyor::msg, tls_sealed_atom,
             "cv_tlsseal") // sealed records (bulk_seal.hpp)
// A registered dataset's element spec (dispatcher_consumer.hpp).
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::get_element_spec))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::element_spec_reply))
// Distributed snapshots (messages/snapshot_stream.hpp).
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::start_snapshot))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::snapshot_started))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::get_snapshot_splits))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::snapshot_splits))
CAF_ADD_TYPE_ID(conveyor, (conveyor::msg::snapshot_nudge))
CAF_END_TYPE_ID_BLOCK(conveyor)
