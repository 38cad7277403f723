// Admission of workers and consumers by a shared secret (README "Security"). CAF-free.
// The dispatcher requires NetworkConfig::auth_token in register_worker and client_hello; a peer
// presenting none or another one is refused with permission_denied, and the refusal is logged
// without the token. Workers (protocol 6) require the same token in assign_task / stop_task
// (from the dispatcher's jobs) and in get_elements (from consumers), checked by their
// AdmissionGate once per message. Tokens are compared in constant time. The token travels inside the node's
// connection: use TLS (NetworkConfig::tls_*) on any network you do not trust.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

// Equal contents, in time that depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

// OK when `required` is empty or `presented` equals it. Otherwise permission_denied:
// "the dispatcher requires an admission token (--auth-token / --token-file /
// CONVEYOR_AUTH_TOKEN) and this worker presented none" (or "a wrong one"); `who` names the peer
// and `node` the checking node.
Status check_admission(const std::string& required, const std::string& presented,
                       const std::string& who, const std::string& node = "dispatcher");

// One node's admission check, set up once (a worker's token, copied into each of its tasks) so
// that a request costs one constant-time compare. Empty token: everyone is admitted.
class AdmissionGate {
public:
  AdmissionGate() = default;
  AdmissionGate(std::string token, std::string node)
    : token_(std::move(token)), node_(std::move(node)) {}
  bool enabled() const { return !token_.empty(); }
  // The hot-path check: one constant-time compare, nothing allocated.
  bool accepts(std::string_view presented) const {
    return token_.empty() || constant_time_equal(token_, presented);
  }
  // OK or check_admission's permission_denied; `who` names the peer ("consumer 3").
  Status admit(const std::string& presented, const std::string& who) const {
    if (token_.empty())
      return Status::OK();
    return check_admission(token_, presented, who, node_);
  }

private:
  std::string token_;
  std::string node_ = "worker";
};

// The token of a node's command line: `--auth-token VALUE`, else the first line of
// `--token-file FILE` (which must not be readable by group or others), else the environment
// variable CONVEYOR_AUTH_TOKEN, else empty. invalid_argument naming the flag for an unreadable,
// empty or too open file, or for both flags at once.
Expected<std::string> load_auth_token(const std::string& flag_value, const std::string& token_file);

} // namespace conveyor::actors
