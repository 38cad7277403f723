// validate_security (conveyor/options.hpp): the TLS files are checked with OpenSSL before the
// actor system starts, so that a bad file is a clear start-up error naming the flag instead of
// an exception inside CAF's multiplexer at the first connection.
#include "actors/tls_stream.hpp"
#include "conveyor/options.hpp"

namespace conveyor {

Status validate_security(const NetworkConfig& n) {
  if (!n.tls())
    return Status::OK();
  // The same loading the TLS bulk path does (actors/tls_stream.cpp), result discarded.
  auto endpoint = actors::TlsEndpoint::create(n, actors::TlsEndpoint::Role::server);
  return endpoint.ok() ? Status::OK() : endpoint.status();
}

} // namespace conveyor
