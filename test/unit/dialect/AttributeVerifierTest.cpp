//===- AttributeVerifierTest.cpp - Verifiers the parser cannot reach ------===//
//
// The textual grammar never builds some invalid attributes (a preset cannot
// take a block, `none` takes no parameters), but C++ code can: the frontend
// and the passes build attributes directly. These tests hold the verifiers
// to their messages through the C++ API (the static verify() that getChecked
// calls; getChecked itself needs the storage classes, private to the dialect).
//
//===----------------------------------------------------------------------===//

#include "dialect/TetraOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace tetra;

namespace {

class AttributeVerifierTest : public ::testing::Test {
protected:
  AttributeVerifierTest()
      : handler(&context, [this](Diagnostic &diag) {
          messages.push_back(diag.str());
          return success();
        }) {
    context.loadDialect<TetraDialect>();
  }

  /// An emitError callback for getChecked, located nowhere in particular.
  std::function<InFlightDiagnostic()> emitError() {
    return [this] { return mlir::emitError(UnknownLoc::get(&context)); };
  }

  BlockScaleAttr mxBlock() {
    return BlockScaleAttr::get(&context, 32, ScaleFormat::E8M0,
                               ScaleRule::Floor);
  }

  MLIRContext context;
  ScopedDiagnosticHandler handler;
  std::vector<std::string> messages;
};

TEST_F(AttributeVerifierTest, BF16TakesNoBlockScale) {
  EXPECT_TRUE(failed(OperandQuantAttr::verify(
      emitError(), ElementFormat::BF16, mxBlock(), Rounding::NearestEven,
      RotationAttr::getNone(&context))));
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], "element format bf16 takes no block scale");
}

TEST_F(AttributeVerifierTest, MissingRotation) {
  EXPECT_TRUE(failed(OperandQuantAttr::verify(emitError(), ElementFormat::E2M1,
                                              mxBlock(), Rounding::NearestEven,
                                              RotationAttr())));
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], "missing rotation");
}

TEST_F(AttributeVerifierTest, NoneTakesNoParameters) {
  EXPECT_TRUE(failed(RotationAttr::verify(emitError(), RotationKind::None, 32,
                                          SignSchedule::Fixed, 0)));
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], "rotation 'none' takes no parameters");
}

TEST_F(AttributeVerifierTest, DeterministicHadamardTakesNoSigns) {
  EXPECT_TRUE(failed(RotationAttr::verify(emitError(), RotationKind::Hadamard,
                                          32, SignSchedule::PerStep, 5)));
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], "a deterministic Hadamard rotation takes no signs");
}

TEST_F(AttributeVerifierTest, GemmPolicyNeedsBothOperands) {
  auto lhs = OperandQuantAttr::getPreset(&context, "mxfp4");
  ASSERT_TRUE(succeeded(lhs));
  EXPECT_TRUE(failed(GemmPolicyAttr::verify(
      emitError(), *lhs, OperandQuantAttr(), Float32Type::get(&context))));
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], "a GEMM policy needs both operands");
}

TEST_F(AttributeVerifierTest, PresetsAndTheirTypes) {
  auto mxfp4 = OperandQuantAttr::getPreset(&context, "mxfp4");
  ASSERT_TRUE(succeeded(mxfp4));
  EXPECT_EQ(mxfp4->getBlockSize(), 32);
  EXPECT_TRUE(isa<Float4E2M1FNType>(mxfp4->getCodeType()));
  EXPECT_TRUE(isa<Float8E8M0FNUType>(mxfp4->getScaleType()));

  auto nvfp4 = OperandQuantAttr::getPreset(&context, "nvfp4");
  ASSERT_TRUE(succeeded(nvfp4));
  EXPECT_EQ(nvfp4->getBlockSize(), 16);
  EXPECT_TRUE(isa<Float8E4M3FNType>(nvfp4->getScaleType()));

  auto bf16 = OperandQuantAttr::getPreset(&context, "bf16");
  ASSERT_TRUE(succeeded(bf16));
  EXPECT_EQ(bf16->getBlockSize(), 1);
  EXPECT_FALSE(bf16->getScaleType());

  EXPECT_TRUE(failed(OperandQuantAttr::getPreset(&context, "fp4")));
  EXPECT_TRUE(messages.empty());
}

} // namespace
