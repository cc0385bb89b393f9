//===- TetraKernelOps.td - Scaled matmuls and kernel regions -*- tablegen -*-===//
//
// The ops quantization materialization and kernel formation create: the
// matrix product over codes and scales, and the kernel region every target
// generates code for. Included from TetraOps.td.
//
//===----------------------------------------------------------------------===//
