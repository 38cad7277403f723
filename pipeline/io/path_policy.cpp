#include "pipeline/io/path_policy.hpp"
#include "pipeline/io/http.hpp"

#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace conveyor {

namespace fs = std::filesystem;

namespace {

std::string join_roots(const std::vector<std::string>& roots, const std::string& node) {
  if (roots.empty())
    return "none: the " + node + " was started without --allow-path";
  std::string out;
  for (const auto& r : roots)
    out += (out.empty() ? "--allow-path " : ", --allow-path ") + r;
  return out;
}

// Symbolic links and `..` resolved; a missing tail (a file about to be created, or one that does
// not exist) normalised lexically below its deepest existing ancestor.
Expected<std::string> normalise(const std::string& path) {
  if (path.empty())
    return invalid_argument("an empty path");
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(path), ec);
  if (ec)
    return invalid_argument("cannot make `" + path + "` absolute: " + ec.message());
  fs::path c = fs::weakly_canonical(p, ec);
  if (ec)
    return invalid_argument("cannot resolve `" + path + "`: " + ec.message());
  std::string s = c.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/')
    s.pop_back();
  return s;
}

bool url_inside(const std::string& url, const std::string& prefix) {
  if (url.compare(0, prefix.size(), prefix) != 0)
    return false;
  if (url.size() == prefix.size() || prefix.back() == '/')
    return true;
  const char next = url[prefix.size()];
  return next == '/' || next == '?';
}

} // namespace

Expected<std::shared_ptr<const PathPolicy>> PathPolicy::make(const std::vector<std::string>& roots,
                                                             const std::string& node) {
  std::vector<std::string> canonical, urls;
  for (const auto& root : roots) {
    std::error_code ec;
    if (is_url(root)) {
      auto normal = normalize_url(root);
      if (!normal.ok())
        return invalid_argument("`--allow-url` " + normal.status().message());
      urls.push_back(std::move(*normal));
      continue;
    }
    if (root.empty())
      return invalid_argument("`--allow-path` must not be empty");
    fs::path c = fs::canonical(fs::path(root), ec);
    if (ec)
      return invalid_argument("`--allow-path` " + root + ": " + ec.message());
    if (!fs::is_directory(c, ec))
      return invalid_argument("`--allow-path` " + root + " is not a directory");
    std::string s = c.string();
    while (s.size() > 1 && s.back() == '/')
      s.pop_back();
    canonical.push_back(s);
  }
  return std::shared_ptr<const PathPolicy>(
    new PathPolicy(std::move(canonical), std::move(urls), node));
}

bool PathPolicy::inside(const std::string& c) const {
  for (const auto& root : roots_) {
    if (root == "/")
      return true;
    if (c == root ||
        (c.size() > root.size() && c.compare(0, root.size(), root) == 0 && c[root.size()] == '/'))
      return true;
  }
  return false;
}

Status PathPolicy::refuse(const std::string& path, const std::string& resolved, Access access,
                          const std::string& op) const {
  const char* verb = access == Access::write ? "write" : access == Access::list ? "list" : "read";
  std::string shown = "`" + path + "`";
  if (!resolved.empty() && resolved != path)
    shown += " (resolved to `" + resolved + "`)";
  return permission_denied("`" + op + "`: the path " + shown + " is outside the paths this " +
                           node_ + " may " + verb + " (allowed: " + join_roots(roots_, node_) +
                           ")");
}

Status PathPolicy::check_url(const std::string& url, Access access, const std::string& op) const {
  const std::string shown = redact_url(url);
  if (access != Access::read)
    return permission_denied("`" + op + "`: cannot " +
                             (access == Access::write ? "write to" : "list") + " the URL `" +
                             shown + "`: URLs are only read");
  auto normal = normalize_url(url);
  if (!normal.ok())
    return invalid_argument("`" + op + "`: " + normal.status().message());
  for (const auto& prefix : url_prefixes_)
    if (url_inside(*normal, prefix))
      return Status::OK();
  std::string allowed;
  for (const auto& prefix : url_prefixes_)
    allowed += (allowed.empty() ? "--allow-url " : ", --allow-url ") + redact_url(prefix);
  if (allowed.empty())
    allowed = "none: the " + node_ + " was started without --allow-url";
  return permission_denied("`" + op + "`: the URL `" + shown + "` is outside the URLs this " +
                           node_ + " may read (allowed: " + allowed + ")");
}

Status PathPolicy::check(const std::string& path, Access access, const std::string& op) const {
  if (is_url(path))
    return check_url(path, access, op);
  auto c = normalise(path);
  if (!c.ok())
    return invalid_argument("`" + op + "`: " + c.status().message());
  if (!inside(*c))
    return refuse(path, *c, access, op);
  return Status::OK();
}

Status PathPolicy::check_open_file(int fd, const std::string& path, const std::string& op) const {
  if (fd < 0) // a URL: checked by name (check_url), there is no file behind it
    return Status::OK();
  char buf[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) // no /proc: the check before opening stands alone
    return Status::OK();
  std::string resolved(buf, static_cast<std::size_t>(n));
  if (!inside(resolved))
    return refuse(path, resolved, Access::read, op);
  return Status::OK();
}

} // namespace conveyor
