#include "coordinated/round_elements.hpp"

namespace conveyor::actors {

std::string encode_round_elements(const std::vector<Element>& elements, Compression compression) {
  return encode_batch(elements, compression);
}

Status decode_round_elements(std::string_view payload, uint32_t count, std::vector<Element>& out) {
  if (!out.empty()) { // appending: decode aside
    std::vector<Element> decoded;
    CONVEYOR_RETURN_IF_ERROR(decode_round_elements(payload, count, decoded));
    for (auto& e : decoded)
      out.push_back(std::move(e));
    return Status::OK();
  }
  std::vector<Element>& decoded = out;
  CONVEYOR_RETURN_IF_ERROR(decode_batch(payload, decoded));
  if (decoded.size() != count)
    return Status{ErrorCode::data_loss, "coordinated read: a reply announced " +
                                          std::to_string(count) + " elements and held " +
                                          std::to_string(decoded.size())};
  return Status::OK();
}

} // namespace conveyor::actors
