#include "net/admission.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

namespace conveyor::actors {

bool constant_time_equal(std::string_view a, std::string_view b) {
  const std::size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  volatile unsigned char result = diff; // keep the loop from being cut short
  return result == 0;
}

Status check_admission(const std::string& required, const std::string& presented,
                       const std::string& who, const std::string& node) {
  if (required.empty())
    return Status::OK();
  if (constant_time_equal(required, presented))
    return Status::OK();
  return permission_denied("the " + node +
                           " requires an admission token (--auth-token, --token-file or "
                           "CONVEYOR_AUTH_TOKEN) and this " +
                           who + " presented " + (presented.empty() ? "none" : "a wrong one"));
}

Expected<std::string> load_auth_token(const std::string& flag_value,
                                      const std::string& token_file) {
  if (!flag_value.empty() && !token_file.empty())
    return invalid_argument("give either `--auth-token` or `--token-file`, not both");
  if (!flag_value.empty())
    return flag_value;
  if (!token_file.empty()) {
    struct stat st {};
    if (::stat(token_file.c_str(), &st) != 0)
      return invalid_argument("`--token-file` " + token_file + " cannot be read");
    if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
      return invalid_argument("`--token-file` " + token_file +
                              " is readable by group or others; make it private (chmod 600)");
    std::ifstream in(token_file);
    std::string line;
    if (!in)
      return invalid_argument("`--token-file` " + token_file + " cannot be read");
    if (!std::getline(in, line))
      return invalid_argument("`--token-file` " + token_file + " is empty");
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    if (line.empty())
      return invalid_argument("`--token-file` " + token_file + " holds an empty token");
    return line;
  }
  if (const char* env = std::getenv("CONVEYOR_AUTH_TOKEN")) {
    // Set but empty is a mistake (a template that lost its value), not a wish for no token.
    if (*env == '\0')
      return invalid_argument(
        "CONVEYOR_AUTH_TOKEN is set but empty: give it the token, or unset it "
        "to run without an admission token");
    return std::string{env};
  }
  return std::string{};
}

} // namespace conveyor::actors
