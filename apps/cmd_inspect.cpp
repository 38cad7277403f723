// `conveyor inspect EXPR [--json] [--plugin PATH]...` — parses a dataset expression in the text
// form (pipeline/graph/text_form.hpp) and prints its canonical text, fingerprint, cardinality and
// element_spec, and with --json the graph as JSON. `conveyor inspect --functions [--plugin
// PATH]...` lists the registered functions instead: kind, parameters with kinds and defaults,
// where each comes from (built in or which plugin), and its one-line doc.
// Exit codes: 0 fine, 1 the dataset parses but is invalid (e.g. an unknown function),
// 2 bad flags or an expression that does not parse (shown with a caret under the column).
#include <boost/program_options.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "apps/subcommand.hpp"
#include "pipeline/graph/dataset.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/functions/plugin_info.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/graph/text_form.hpp"

namespace conveyor::apps {
namespace {

namespace po = boost::program_options;

constexpr const char* kUsage =
  "usage: conveyor inspect EXPR [--json] [--plugin PATH]...\n"
  "       conveyor inspect --functions [--plugin PATH]...\n"
  "  e.g. conveyor inspect 'range(100).map(square).shuffle(16, seed=3).batch(8)'\n";

// One line per function, grouped by kind: "map  scale(factor: float = 2.0)  [built in]  doc".
void print_functions(const FunctionRegistry& registry) {
  for (FunctionKind kind :
       {FunctionKind::map, FunctionKind::predicate, FunctionKind::dataset, FunctionKind::source}) {
    for (const std::string& name : registry.names()) {
      const FunctionDef* def = registry.find(name);
      if (def == nullptr || def->kind != kind)
        continue;
      const std::string plugin = plugin_defining(name);
      const std::string origin = plugin.empty() ? "built in" : "plugin " + plugin;
      std::printf("%-9s %s  [%s]  %s\n", to_string(kind), describe_function(*def).c_str(),
                  origin.c_str(), def->doc.c_str());
    }
  }
  std::vector<std::string> plugins = loaded_plugin_paths();
  std::printf("plugins loaded: %zu\n", plugins.size());
}

// The 1-based column of a text-form error ("column 17: ..."), or 0 when it names none.
int error_column(const std::string& message) {
  const std::string prefix = "column ";
  if (message.compare(0, prefix.size(), prefix) != 0)
    return 0;
  int column = 0;
  const char* begin = message.data() + prefix.size();
  auto [end, ec] = std::from_chars(begin, message.data() + message.size(), column);
  return ec == std::errc{} && end != begin ? column : 0;
}

// Prints the line of `expr` holding `column`, and a caret under that column.
void print_caret(const std::string& expr, int column) {
  std::size_t at = std::min(static_cast<std::size_t>(column - 1), expr.size());
  std::size_t line_begin = 0;
  for (std::size_t i = 0; i < at; ++i)
    if (expr[i] == '\n')
      line_begin = i + 1;
  std::size_t line_end = expr.find('\n', at);
  std::string line = expr.substr(line_begin, line_end == std::string::npos ? std::string::npos
                                                                           : line_end - line_begin);
  std::string pad;
  for (std::size_t i = line_begin; i < at; ++i)
    pad += expr[i] == '\t' ? '\t' : ' ';
  std::fprintf(stderr, "  %s\n  %s^\n", line.c_str(), pad.c_str());
}

std::string cardinality_text(int64_t c) {
  if (c == kInfiniteCardinality)
    return "infinite";
  if (c == kUnknownCardinality)
    return "unknown";
  return std::to_string(c);
}

int run_inspect(const std::vector<std::string>& args) {
  po::options_description flags("flags");
  // clang-format off
  flags.add_options()
      ("help,h", "print this help")
      ("json", "also print the graph as JSON")
      ("functions", "list the registered functions (with --plugin: theirs too) with their "
       "parameters instead of inspecting an expression")
      ("plugin", po::value<std::vector<std::string>>()->composing(),
       "load functions from this plugin shared library (repeatable)");
  // clang-format on
  po::options_description all;
  // clang-format off
  all.add(flags).add_options()("expr", po::value<std::string>(), "dataset expression");
  // clang-format on
  po::positional_options_description positional;
  positional.add("expr", 1);

  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "conveyor inspect: " << e.what() << "\n" << kUsage << flags;
    return 2;
  }
  if (vm.count("help") != 0) {
    std::cout
      << kUsage
      << "\nPrints the canonical text form, fingerprint, cardinality and element_spec of a\n"
      << "dataset expression.\n\n"
      << flags;
    return 0;
  }
  const bool list_functions = vm.count("functions") != 0;
  if (list_functions && (vm.count("expr") != 0 || vm.count("json") != 0)) {
    std::cerr << "conveyor inspect: --functions takes no expression and no --json\n" << kUsage;
    return 2;
  }
  if (!list_functions && vm.count("expr") == 0) {
    std::cerr << "conveyor inspect: missing the dataset expression\n" << kUsage;
    return 2;
  }

  auto& registry = FunctionRegistry::global();
  if (vm.count("plugin") != 0) {
    for (const auto& path : vm["plugin"].as<std::vector<std::string>>()) {
      Status st = registry.load_plugin(path);
      if (!st.ok()) {
        std::cerr << "conveyor inspect: cannot load plugin `" << path << "`: " << st.to_string()
                  << "\n";
        return 2;
      }
    }
  }

  if (list_functions) {
    print_functions(registry);
    return 0;
  }

  const std::string expr = vm["expr"].as<std::string>();
  auto dataset = parse_dataset(expr);
  if (!dataset.ok()) {
    std::fprintf(stderr, "conveyor inspect: the dataset expression does not parse:\n");
    if (int column = error_column(dataset.status().message()); column > 0)
      print_caret(expr, column);
    std::fprintf(stderr, "%s\n", dataset.status().to_string().c_str());
    return 2;
  }

  std::printf("text:         %s\n", dataset->to_text().c_str());
  std::printf("fingerprint:  %s\n", dataset->fingerprint().c_str());
  int exit_code = 0;
  if (Status st = dataset->validate(&registry); !st.ok()) {
    std::fprintf(stderr, "conveyor inspect: the dataset is not valid: %s\n",
                 st.to_string().c_str());
    exit_code = 1;
  } else {
    std::printf("cardinality:  %s\n", cardinality_text(dataset->cardinality(&registry)).c_str());
    auto spec = dataset->element_spec(&registry);
    if (spec.ok()) {
      std::printf("element_spec: %s\n", spec->to_string().c_str());
    } else {
      std::fprintf(stderr, "conveyor inspect: no element_spec: %s\n",
                   spec.status().to_string().c_str());
      exit_code = 1;
    }
  }
  if (vm.count("json") != 0)
    std::printf("json:\n%s\n", to_json(*dataset).c_str());
  return exit_code;
}

const Subcommand reg{"inspect",
                     "print a dataset expression's canonical form, fingerprint, cardinality, spec",
                     run_inspect};

} // namespace
} // namespace conveyor::apps
