// Nested elements over the service: a dict dataset read through `conveyor dispatcher` and
// `conveyor worker` processes with the C++ API arrives as the same flat components, and the
// dataset's element_spec re-nests them by key.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "conveyor/client.hpp"
#include "pipeline/graph/text_form.hpp"
#include "test/integration/cluster.hpp"

using namespace conveyor;
using namespace conveyor::testing;

TEST_CASE("a dict dataset read through dispatcher and worker processes keeps its keys") {
  Cluster cluster(2);
  auto dataset = parse_dataset(
    "from_tensor_slices({\"label\": [1, 2, 3, 4, 5, 6], \"image\": uint8([[1, 2], [3, 4], "
    "[5, 6], [7, 8], [9, 10], [11, 12]]), \"meta\": {\"id\": [\"a\", \"b\", \"c\", \"d\", \"e\", "
    "\"f\"]}}).batch(2)");
  REQUIRE_MESSAGE(dataset.ok(), dataset.status().to_string());
  auto spec = dataset->element_spec();
  REQUIRE(spec.ok());
  const Structure structure = spec->structure_or_flat();
  CHECK(structure.to_string() == "{\"image\": _, \"label\": _, \"meta\": {\"id\": _}}");
  const std::size_t label = structure.index_of("label").value();
  const std::size_t image = structure.index_of("image").value();
  const auto meta = structure.range_of("meta").value();

  auto client = Client::connect(cluster.address());
  REQUIRE_MESSAGE(client.ok(), client.status().to_string());
  DistributeOptions options;
  options.policy = ShardingPolicy::dynamic;
  auto stream = client->distribute(*dataset, options);
  REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
  std::vector<int64_t> labels;
  std::vector<std::string> texts;
  for (int i = 0; i < 100; ++i) {
    Element e;
    bool end = false;
    auto st = stream->next(e, end, kReadTimeout);
    REQUIRE_MESSAGE(st.ok(), st.to_string() << "\n" << cluster.describe());
    if (end)
      break;
    REQUIRE(spec->is_compatible(e));
    REQUIRE(e[image].dtype() == DType::uint8);
    for (int64_t r = 0; r < e[label].shape()[0]; ++r) {
      const int64_t l = e[label].data<int64_t>()[r];
      labels.push_back(l);
      // image row r is [2l - 1, 2l] and meta.id row r the l-th letter: the keys kept their data
      CHECK(e[image].data<uint8_t>()[2 * r] == 2 * l - 1);
      CHECK(e[meta.first].strings()[static_cast<std::size_t>(r)] ==
            std::string(1, static_cast<char>('a' + l - 1)));
    }
    texts.push_back(to_string(e, structure));
  }
  std::sort(labels.begin(), labels.end());
  CHECK(labels == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(meta.second == 1);
  std::sort(texts.begin(), texts.end());
  REQUIRE(texts.size() == 3);
  CHECK(texts[0] == "{\"image\": uint8([[1, 2], [3, 4]]), \"label\": [1, 2], \"meta\": {\"id\": "
                    "[\"a\", \"b\"]}}");
}
