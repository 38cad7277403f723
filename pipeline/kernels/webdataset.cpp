// webdataset(files, keys, compression_type): WebDataset tar shards, one element per sample. A
// sample is the run of consecutive files that share a key (the path up to the first '.' of the
// file name); its element is a dict of string scalars: "__key__" and one entry per requested
// extension (the rest of the file name after that '.'), in sorted key order. Extensions not in
// `keys` are not read into the element (a projection the caller chose); a sample lacking one of
// `keys`, or holding one twice, is an error for that element only. A damaged archive ends its
// shard with an error (data_loss naming the shard). Under DYNAMIC sharding each split is a shard.
#include <algorithm>
#include <map>
#include <optional>

#include "pipeline/io/files.hpp"
#include "pipeline/io/tar_reader.hpp"
#include "pipeline/io/webdataset.hpp"
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/kernels/source_sequences.hpp"

namespace conveyor::kernels {

namespace {

// "dir/n0001.seg.png" -> key "dir/n0001", extension "seg.png"; false without a '.'.
bool split_name(const std::string& path, std::string& key, std::string& ext) {
  const std::size_t slash = path.rfind('/');
  const std::size_t base = slash == std::string::npos ? 0 : slash + 1;
  const std::size_t dot = path.find('.', base);
  if (dot == std::string::npos || dot == base)
    return false;
  key = path.substr(0, dot);
  ext = path.substr(dot + 1);
  return true;
}

class WebDatasetIterator : public Iterator {
public:
  WebDatasetIterator(std::vector<std::string> files, SplitProvider* provider,
                     const PathPolicy* paths, FileCompression compression,
                     std::vector<std::string> keys, const Structure& structure)
    : files_(std::move(files), provider, "webdataset", paths), compression_(compression),
      keys_(std::move(keys)) {
    // The element's components in the structure's (sorted) key order, "__key__" among them.
    for (std::size_t i = 0; i < structure.keys().size(); ++i)
      slot_[structure.keys()[i]] = i;
  }

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    if (deferred_) {
      Status bad = std::move(*deferred_);
      deferred_.reset();
      return bad;
    }
    for (;;) {
      if (!reader_) {
        std::unique_ptr<InputStream> stream;
        CONVEYOR_RETURN_IF_ERROR(
          files_.open_next(compression_, "WebDataset shard", stream, end_of_sequence));
        if (end_of_sequence)
          return Status::OK();
        const std::string name = stream->path();
        reader_ = std::make_unique<TarReader>(std::move(stream), name);
        pending_.reset();
        entries_ = 0;
      }
      // Files of one sample, until the key changes or the shard ends.
      std::string key;
      std::map<std::string, std::string> files;
      std::string duplicate;
      if (pending_) {
        key = pending_->first;
        files.emplace(pending_->second.first, std::move(pending_->second.second));
        pending_.reset();
      }
      bool shard_end = false;
      for (;;) {
        TarEntry entry;
        bool end = false;
        Status st = reader_->next(entry, end);
        if (!st.ok()) {
          reader_.reset(); // entries cannot be told apart any more: the shard ends here
          return st.with_context("`webdataset`");
        }
        if (!end)
          ++entries_;
        if (end) {
          shard_end = true;
          break;
        }
        std::string entry_key, ext;
        if (!split_name(entry.name, entry_key, ext)) {
          Status bad{ErrorCode::invalid_argument,
                     "`webdataset`: " + reader_->name() + ": the file `" + entry.name +
                       "` has no extension, so it belongs to no sample (WebDataset names files "
                       "KEY.EXTENSION)"};
          if (key.empty())
            return bad;
          deferred_ = std::move(bad); // after the sample it ends
          break;
        }
        if (key.empty())
          key = entry_key;
        if (entry_key != key) {
          pending_.emplace(std::move(entry_key),
                           std::make_pair(std::move(ext), std::move(entry.data)));
          break;
        }
        if (!files.emplace(ext, std::move(entry.data)).second)
          duplicate = ext;
      }
      if (key.empty()) { // the shard ended
        reader_.reset();
        continue;
      }
      const std::string shard = reader_->name();
      if (shard_end)
        reader_.reset();
      return make_element(shard, key, files, duplicate, out);
    }
  }

  // The place in a shard is the count of its entries read (the next sample's first file, held
  // in pending_, among them): restore reopens the shard and skips that many entries.
  Status save(IteratorStateWriter& out) override {
    files_.save(out);
    out.put_tag("webdataset");
    out.put_bool(deferred_.has_value());
    if (deferred_)
      out.put_status(*deferred_);
    out.put_bool(reader_ != nullptr);
    if (!reader_)
      return Status::OK();
    out.put_bytes(reader_->name());
    out.put_int(entries_);
    out.put_bool(pending_.has_value());
    if (pending_) {
      out.put_bytes(pending_->first);
      out.put_bytes(pending_->second.first);
      out.put_bytes(pending_->second.second);
    }
    return Status::OK();
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(files_.restore(in));
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("webdataset"));
    deferred_.reset();
    if (in.get_bool())
      deferred_ = in.get_status();
    reader_.reset();
    pending_.reset();
    const bool reading = in.get_bool();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    if (!reading)
      return Status::OK();
    const std::string shard = in.get_bytes();
    const int64_t entries = in.get_int();
    if (in.get_bool()) {
      std::string key = in.get_bytes();
      std::string ext = in.get_bytes();
      pending_.emplace(std::move(key), std::make_pair(std::move(ext), in.get_bytes()));
    }
    CONVEYOR_RETURN_IF_ERROR(in.status());
    CONVEYOR_RETURN_IF_ERROR(files_.check(shard));
    auto stream = InputStream::open(shard, compression_, "WebDataset shard");
    if (!stream.ok())
      return stream.status().with_context("`webdataset`");
    reader_ = std::make_unique<TarReader>(std::move(*stream), shard);
    for (int64_t i = 0; i < entries; ++i) { // bounded by the checkpoint's entry count
      TarEntry entry;
      bool end = false;
      CONVEYOR_RETURN_IF_ERROR(reader_->next(entry, end).with_context("`webdataset`"));
      if (end)
        return data_loss("`webdataset`: the checkpoint is at entry " + std::to_string(entries) +
                         " of " + shard + ", which now has only " + std::to_string(i) +
                         " (the file changed since)");
    }
    entries_ = entries;
    return Status::OK();
  }

private:
  Status make_element(const std::string& shard, const std::string& key,
                      std::map<std::string, std::string>& files, const std::string& duplicate,
                      Element& out) {
    const std::string where = "`webdataset`: sample `" + key + "` of " + shard;
    if (!duplicate.empty())
      return invalid_argument(where + " has two `" + duplicate + "` files");
    std::vector<Tensor> parts(slot_.size());
    parts[slot_.at(kWebDatasetKeyEntry)] = Tensor::scalar(key);
    for (const auto& ext : keys_) {
      auto f = files.find(ext);
      if (f == files.end()) {
        std::string has;
        for (const auto& [e, data] : files)
          has += (has.empty() ? "" : ", ") + e;
        return invalid_argument(where + " has no `" + ext + "` file (it has: " + has + ")");
      }
      parts[slot_.at(ext)] = Tensor::scalar(std::move(f->second));
    }
    out = Element{std::move(parts)};
    return Status::OK();
  }

  FileSequence files_;
  FileCompression compression_;
  std::vector<std::string> keys_;
  std::map<std::string, std::size_t> slot_;
  std::unique_ptr<TarReader> reader_;
  int64_t entries_ = 0;            // of the open shard, read
  std::optional<Status> deferred_; // an entry's error, returned after the sample it ended
  // The first file of the next sample, read while looking for the end of this one.
  std::optional<std::pair<std::string, std::pair<std::string, std::string>>> pending_;
};

} // namespace

MakeResult make_webdataset(const NodePtr& node, const KernelContext& kctx) {
  auto compression = compression_from_name(node->string_attr("compression_type"),
                                           "`webdataset` argument `compression_type`");
  if (!compression.ok())
    return compression.status();
  auto structure = webdataset_structure(node->strings_attr("keys"));
  if (!structure.ok())
    return structure.status();
  std::vector<std::string> files;
  if (kctx.split_provider() == nullptr) { // with a provider, the splits name the shards
    auto expanded = expand_file_patterns("webdataset", node->strings_attr("files"), kctx.paths());
    if (!expanded.ok())
      return expanded.status();
    files = std::move(*expanded);
  }
  return IteratorPtr(std::make_unique<WebDatasetIterator>(std::move(files), kctx.split_provider(),
                                                          kctx.paths(), *compression,
                                                          node->strings_attr("keys"), *structure));
}

} // namespace conveyor::kernels
