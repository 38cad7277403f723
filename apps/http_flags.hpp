// The flags of remote objects (pipeline/io/http.hpp): --allow-url on the worker and the
// dispatcher (URL prefixes datasets may read, joined to the --allow-path roots), and the worker's
// HTTP client settings (retries, backoff, CA bundle, headers file).
#pragma once

#include <string>
#include <vector>

#include "apps/cli_common.hpp"

namespace conveyor::apps {

// `who` says what the prefixes admit, in --help.
void add_allow_url_option(po::options_description& options, const char* who);
// Appends each --allow-url prefix to `allowed` (a PathPolicy's roots); invalid_argument naming
// the flag for one that is not an http(s) URL.
Status apply_allow_url_option(const po::variables_map& vm, std::vector<std::string>& allowed);

void add_http_client_options(po::options_description& options);
// Sets the process's HTTP options (set_http_options): the environment's, overridden by the flags.
Status apply_http_client_options(const po::variables_map& vm);

} // namespace conveyor::apps
