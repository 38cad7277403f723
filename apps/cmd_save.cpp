// `conveyor save`: writes a dataset's output as a snapshot directory, read back with load(DIR).
#include <cstdio>
#include <string>

#include "apps/cli_common.hpp"
#include "apps/subcommand.hpp"
#include "conveyor/snapshot.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/graph/text_form.hpp"

namespace conveyor::apps {
namespace {

constexpr CommandInfo kInfo{
  "save", "--dataset EXPR --path DIR [--dispatcher HOST:PORT] [flags]",
  "Runs the dataset EXPR (the pipeline text form) and writes its output as a snapshot in DIR\n"
  "(chunk files; read it back with the dataset load(\"DIR\")). With --dispatcher the service's\n"
  "workers run the dataset (DYNAMIC splits) and write the chunks themselves, surviving worker\n"
  "loss and a dispatcher restart; this process only waits (the dispatcher and workers need\n"
  "--allow-path for DIR). Without it the dataset runs in this process. Prints one summary\n"
  "line. Exit codes: 0 saved, 1 the save failed (the snapshot is marked failed with the cause),\n"
  "2 bad arguments."};

int run_save(const std::vector<std::string>& args) {
  std::string dispatcher, dataset_text, path;
  SaveOptions save;
  int64_t connect_timeout_ms = 5000;
  int64_t stall_timeout_ms = 0;
  po::options_description options("save options");
  // clang-format off
  options.add_options()
      ("dataset", po::value(&dataset_text)->required()->value_name("EXPR"),
       "the dataset, in the pipeline text form, e.g. 'range(1000).map(square)'")
      ("path", po::value(&path)->required()->value_name("DIR"),
       "the snapshot directory to create (it must not hold a snapshot yet)")
      ("dispatcher,d", po::value(&dispatcher)->value_name("HOST:PORT"),
       "produce the elements on this service's workers instead of in this process")
      ("compression", po::value(&save.compression)->default_value("lz4")->value_name("lz4|none"),
       "compression of the chunk files")
      ("chunk-bytes", po::value(&save.chunk_bytes)->default_value(32LL << 20)->value_name("N"),
       "encoded element bytes per chunk file")
      ("connect-timeout", po::value(&connect_timeout_ms)->default_value(5000)->value_name("MS"),
       "with --dispatcher: fail when it does not answer within MS milliseconds")
      ("stall-timeout", po::value(&stall_timeout_ms)->default_value(0)->value_name("MS"),
       "with --dispatcher: fail when no element was committed for MS milliseconds (e.g. no worker\n"
       "is registered); 0 waits as long as it takes, warning every 30 s")
      ("plugin", po::value<std::vector<std::string>>()->composing()->value_name("LIB.so"),
       "load dataset functions from a plugin (repeatable)");
  // clang-format on
  add_security_options(options);
  add_log_level_option(options, "warning");
  po::variables_map vm;
  if (auto stop = parse_command_line(kInfo, options, args, vm))
    return *stop;
  if (auto st = apply_log_level(vm); !st.ok())
    return report_status(kInfo.name, st);
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  if (auto st = load_plugin_flags(vm); !st.ok())
    return bad(st);
  auto dataset = parse_dataset(dataset_text);
  if (!dataset.ok())
    return bad(Status(dataset.status().code(), "`--dataset`: " + dataset.status().message()));
  if (save.compression != "lz4" && save.compression != "none")
    return bad(
      invalid_argument("`--compression` must be lz4 or none, got \"" + save.compression + "\""));
  if (auto st = check_at_least("--chunk-bytes", save.chunk_bytes, 1); !st.ok())
    return bad(st);
  auto connect_timeout = check_millis("--connect-timeout", connect_timeout_ms);
  if (!connect_timeout.ok())
    return bad(connect_timeout.status());
  if (dispatcher.empty() && !vm["connect-timeout"].defaulted())
    return bad(invalid_argument("`--connect-timeout` is used only with `--dispatcher`"));
  if (dispatcher.empty() && !vm["stall-timeout"].defaulted())
    return bad(invalid_argument("`--stall-timeout` is used only with `--dispatcher`"));
  if (auto st = check_at_least("--stall-timeout", stall_timeout_ms, 0); !st.ok())
    return bad(st);
  save.stall_timeout = std::chrono::milliseconds(stall_timeout_ms);

  Expected<SaveResult> result = invalid_argument("unreachable");
  if (dispatcher.empty()) {
    result = conveyor::save(*dataset, path, save);
  } else {
    auto address = parse_address_flag("--dispatcher", dispatcher);
    if (!address.ok())
      return bad(address.status());
    ClientConfig config;
    config.connect_timeout = *connect_timeout;
    if (auto st = apply_security_options(vm, config.network); !st.ok())
      return bad(st);
    auto client = Client::connect(address->to_string(), config);
    if (!client.ok())
      return report_error(kInfo.name,
                          "cannot connect to dispatcher " + address->to_string() + ": " +
                            client.status().to_string(),
                          exit_code_for(client.status()));
    result = distributed_save(*client, *dataset, path, save);
  }
  if (!result.ok()) {
    const ErrorCode code = result.status().code();
    if (code == ErrorCode::invalid_argument || code == ErrorCode::already_exists)
      return bad(result.status());
    return report_error(kInfo.name, "the save failed: " + result.status().to_string(),
                        kExitFailure);
  }
  std::printf("saved %lld elements in %lld chunks (%lld bytes) to %s\n",
              static_cast<long long>(result->elements), static_cast<long long>(result->chunks),
              static_cast<long long>(result->bytes), path.c_str());
  return kExitOk;
}

const Subcommand reg{"save", "write a dataset's output as a snapshot directory (load it back)",
                     run_save};

} // namespace
} // namespace conveyor::apps
