// source(fn): the iterator a registered source function returns. It saves its position as the
// function's registration says (FunctionDef::source_checkpoint): by the iterator's own
// save/restore, or by counting the elements it returned and skipping as many on restore.
#include <utility>

#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

class SourceIterator : public Iterator {
public:
  SourceIterator(std::string name, SourceCheckpoint checkpoint, IteratorPtr it)
    : name_(std::move(name)), checkpoint_(checkpoint), it_(std::move(it)) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    // A restored skip_by_count source: the elements the saved iterator had returned.
    while (skip_ > 0) {
      CONVEYOR_RETURN_IF_ERROR(it_->get_next(out, end_of_sequence));
      if (end_of_sequence)
        return data_loss("source function `" + name_ + "` ended after " +
                         std::to_string(returned_ - skip_) + " elements on restore, before the " +
                         std::to_string(returned_) +
                         " the checkpoint had read (it is registered as skip_by_count: the same "
                         "elements for the same parameters)");
      --skip_;
    }
    CONVEYOR_RETURN_IF_ERROR(it_->get_next(out, end_of_sequence));
    if (!end_of_sequence)
      ++returned_;
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    if (checkpoint_ == SourceCheckpoint::iterator)
      return it_->save(out).with_context(context());
    out.put_tag("source");
    out.put_bytes(name_);
    out.put_int(returned_);
    return Status::OK();
  }

  Status restore(IteratorStateReader& in) override {
    if (checkpoint_ == SourceCheckpoint::iterator)
      return it_->restore(in).with_context(context());
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("source"));
    const std::string name = in.get_bytes();
    const int64_t returned = in.get_int();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    if (name != name_ || returned < 0)
      return data_loss("pipeline state: it holds source function `" + name + "` at element " +
                       std::to_string(returned) + " where this pipeline has `" + name_ + "`");
    returned_ = skip_ = returned;
    return Status::OK();
  }

private:
  std::string context() const { return "source function `" + name_ + "`"; }

  std::string name_;
  SourceCheckpoint checkpoint_;
  IteratorPtr it_;
  int64_t returned_ = 0; // elements returned, counting those skipped on restore
  int64_t skip_ = 0;     // still to pass over after a restore
};

} // namespace

MakeResult make_source(const NodePtr& node, const KernelContext& kctx) {
  const FunctionRef& ref = node->function_attr("fn");
  auto def = find_function("source", ref, FunctionKind::source, kctx);
  if (!def.ok())
    return def.status();
  if (!(*def)->source)
    return internal_error("source function `" + ref.name + "` has no implementation");
  auto it = (*def)->source(kctx.functions().resolve_params(ref));
  if (!it.ok())
    return it.status().with_context("source function `" + ref.name + "`");
  if (!*it)
    return internal_error("source function `" + ref.name + "` returned no iterator");
  return IteratorPtr(
    std::make_unique<SourceIterator>(ref.name, (*def)->source_checkpoint, std::move(*it)));
}

} // namespace conveyor::kernels
