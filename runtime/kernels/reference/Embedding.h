//===- Embedding.h - Reference embedding lookup -----------------*- C++ -*-===//
//
// The oracle for runtime/kernels/Embedding.h: plain loops, templated on the
// scalar type so the tests can run it in fp64. Ids must be in range.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_REFERENCE_EMBEDDING_H
#define TETRA_RUNTIME_KERNELS_REFERENCE_EMBEDDING_H

#include <cstdint>

namespace tetra::kernels::reference {

/// out[n, :] = table[tokens[n], :].
template <typename T>
void embeddingForward(const T *table, const int32_t *tokens, T *out,
                      int64_t count, int64_t dim) {
  for (int64_t n = 0; n < count; ++n)
    for (int64_t c = 0; c < dim; ++c)
      out[n * dim + c] = table[tokens[n] * dim + c];
}

/// dtable[tokens[n], :] += dout[n, :], n = 0, 1, ...
template <typename T>
void embeddingBackward(const int32_t *tokens, const T *dout, T *dtable,
                       int64_t count, int64_t dim) {
  for (int64_t n = 0; n < count; ++n)
    for (int64_t c = 0; c < dim; ++c)
      dtable[tokens[n] * dim + c] += dout[n * dim + c];
}

} // namespace tetra::kernels::reference

#endif // TETRA_RUNTIME_KERNELS_REFERENCE_EMBEDDING_H
