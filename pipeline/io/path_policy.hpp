// Path confinement: which files a pipeline may read and write. A worker is started with a set of
// allowed roots (`conveyor worker --allow-path DIR`); every kernel that touches the file system
// (text_lines, tfrecord, list_files, cache) asks the IteratorContext's policy before it opens,
// lists or creates anything. Paths are compared after normalisation: symbolic links and `..` are
// resolved (std::filesystem::weakly_canonical), so `/data/../etc/passwd` or a link under a root
// pointing outside it are refused. Files a reader opened are checked once more through
// /proc/self/fd, so a link swapped in between the check and the open is caught too.
//
// URLs (http.hpp) are confined by prefixes instead (`--allow-url PREFIX`, or an http(s) entry of
// --allow-path / allowed_paths): a URL may be read when its normalised form (normalize_url) starts
// with a normalised prefix at a boundary (the prefix ends in `/`, or the URL goes on with `/`, `?`
// or nothing), so `http://h/data` admits `http://h/data/x` but not `http://h/database`. URLs are
// never written or listed.
//
// No policy in the context (nullptr) = unrestricted: the library used in-process on the user's own
// files. A policy with no roots allows nothing (the worker's default).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pipeline/runtime/status.hpp"

namespace conveyor {

class PathPolicy {
public:
  // The roots, each an existing directory (resolved to its canonical path) or an http(s) URL
  // prefix. invalid_argument naming the root otherwise.
  // `node` names who is confined in refusals ("worker", "dispatcher": the dispatcher lists the
  // files of DYNAMIC file sources under its own --allow-path).
  static Expected<std::shared_ptr<const PathPolicy>> make(const std::vector<std::string>& roots,
                                                          const std::string& node = "worker");

  enum class Access { read, write, list };
  // OK when `path` (after normalisation) lies inside one of the roots; otherwise
  // permission_denied: "`text_lines`: the path `/etc/passwd` is outside the paths this worker
  // may read (--allow-path /data)".
  Status check(const std::string& path, Access access, const std::string& op) const;
  // After opening: the file behind `fd` must lie inside a root (catches a link swapped in after
  // check()).
  Status check_open_file(int fd, const std::string& path, const std::string& op) const;

  const std::vector<std::string>& roots() const { return roots_; }
  const std::vector<std::string>& url_prefixes() const { return url_prefixes_; } // normalised

private:
  PathPolicy(std::vector<std::string> roots, std::vector<std::string> urls, std::string node)
    : roots_(std::move(roots)), url_prefixes_(std::move(urls)), node_(std::move(node)) {}
  bool inside(const std::string& canonical) const;
  Status check_url(const std::string& url, Access access, const std::string& op) const;
  Status refuse(const std::string& path, const std::string& resolved, Access access,
                const std::string& op) const;
  std::vector<std::string> roots_; // canonical, without a trailing '/'
  std::vector<std::string> url_prefixes_;
  std::string node_;
};

// Helper for kernels: OK when `policy` is null (unrestricted).
inline Status check_path(const PathPolicy* policy, const std::string& path,
                         PathPolicy::Access access, const std::string& op) {
  return policy ? policy->check(path, access, op) : Status::OK();
}

} // namespace conveyor
