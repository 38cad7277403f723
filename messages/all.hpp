// Every message header, for the places that need them all (type registration, tests).
#pragma once

#include "messages/bulk.hpp"
#include "messages/consumer_api.hpp"
#include "messages/dispatcher_consumer.hpp"
#include "messages/dispatcher_job.hpp"
#include "messages/dispatcher_worker.hpp"
#include "messages/errors.hpp"
#include "messages/job_consumer.hpp"
#include "messages/job_task.hpp"
#include "messages/protocol.hpp"
#include "messages/snapshot_stream.hpp"
#include "messages/status.hpp"
#include "messages/type_ids.hpp"
#include "messages/worker_consumer.hpp"
