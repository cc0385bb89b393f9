//===- TetraDialect.cpp - The tetra dialect -------------------------------===//

#include "dialect/TetraOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace tetra;

#include "dialect/TetraDialect.cpp.inc"

namespace {
/// Prints policies under short aliases (`#policy`, `#policy1`, ...) so that a
/// module with a hundred matmuls states each distinct policy once.
struct TetraOpAsmDialectInterface : public OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;

  AliasResult getAlias(Attribute attr, raw_ostream &os) const override {
    if (isa<PolicyAttr>(attr)) {
      os << "policy";
      return AliasResult::FinalAlias;
    }
    return AliasResult::NoAlias;
  }
};
} // namespace

void TetraDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "dialect/TetraOps.cpp.inc"
      >();
  addInterfaces<TetraOpAsmDialectInterface>();
}
