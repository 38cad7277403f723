// list_files(pattern, shuffle, seed): the files matching a POSIX glob, sorted by name, then
// shuffled (reshuffled on every iteration, deterministically when seeded) unless shuffle=false.
// Under DYNAMIC sharding it yields the file of each split instead.
#include <algorithm>

#include "pipeline/io/files.hpp"
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/kernels/source_sequences.hpp"

namespace conveyor::kernels {

namespace {

class ListFilesIterator : public Iterator {
public:
  ListFilesIterator(std::vector<std::string> files, SplitProvider* provider,
                    const PathPolicy* paths)
    : files_(std::move(files), provider, "list_files", paths, PathPolicy::Access::list) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    std::string file;
    CONVEYOR_RETURN_IF_ERROR(files_.next(file, end_of_sequence));
    if (!end_of_sequence)
      out = Element{Tensor::scalar(std::move(file))};
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    files_.save(out);
    return Status::OK();
  }
  Status restore(IteratorStateReader& in) override { return files_.restore(in); }

private:
  FileSequence files_;
};

} // namespace

MakeResult make_list_files(const NodePtr& node, const KernelContext& kctx) {
  if (kctx.split_provider() != nullptr) // the provider decides which files and in what order
    return IteratorPtr(std::make_unique<ListFilesIterator>(std::vector<std::string>{},
                                                           kctx.split_provider(), kctx.paths()));
  // Every match is checked again as it is handed out.
  auto files = glob_sorted("list_files", node->string_attr("pattern"), kctx.paths());
  if (!files.ok())
    return files.status();
  if (node->bool_attr("shuffle")) {
    std::mt19937_64 rng(iteration_seed(node.get(), node->int_attr("seed"), true, kctx));
    for (std::size_t i = files->size(); i > 1; --i) // Fisher-Yates
      std::swap((*files)[i - 1], (*files)[uniform_below(rng, i)]);
  }
  return IteratorPtr(std::make_unique<ListFilesIterator>(std::move(*files), nullptr, kctx.paths()));
}

} // namespace conveyor::kernels
