//===- ArrayView.h - A read-only view of contiguous elements ----*- C++ -*-===//
//
// The runtime is plain C++17 (no std::span, no llvm::ArrayRef): this is the
// small non-owning view that launch arguments and kernel tables are passed
// as. It converts from a std::vector, a C array and a braced list; the viewed
// elements must outlive the view (a braced list lives until the end of the
// full expression, which is enough for a call).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_BACKEND_ARRAYVIEW_H
#define TETRA_RUNTIME_BACKEND_ARRAYVIEW_H

#include <cassert>
#include <cstddef>
#include <initializer_list>
#include <vector>

namespace tetra::backend {

/// A pointer and a length over const T.
template <typename T> class ArrayView {
public:
  ArrayView() = default;
  ArrayView(const T *data, size_t size) : data_(data), size_(size) {}
  ArrayView(const std::vector<T> &vector)
      : data_(vector.data()), size_(vector.size()) {}
  template <size_t N> ArrayView(const T (&array)[N]) : data_(array), size_(N) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
// The list outlives the view for as long as the call it is passed to runs;
// llvm::ArrayRef silences the same warning the same way.
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  ArrayView(std::initializer_list<T> list)
      : data_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

  const T *data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T *begin() const { return data_; }
  const T *end() const { return data_ + size_; }
  const T &operator[](size_t index) const {
    assert(index < size_ && "ArrayView index out of range");
    return data_[index];
  }

private:
  const T *data_ = nullptr;
  size_t size_ = 0;
};

} // namespace tetra::backend

#endif // TETRA_RUNTIME_BACKEND_ARRAYVIEW_H
