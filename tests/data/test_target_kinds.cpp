// Dataset<X, Y> for every kind of target: what the constructor refuses, subsets and with_targets,
// and DataLoader batches whose targets are the dataset's own for the samples they hold, with and
// without prefetch, shuffled, with drop_last.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <etnn/data/data.hpp>

namespace data = etnn::data;
using etnn::Shape;

namespace {
using X = Shape<2>;

// Sample i: x = (i, -i); targets from `target(i, j)` for j < target_size<Y>.
template <class Y, class F>
data::Dataset<X, Y> numbered(std::size_t n, F&& target) {
  std::vector<float> x;
  std::vector<data::target_value<Y>> t;
  for (std::size_t i = 0; i < n; ++i) {
    x.insert(x.end(), {static_cast<float>(i), -static_cast<float>(i)});
    for (std::size_t j = 0; j < data::target_size<Y>; ++j) t.push_back(target(i, j));
  }
  return {std::move(x), std::move(t)};
}

// Every batch's target rows are the dataset's targets of the samples in its rows; returns the
// number of samples seen.
template <class Y>
std::size_t check_batches(const data::Dataset<X, Y>& set, data::LoaderOptions options) {
  data::DataLoader loader(set, options);
  std::size_t seen = 0;
  for (auto batch : loader) {
    for (int r = 0; r < batch.x.batch(); ++r) {
      const auto id = static_cast<std::size_t>(batch.x(r, 0));
      if constexpr (data::class_targets<Y>) {
        REQUIRE(batch.y.size() == static_cast<std::size_t>(batch.x.batch()));
        CHECK(batch.y[static_cast<std::size_t>(r)] == set.label(id));
      } else {
        REQUIRE(batch.y.batch() == batch.x.batch());
        CHECK(std::equal(batch.y.sample(r), batch.y.sample(r) + data::target_size<Y>, set.target(id)));
      }
      ++seen;
    }
  }
  return seen;
}
}  // namespace

TEST_CASE("Dataset refuses targets that do not fit their kind, naming the sample") {
  using Real = data::Dataset<X, Shape<3>>;
  CHECK_THROWS_WITH_AS(Real(std::vector<float>(4), std::vector<float>(5)),
                       doctest::Contains("4 feature values for 5 target values"), etnn::ShapeError);
  CHECK_THROWS_WITH_AS(Real(std::vector<float>(4), std::vector<float>(9)),
                       doctest::Contains("3 target values (3)"), etnn::ShapeError);
  CHECK_THROWS_WITH_AS(Real(std::vector<float>(4), {0, 1, 2, 3, std::numeric_limits<float>::quiet_NaN(), 5}),
                       doctest::Contains("the target of sample 1 (value 1) is nan; real-valued targets must be finite"),
                       etnn::ShapeError);
  using Hot = data::Dataset<X, data::MultiHot<2>>;
  CHECK_THROWS_WITH_AS(Hot(std::vector<float>(4), {1, 0, 0.5f, 1}),
                       doctest::Contains("the target of sample 1 (value 0) is 0.5"), etnn::ShapeError);
  CHECK_NOTHROW(Hot(std::vector<float>(4), {1, 0, 0, 1}));
  CHECK_THROWS_WITH_AS(data::Dataset<X>(std::vector<float>(4), {1, std::numeric_limits<int>::max()}),
                       doctest::Contains("label 1 is 2147483647"), etnn::ShapeError);
}

TEST_CASE("subset and with_targets keep each sample's targets with it") {
  const auto real = numbered<Shape<2>>(10, [](std::size_t i, std::size_t j) { return static_cast<float>(10 * i + j); });
  const auto part = real.subset(4, 3);
  REQUIRE(part.size() == 3);
  CHECK(part.target(2)[1] == 61.0f);
  CHECK(part.targets().size() == 6);
  auto classes = numbered<data::ClassIndices>(6, [](std::size_t i, std::size_t) { return static_cast<int>(i % 3); });
  std::vector<float> hot;
  for (int label : classes.labels()) hot.insert(hot.end(), {label == 0 ? 1.0f : 0.0f, label == 2 ? 1.0f : 0.0f});
  const auto attributes = std::move(classes).with_targets<data::MultiHot<2>>(std::move(hot));
  static_assert(std::is_same_v<std::remove_const_t<decltype(attributes)>, data::Dataset<X, data::MultiHot<2>>>);
  REQUIRE(attributes.size() == 6);
  CHECK(attributes.sample(5)[0] == 5.0f);
  CHECK(attributes.target(3)[0] == 1.0f);
  CHECK(attributes.target(5)[1] == 1.0f);
  CHECK(data::mean(attributes) == 0.0);
}

TEST_CASE_TEMPLATE("DataLoader batches carry each sample's own targets, for every kind", Y, data::ClassIndices,
                   Shape<3>, Shape<2, 2>, data::MultiHot<4>) {
  const auto set = numbered<Y>(53, [](std::size_t i, std::size_t j) {
    if constexpr (data::class_targets<Y>)
      return static_cast<int>((i * 7 + j) % 5);
    else if constexpr (data::multi_hot_targets<Y>)
      return static_cast<float>((i + j) % 2);
    else
      return static_cast<float>(i) + 0.25f * static_cast<float>(j);
  });
  for (bool prefetch : {false, true}) {
    CHECK(check_batches(set, {.batch = 8, .shuffle = true, .seed = 2, .prefetch = prefetch}) == 53);
    CHECK(check_batches(set, {.batch = 8, .shuffle = true, .seed = 2, .drop_last = true, .prefetch = prefetch}) == 48);
  }
  CHECK(check_batches(set, {.batch = 8, .sampler = data::DistributedSampler(1, 3, {.seed = 4})}) == 18);
}
