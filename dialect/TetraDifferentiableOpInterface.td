//===- TetraDifferentiableOpInterface.td - Gradient rules ---*- tablegen -*-===//
//
// How a model op differentiates: the one place each op states its backward,
// so that the training-step pass (lowering/TrainingStep.cpp) needs no table
// of op kinds and a new op becomes trainable by implementing this interface.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DIFFERENTIABLE_OP_INTERFACE_TD
#define TETRA_DIFFERENTIABLE_OP_INTERFACE_TD

include "mlir/IR/OpBase.td"

def Tetra_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::tetra";
  let description = [{
    An op that can be differentiated in reverse mode. Given the gradient of
    the loss with respect to each of its results, the op builds the ops that
    compute the gradient with respect to each of its operands, reading the
    forward values it needs from its own operands and results (the training
    step recomputes the forward pass, so they are live).

    Operands that carry no gradient (integer token ids, targets) get a null
    value. A gradient has its operand's type. `tetra.linear` does not
    implement this interface: the training-step pass turns it into the
    three `tetra.matmul`s of its roles.
  }];
  let methods = [
    InterfaceMethod<[{
      Builds, at the builder's insertion point, the gradients of the loss
      with respect to this op's operands, one entry per operand (null where
      the operand takes no gradient), from `resultGradients` (one non-null
      gradient per result, of that result's type).
    }], "::mlir::LogicalResult", "buildGradients",
    (ins "::mlir::OpBuilder &":$builder,
         "::mlir::ValueRange":$resultGradients,
         "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGradients)>,
  ];
}

// What a model op lists among its traits; it implements buildGradients.
defvar Tetra_Differentiable =
    DeclareOpInterfaceMethods<Tetra_DifferentiableOpInterface>;

#endif // TETRA_DIFFERENTIABLE_OP_INTERFACE_TD
