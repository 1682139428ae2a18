#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// A compile-time list of types, with the few operations the network plan needs.
namespace etnn {

template <class... Ts>
struct TypeList {
  static constexpr int size = sizeof...(Ts);
};

namespace detail {
template <class T, class List>
struct Prepend;
template <class T, class... Ts>
struct Prepend<T, TypeList<Ts...>> {
  using type = TypeList<T, Ts...>;
};
}  // namespace detail

template <class T, class List>
using Prepend = typename detail::Prepend<T, List>::type;

}  // namespace etnn
