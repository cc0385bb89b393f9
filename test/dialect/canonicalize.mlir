// Folders of the tetra ops.
// RUN: tetra-opt %s --canonicalize | FileCheck %s

// A rotation by `none` is the identity.
// CHECK-LABEL: func.func @rotate_none
// CHECK-NOT: tetra.rotate
// CHECK: return %arg0
func.func @rotate_none(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %r = tetra.rotate %x by #tetra.rotation<none> along 1 : tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}

// A real rotation stays.
// CHECK-LABEL: func.func @rotate_hadamard
// CHECK: tetra.rotate %arg0 by #tetra.rotation<hadamard<32>> along 1
func.func @rotate_hadamard(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %r = tetra.rotate %x by #tetra.rotation<hadamard<32>> along 1 : tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}
