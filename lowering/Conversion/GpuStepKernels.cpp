//===- GpuStepKernels.cpp - The step's other kernels on GPU chips ---------===//

#include "lowering/Conversion/GpuStepKernels.h"

#include "dialect/LLVMFormatters.h"
#include "lowering/Conversion/AttentionKernelPlan.h"
#include "lowering/Conversion/GemmKernelPlan.h"
#include "lowering/Conversion/GpuKernelBody.h"
#include "lowering/Conversion/QuantizationEmitter.h"
#include "runtime/kernels/Rope.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace tetra;
using namespace tetra::conversion;
using schedule::BufferDesc;
using schedule::Launch;

namespace {

/// Threads per block of the row- and column-parallel launches (a power of
/// two: block reductions halve it).
constexpr int64_t kRowThreads = 128;
/// Tokens per block of embedding.backward's ranking (a thread each).
constexpr int64_t kTokenChunk = 1024;
/// Rows (a warp each) per block of RMSNorm's kernels.
constexpr int64_t kNormRowsPerBlock = 8;
/// Rows per partial sum of RMSNorm's weight gradient.
constexpr int64_t kWeightGradientRows = 256;
/// RMSNorm's backward in one pass where a row's columns fit a warp's
/// registers (at most this many groups of `lanes` columns a lane): rows a
/// block (a warp takes every kNormRowsPerBlock-th), and so rows per
/// partial sum of the weight gradient.
constexpr int64_t kFusedNormGroups = 8;
constexpr int64_t kFusedNormRows = 32;
/// Elements per block of the global norm's sums of squares.
constexpr int64_t kNormPiece = 65536;
/// Elements per block of the clipping (64 a thread).
constexpr int64_t kClipPiece = 16384;
/// AdamW's elements a thread (its bias corrections computed once for them).
constexpr int64_t kAdamWElements = 8;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }


/// The scalar computation of one elementwise tetra op on its operands'
/// values, or null for an op the GPU kernels do not run.
Value elementwiseValue(Body &body, Operation *op, ArrayRef<Value> x) {
  QuantizationEmitter &e = body.e;
  if (isa<AddOp>(op))
    return e.addf(x[0], x[1]);
  if (isa<SubOp>(op))
    return e.subf(x[0], x[1]);
  if (isa<MulOp>(op))
    return e.mulf(x[0], x[1]);
  if (auto scale = dyn_cast<ScaleOp>(op))
    return e.mulf(x[0], e.cF32(static_cast<float>(
                            scale.getFactor().convertToDouble())));
  if (isa<SiluGradOp>(op))
    return e.siluGradient(x[0], x[1]);
  if (isa<SiluOp>(op))
    return e.silu(x[0]);
  return nullptr;
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise tetra.kernels
//===----------------------------------------------------------------------===//

LogicalResult tetra::conversion::lowerElementwiseKernel(KernelOp kernel,
                                                        ModuleOp module) {
  Block &entry = kernel.getBodyBlock();
  int64_t count = -1;
  for (Value value : llvm::concat<Value>(entry.getArguments(),
                                         kernel.getResults())) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type || !type.getElementType().isF32() || !type.hasStaticShape())
      return kernel.emitOpError()
             << "'" << kernel.getKernelName()
             << "': a GPU elementwise kernel takes and gives static f32 "
                "tensors, not "
             << value.getType();
    if (count >= 0 && type.getNumElements() != count)
      return kernel.emitOpError()
             << "'" << kernel.getKernelName()
             << "': its tensors differ in size; a GPU elementwise kernel "
                "maps element i to element i";
    count = type.getNumElements();
  }
  for (Operation &op : entry.without_terminator())
    if (!isa<AddOp, SubOp, MulOp, ScaleOp, SiluOp, SiluGradOp>(op))
      return op.emitOpError()
             << "cannot run in a GPU elementwise kernel (add, sub, mul, "
                "scale, silu and silu_grad can)";

  MLIRContext *context = module.getContext();
  Type f32 = Float32Type::get(context);
  OpBuilder builder(context);
  builder.setInsertionPointToEnd(module.getBody());
  auto gpuModule = gpu::GPUModuleOp::create(builder, kernel.getLoc(),
                                            kernel.getKernelName());
  OpBuilder inner = OpBuilder::atBlockBegin(gpuModule.getBody());
  // Four elements a thread where the count allows: one 16-byte load of
  // each input and one 16-byte store of each result (the buffers start on
  // 16-byte boundaries) keep four times the bytes in flight — the kernels
  // stream memory, and one element a thread left the H200's bandwidth a
  // quarter idle (docs/benchmarks.md). Elements are still computed one by
  // one, the same operations on the same values.
  const int64_t lanes = count % 4 == 0 ? 4 : 1;
  const int64_t threads = count / lanes;
  // The kernel, and where it has four elements a thread, its variants
  // NAME__bf16, which writes every result as BF16 codes (i32 words of two,
  // nearest even: bf16Pair) — the compiler launches it instead where each
  // result's one reader is a BF16 operand's rounding prologue — and, for
  // one result, NAME__and_bf16, which writes the result and its codes
  // (trailing argument "codes:0"), where a rounding prologue is one of its
  // readers.
  enum class Written { F32, BF16, F32AndBF16 };
  auto build = [&](const std::string &name, Written written) {
    const bool resultAsBF16 = written == Written::BF16;
    SmallVector<std::pair<std::string, Type>> arguments;
    for (unsigned i = 0; i < entry.getNumArguments(); ++i)
      arguments.push_back({fmt::format("input:{}", i), flat(count, f32)});
    for (unsigned i = 0; i < kernel.getNumResults(); ++i)
      arguments.push_back(
          {fmt::format("result:{}", i),
           resultAsBF16 ? flat(count / 2, builder.getI32Type())
                        : flat(count, f32)});
    if (written == Written::F32AndBF16)
      arguments.push_back({"codes:0", flat(count / 2, builder.getI32Type())});
    gpu::GPUFuncOp func = createLaunch(
        inner, kernel.getLoc(), name, arguments,
        {ceilDiv(threads, kElementwiseThreads), 1, 1},
        {kElementwiseThreads, 1, 1});
    if (written != Written::F32)
      markVariant(func);
    Body body(func);
    QuantizationEmitter &e = body.e;
    Value t = body.global(kElementwiseThreads);
    body.ifThen(body.ult(t, e.cIndex(threads)), [&] {
      Value first = e.mulIndex(t, e.cIndex(lanes));
      auto vectorType = VectorType::get({lanes}, f32);
      SmallVector<IRMapping> values(lanes);
      for (auto [n, argument] : llvm::enumerate(entry.getArguments())) {
        if (lanes == 1) {
          values[0].map(argument, body.load(func.getArgument(n), first));
          continue;
        }
        Value loaded = vector::LoadOp::create(
            body.b, vectorType, func.getArgument(n), ValueRange{first},
            /*nontemporal=*/false, body.b.getI64IntegerAttr(16));
        for (int64_t l = 0; l < lanes; ++l)
          values[l].map(argument, vector::ExtractOp::create(
                                      body.b, loaded, ArrayRef<int64_t>{l}));
      }
      for (int64_t l = 0; l < lanes; ++l)
        for (Operation &op : entry.without_terminator()) {
          SmallVector<Value> x;
          for (Value operand : op.getOperands())
            x.push_back(values[l].lookup(operand));
          values[l].map(op.getResult(0), elementwiseValue(body, &op, x));
        }
      for (auto [n, yielded] :
           llvm::enumerate(entry.getTerminator()->getOperands())) {
        Value out = func.getArgument(entry.getNumArguments() + n);
        if (lanes == 1) {
          body.store(values[0].lookup(yielded), out, first);
          continue;
        }
        SmallVector<Value> lanesOut;
        for (int64_t l = 0; l < lanes; ++l)
          lanesOut.push_back(values[l].lookup(yielded));
        auto storeCodes = [&](Value to) {
          Value words = vector::FromElementsOp::create(
              body.b, VectorType::get({2}, e.i32()),
              ValueRange{e.bf16Pair(lanesOut[0], lanesOut[1]),
                         e.bf16Pair(lanesOut[2], lanesOut[3])});
          vector::StoreOp::create(body.b, words, to,
                                  ValueRange{e.divIndex(first, 2)},
                                  /*nontemporal=*/false,
                                  body.b.getI64IntegerAttr(8));
        };
        if (resultAsBF16) {
          storeCodes(out);
          continue;
        }
        if (written == Written::F32AndBF16)
          storeCodes(func.getArguments().back());
        vector::StoreOp::create(
            body.b,
            vector::FromElementsOp::create(body.b, vectorType, lanesOut), out,
            ValueRange{first}, /*nontemporal=*/false,
            body.b.getI64IntegerAttr(16));
      }
    });
    body.finish();
  };
  build(kernel.getKernelName().str(), Written::F32);
  if (addsItsInputs(kernel))
    gpuModule.lookupSymbol(kernel.getKernelName())
        ->setAttr(kAddsItsInputs, UnitAttr::get(context));
  if (lanes == 4)
    build((kernel.getKernelName() + kBF16ResultSuffix).str(), Written::BF16);
  if (lanes == 4 && kernel.getNumResults() == 1)
    build((kernel.getKernelName() + kBF16AlsoSuffix).str(),
          Written::F32AndBF16);
  return success();
}

//===----------------------------------------------------------------------===//
// Library kernels
//===----------------------------------------------------------------------===//

namespace {

/// What one library launch looks like to its GPU functions: the launch, its
/// buffers' descriptions and its scalars' values.
struct LibraryCall {
  const Launch &launch;
  const schedule::Schedule &schedule;

  const BufferDesc &buffer(size_t i) const {
    return schedule.buffers[launch.buffers[i]];
  }
  int64_t integer(size_t i) const { return launch.scalars[i].asInt(); }
  double real(size_t i) const { return launch.scalars[i].asFloat(); }
};

/// A function's argument list in the registry's order: the launch's
/// buffers as flat memrefs of their elements, its scalars as i64/f64.
SmallVector<std::pair<std::string, Type>>
registryArguments(MLIRContext *context, const LibraryCall &call,
                  ArrayRef<std::pair<std::string, Type>> scratch = {}) {
  SmallVector<std::pair<std::string, Type>> arguments;
  for (size_t i = 0; i < call.launch.buffers.size(); ++i) {
    const BufferDesc &desc = call.buffer(i);
    Type element = desc.type == backend::ElementType::I32
                       ? Type(IntegerType::get(context, 32))
                       : Type(Float32Type::get(context));
    arguments.push_back(
        {fmt::format("buffer:{}", i),
         flat(std::max<int64_t>(1, desc.numElements()), element)});
  }
  arguments.append(scratch.begin(), scratch.end());
  for (size_t i = 0; i < call.launch.scalars.size(); ++i)
    arguments.push_back(
        {fmt::format("scalar:{}", i),
         call.launch.scalars[i].kind() == backend::ScalarKind::Float
             ? Type(Float64Type::get(context))
             : Type(IntegerType::get(context, 64))});
  return arguments;
}

} // namespace

GpuLibraryBuilder::~GpuLibraryBuilder() = default;

GpuLibraryBuilder::GpuLibraryBuilder(ModuleOp module, llvm::StringRef chip)
    : attentionTile_(attentionTileFor(chip)) {
  OpBuilder builder(module.getContext());
  builder.setInsertionPointToEnd(module.getBody());
  library_ = gpu::GPUModuleOp::create(builder, module.getLoc(),
                                      "tetra_library");
}

std::optional<size_t> GpuLibraryBuilder::bf16ResultPosition(const Launch &launch) {
  // (The registry's buffers and scalars: runtime/kernels/.)
  auto evenScalar = [&](size_t i) {
    return launch.scalars.size() > i && launch.scalars[i].asInt() % 2 == 0;
  };
  if (launch.kernel == "cross_entropy.backward" && evenScalar(1)) // vocab
    return 4;
  if (launch.kernel == "rmsnorm.forward" && evenScalar(1)) // dim
    return 2;
  if (launch.kernel == "rope.backward") // pairs of columns
    return 1;
  return std::nullopt;
}

LogicalResult
GpuLibraryBuilder::expand(const Launch &launch, schedule::Schedule &schedule,
                          Location loc, std::vector<Launch> &launches,
                          Result result, std::optional<LossParts> parts) {
  const bool resultAsBF16 = result != Result::F32;
  const bool overInput = result == Result::BF16OverInput;
  if (resultAsBF16 && !bf16ResultPosition(launch))
    return emitError(loc) << "'" << launch.kernel
                          << "' has no variant with a BF16 result";
  if (overInput && launch.kernel != "cross_entropy.backward")
    return emitError(loc) << "'" << launch.kernel
                          << "' cannot write its result over its input";
  if (parts && launch.kernel != "cross_entropy.forward")
    return emitError(loc) << "'" << launch.kernel << "' takes no loss parts";
  MLIRContext *context = library_.getContext();
  Type f32 = Float32Type::get(context), f64 = Float64Type::get(context);
  const std::string &name = launch.kernel;
  // The variant name of a function writing its result as BF16 codes.
  const std::string bf16Variant = resultAsBF16 ? "bf16" : "";
  LibraryCall call{launch, schedule};

  // A function of the library for this launch: built once per kernel,
  // variant and shape (the buffers' sizes and the constant scalars).
  auto function = [&](const std::string &variant,
                      SmallVector<std::pair<std::string, Type>> arguments,
                      std::array<int64_t, 3> grid, int64_t threads,
                      function_ref<void(Body &)> build) -> std::string {
    std::string key = name + "/" + variant;
    for (const auto &[argument, type] : arguments) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << type;
      key += "/" + text;
    }
    for (size_t i = 0; i < launch.scalars.size(); ++i) {
      bool bound = llvm::any_of(launch.boundScalars,
                                [&](const auto &b) { return b.first == (int)i; });
      if (!bound)
        key += fmt::format("/{}", launch.scalars[i].kind() ==
                                          backend::ScalarKind::Float
                                      ? launch.scalars[i].asFloat()
                                      : launch.scalars[i].asInt());
    }
    key += fmt::format("/{},{}", grid[0], grid[1]);
    auto found = built_.find(key);
    if (found != built_.end())
      return found->second;
    std::string symbol = name + (variant.empty() ? "" : "." + variant);
    for (char &c : symbol)
      if (c == '.')
        c = '_';
    symbol += fmt::format("_{}", perKernel_[symbol]++);
    OpBuilder builder = OpBuilder::atBlockEnd(library_.getBody());
    gpu::GPUFuncOp func = createLaunch(builder, loc, symbol, arguments,
                                       {grid[0], grid[1], grid[2]},
                                       {threads, 1, 1});
    Body body(func);
    build(body);
    body.finish();
    built_[key] = symbol;
    return symbol;
  };
  auto add = [&](const std::string &symbol, std::array<int64_t, 3> grid,
                 int64_t threads, const Launch &from) {
    Launch gpu = from;
    gpu.kernel = symbol;
    gpu.config.grid[0] = static_cast<uint32_t>(grid[0]);
    gpu.config.grid[1] = static_cast<uint32_t>(grid[1]);
    gpu.config.grid[2] = static_cast<uint32_t>(grid[2]);
    gpu.config.block[0] = static_cast<uint32_t>(threads);
    launches.push_back(std::move(gpu));
  };
  // A launch of the registry's arguments over `count` elements, a thread
  // each: body(i) for i < count.
  auto perElement = [&](int64_t count, function_ref<void(Body &, Value)> each) {
    std::array<int64_t, 3> grid{std::max<int64_t>(1, ceilDiv(count,
                                                         kElementwiseThreads)),
                                1, 1};
    std::string symbol = function(
        bf16Variant, registryArguments(context, call), grid,
        kElementwiseThreads, [&](Body &body) {
          Value i = body.global(kElementwiseThreads);
          body.ifThen(body.ult(i, body.e.cIndex(count)),
                      [&] { each(body, i); });
        });
    add(symbol, grid, kElementwiseThreads, launch);
  };
  // A scratch temporary of `bytes` for the launches of this one.
  auto scratch = [&](const std::string &suffix, int64_t bytes) {
    BufferDesc desc;
    desc.name = schedule.buffers[launch.buffers.back()].name + "." + suffix;
    desc.role = schedule::BufferRole::Temporary;
    desc.type = backend::ElementType::I32;
    desc.shape = {ceilDiv(bytes, 4)};
    schedule.buffers.push_back(desc);
    return static_cast<int>(schedule.buffers.size()) - 1;
  };

  //--- The elementwise family ---------------------------------------------//
  if (name == "silu.forward" || name == "silu.backward" ||
      name == "add.forward" || name == "sub.forward" ||
      name == "mul.forward" || name == "add.backward" ||
      name == "sub.backward" || name == "mul.backward" ||
      name == "scale.forward" || name == "scale.backward") {
    const int64_t count = call.integer(0);
    perElement(count, [&](Body &body, Value i) {
      QuantizationEmitter &e = body.e;
      auto at = [&](unsigned argument) { return body.load(body.arg(argument), i); };
      auto put = [&](Value value, unsigned argument) {
        body.store(value, body.arg(argument), i);
      };
      if (name == "silu.forward") {
        put(e.silu(at(0)), 1);
      } else if (name == "silu.backward") {
        put(e.siluGradient(at(0), at(1)), 2);
      } else if (name == "add.forward") {
        put(e.addf(at(0), at(1)), 2);
      } else if (name == "sub.forward") {
        put(e.subf(at(0), at(1)), 2);
      } else if (name == "mul.forward") {
        put(e.mulf(at(0), at(1)), 2);
      } else if (name == "add.backward" || name == "sub.backward") {
        Value dout = at(0);
        put(dout, 1);
        put(name == "add.backward" ? dout : arith::NegFOp::create(body.b, dout),
            2);
      } else if (name == "mul.backward") {
        Value a = at(0), bv = at(1), dout = at(2);
        put(e.mulf(dout, bv), 3);
        put(e.mulf(dout, a), 4);
      } else { // scale: x * factor, the factor rounded to f32
        put(e.mulf(at(0), body.toF32(body.arg(3))), 1);
      }
    });
    return success();
  }

  if (name == "accumulate_gradient") {
    // sum = scale * grad (micro-batch 0) or sum + scale * grad.
    perElement(call.integer(0), [&](Body &body, Value i) {
      QuantizationEmitter &e = body.e;
      Value scale = body.toF32(body.arg(3));
      Value first = arith::CmpIOp::create(body.b, CmpIPredicate::eq,
                                          body.arg(4), e.c64(0));
      Value term = e.mulf(scale, body.load(body.arg(1), i));
      Value sum = body.load(body.arg(0), i);
      body.store(e.select(first, term, e.addf(sum, term)), body.arg(0), i);
    });
    return success();
  }

  //--- Launches over several tensors (the global norm, clipping, AdamW) ---//
  // Block b of such a launch works on the tensor whose range of blocks holds
  // it: a chain of block-uniform branches, one per tensor (each block takes
  // one), so the step pays one launch where it paid one per tensor.
  // firstBlocks: where each tensor's blocks start (`elements` a block, at
  // least one a tensor), then their end; count(t) is tensor t's elements.
  auto firstBlocks = [&](size_t tensors, int64_t elements,
                         function_ref<int64_t(size_t)> count) {
    std::vector<int64_t> first{0};
    for (size_t t = 0; t < tensors; ++t)
      first.push_back(first.back() +
                      ceilDiv(std::max<int64_t>(1, count(t)), elements));
    return first;
  };
  if (name == "adamw") {
    // The CPU's update (runtime/kernels/Optimizer.cpp), its bias
    // corrections computed in fp64 once per thread for kAdamWElements
    // elements, kElementwiseThreads apart (each load coalesced). One launch
    // may update several tensors (the compiler merges a step's consecutive
    // AdamW launches of small tensors): buffers (param, grad, m, v) of each,
    // then each one's seven scalars (count, lr, beta1, beta2, eps, weight
    // decay, step), in launch order — the learning rate and step, bound
    // scalars the same for all, read from the first tensor's.
    const size_t tensors = launch.buffers.size() / 4;
    auto scalar = [&](size_t t, size_t j) { return 4 * tensors + 7 * t + j; };
    const int64_t perBlock = kElementwiseThreads * kAdamWElements;
    std::vector<int64_t> firstBlock = firstBlocks(
        tensors, perBlock,
        [&](size_t t) { return call.integer(scalar(t, 0) - 4 * tensors); });
    std::array<int64_t, 3> grid{firstBlock.back(), 1, 1};
    std::string symbol = function(
        "", registryArguments(context, call), grid, kElementwiseThreads,
        [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value block = body.block();
          Value lr = body.arg(scalar(0, 1)), step = body.arg(scalar(0, 6));
          for (size_t t = 0; t < tensors; ++t) {
            auto buffer = [&](unsigned j) { return body.arg(4 * t + j); };
            body.ifThen(body.within(block, e.cIndex(firstBlock[t]),
                                    e.cIndex(firstBlock[t + 1])),
                        [&] {
              const int64_t count = call.integer(scalar(t, 0) - 4 * tensors);
              Value beta1 = body.arg(scalar(t, 2)), beta2 = body.arg(scalar(t, 3)),
                    eps = body.arg(scalar(t, 4)), decay = body.arg(scalar(t, 5));
              Value one = body.cF64(1.0);
              Value correction1 = body.toF32(
                  e.divf(one, e.subf(one, body.powF64(beta1, step))));
              Value correction2 = body.toF32(
                  e.divf(one, e.subf(one, body.powF64(beta2, step))));
              Value keep1 = body.toF32(beta1),
                    take1 = body.toF32(e.subf(one, beta1));
              Value keep2 = body.toF32(beta2),
                    take2 = body.toF32(e.subf(one, beta2));
              Value epsilon = body.toF32(eps), rate = body.toF32(lr),
                    weightDecay = body.toF32(decay);
              Value first = e.addIndex(
                  e.mulIndex(e.subIndex(block, e.cIndex(firstBlock[t])),
                             e.cIndex(perBlock)),
                  body.thread());
              for (int64_t k = 0; k < kAdamWElements; ++k) {
                Value i = e.addIndex(first, e.cIndex(k * kElementwiseThreads));
                body.ifThen(body.ult(i, e.cIndex(count)), [&] {
                  Value g = body.load(buffer(1), i);
                  Value m = body.load(buffer(2), i), v = body.load(buffer(3), i);
                  Value mi = e.addf(e.mulf(keep1, m), e.mulf(take1, g));
                  Value vi =
                      e.addf(e.mulf(keep2, v), e.mulf(e.mulf(take2, g), g));
                  Value mhat = e.mulf(mi, correction1),
                        vhat = e.mulf(vi, correction2);
                  Value p = body.load(buffer(0), i);
                  Value update =
                      e.addf(e.divf(mhat, e.addf(body.sqrt(vhat), epsilon)),
                             e.mulf(weightDecay, p));
                  body.store(e.subf(p, e.mulf(rate, update)), buffer(0), i);
                  body.store(mi, buffer(2), i);
                  body.store(vi, buffer(3), i);
                });
              }
            });
          }
        });
    add(symbol, grid, kElementwiseThreads, launch);
    return success();
  }

  //--- Embedding ------------------------------------------------------------//
  if (name == "embedding.forward") {
    const int64_t count = call.integer(0), vocab = call.integer(1),
                  dim = call.integer(2);
    perElement(count * dim, [&](Body &body, Value i) {
      QuantizationEmitter &e = body.e;
      Value n = arith::DivUIOp::create(body.b, i, e.cIndex(dim));
      Value c = arith::RemUIOp::create(body.b, i, e.cIndex(dim));
      Value token = body.load(body.arg(1), n);
      // A token outside the vocabulary reads row 0; the trainer checks
      // every batch's tokens before they reach the device.
      Value inside = e.bitAnd(
          e.cmp(CmpIPredicate::sge, token, e.c32(0)),
          e.cmp(CmpIPredicate::slt, token, e.c32(vocab)));
      Value row = body.index(e.select(inside, token, e.c32(0)));
      body.store(body.load(body.arg(0),
                           e.addIndex(e.mulIndex(row, e.cIndex(dim)), c)),
                 body.arg(2), i);
    });
    return success();
  }
  if (name == "embedding.backward") {
    // The CPU adds each token's gradient row into its row of the table in
    // token order. Here the tokens are first listed by row, stably — each
    // chunk of kTokenChunk tokens ranks its tokens among the chunk's equal
    // ones and counts each row's; a prefix over chunks and a scan over rows
    // give every token its place — then a block per row of the table adds
    // its tokens' gradient rows in that order in registers and stores the
    // sum once: the CPU's sums, no atomics, and no row's tokens waiting on
    // another row's (the GPU scanned every token for every block of rows
    // before: 3.6 ms a 125M step on the H200, bound by the rows of the most
    // frequent tokens).
    const int64_t count = call.integer(0), vocab = call.integer(1),
                  dim = call.integer(2);
    const int64_t chunks = ceilDiv(count, kTokenChunk);
    int perChunk = scratch("rows_per_chunk", chunks * vocab * 4);
    int ranks = scratch("ranks", count * 4);
    int starts = scratch("row_starts", (vocab + 1) * 4);
    int order = scratch("by_row", count * 4);
    Type i32 = IntegerType::get(context, 32);
    auto arguments = registryArguments(
        context, call,
        {{"scratch:rows_per_chunk", flat(chunks * vocab, i32)},
         {"scratch:ranks", flat(count, i32)},
         {"scratch:row_starts", flat(vocab + 1, i32)},
         {"scratch:by_row", flat(count, i32)}});
    Launch withScratch = launch;
    withScratch.buffers.insert(withScratch.buffers.end(),
                               {perChunk, ranks, starts, order});
    // Arguments: tokens, dout, dtable, the four scratch buffers, then the
    // scalars count, vocab, dim, accumulate.
    enum { kTokens, kDout, kTable, kPerChunk, kRanks, kStarts, kOrder,
           kAccumulate = 10 };
    // A token of the chunk [start, start + kTokenChunk) (-1 past the
    // tokens, or outside [0, vocab): in no row).
    auto tokenAt = [&](Body &body, Value n) {
      QuantizationEmitter &e = body.e;
      Value inside = body.ult(n, e.cIndex(count));
      Value token = body.load(
          body.arg(kTokens),
          arith::MinUIOp::create(body.b, n, e.cIndex(count - 1)));
      Value valid = e.bitAnd(inside, body.within(body.index(token),
                                                 e.cIndex(0), e.cIndex(vocab)));
      return e.select(valid, token, e.c32(-1));
    };
    // 1. A block per chunk: each token's rank among the chunk's equal
    // tokens before it; the last of each row's writes the row's count.
    std::array<int64_t, 3> chunkGrid{chunks, 1, 1};
    std::string rank = function(
        "rank", arguments, chunkGrid, kTokenChunk, [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value c = body.block(), t = body.thread();
          Value rowBase = e.mulIndex(c, e.cIndex(vocab));
          body.strided(t, e.cIndex(vocab), kTokenChunk, {},
                       [&](Value v, ValueRange) {
                         body.store(e.c32(0), body.arg(kPerChunk),
                                    e.addIndex(rowBase, v));
                         return SmallVector<Value>{};
                       });
          Value tokens = body.sharedArray(kTokenChunk, e.i32());
          Value n = e.addIndex(e.mulIndex(c, e.cIndex(kTokenChunk)), t);
          Value mine = tokenAt(body, n);
          body.store(mine, tokens, t);
          body.barrier();
          SmallVector<Value> found = e.loop(
              e.cIndex(0), e.cIndex(kTokenChunk),
              ValueRange{e.c32(0), e.c32(0)},
              [&](Value m, ValueRange acc) -> SmallVector<Value> {
                Value same = arith::CmpIOp::create(
                    body.b, CmpIPredicate::eq, body.load(tokens, m), mine);
                Value before = e.bitAnd(same, body.ult(m, t));
                Value after = e.bitAnd(same, body.ult(t, m));
                return {e.add(acc[0], e.zext(before, e.i32())),
                        e.bitOr(acc[1], e.zext(after, e.i32()))};
              });
          Value valid = arith::CmpIOp::create(body.b, CmpIPredicate::sge, mine,
                                              e.c32(0));
          body.ifThen(valid, [&] {
            body.store(found[0], body.arg(kRanks), n);
            body.ifThen(arith::CmpIOp::create(body.b, CmpIPredicate::eq,
                                              found[1], e.c32(0)),
                        [&] {
                          body.store(e.add(found[0], e.c32(1)),
                                     body.arg(kPerChunk),
                                     e.addIndex(rowBase, body.index(mine)));
                        });
          });
        });
    add(rank, chunkGrid, kTokenChunk, withScratch);
    // 2. A thread per row: the row's tokens in the chunks before each
    // (in place of its counts), and its total into row_starts.
    std::array<int64_t, 3> rowGrid{ceilDiv(vocab, kElementwiseThreads), 1, 1};
    std::string prefix = function(
        "prefix", arguments, rowGrid, kElementwiseThreads, [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value v = body.global(kElementwiseThreads);
          body.ifThen(body.ult(v, e.cIndex(vocab)), [&] {
            Value total = e.loop(
                e.cIndex(0), e.cIndex(chunks), ValueRange{e.c32(0)},
                [&](Value c, ValueRange acc) -> SmallVector<Value> {
                  Value at = e.addIndex(e.mulIndex(c, e.cIndex(vocab)), v);
                  Value here = body.load(body.arg(kPerChunk), at);
                  body.store(acc[0], body.arg(kPerChunk), at);
                  return {e.add(acc[0], here)};
                })[0];
            body.store(total, body.arg(kStarts), v);
          });
        });
    add(prefix, rowGrid, kElementwiseThreads, withScratch);
    // 3. One block: the rows' totals into their starts (an exclusive scan),
    // row_starts[vocab] the end of the last.
    constexpr int64_t kScanThreads = 1024;
    const int64_t perThread = ceilDiv(vocab, kScanThreads);
    std::array<int64_t, 3> one{1, 1, 1};
    std::string scan = function(
        "scan", arguments, one, kScanThreads, [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value t = body.thread();
          Value first = e.mulIndex(t, e.cIndex(perThread));
          auto rowOf = [&](Value j) { return e.addIndex(first, j); };
          auto inRows = [&](Value v) { return body.ult(v, e.cIndex(vocab)); };
          Value own = e.loop(
              e.cIndex(0), e.cIndex(perThread), ValueRange{e.c32(0)},
              [&](Value j, ValueRange acc) -> SmallVector<Value> {
                Value v = rowOf(j);
                Value x = body.load(
                    body.arg(kStarts),
                    arith::MinUIOp::create(body.b, v, e.cIndex(vocab - 1)));
                return {e.add(acc[0], e.select(inRows(v), x, e.c32(0)))};
              })[0];
          Value sums = body.sharedArray(kScanThreads, e.i32());
          Value inclusive = body.inclusiveScan(own, sums, kScanThreads);
          SmallVector<Value> start{e.sub(inclusive, own)};
          e.loop(e.cIndex(0), e.cIndex(perThread), start,
                 [&](Value j, ValueRange acc) -> SmallVector<Value> {
                   Value v = rowOf(j);
                   Value at =
                       arith::MinUIOp::create(body.b, v, e.cIndex(vocab - 1));
                   Value x = body.load(body.arg(kStarts), at);
                   body.ifThen(inRows(v), [&] {
                     body.store(acc[0], body.arg(kStarts), at);
                   });
                   return {e.add(acc[0], e.select(inRows(v), x, e.c32(0)))};
                 });
          body.ifThen(arith::CmpIOp::create(body.b, CmpIPredicate::eq, t,
                                            e.cIndex(kScanThreads - 1)),
                      [&] {
                        body.store(inclusive, body.arg(kStarts),
                                   e.cIndex(vocab));
                      });
        });
    add(scan, one, kScanThreads, withScratch);
    // 4. A block per chunk: each token's place in the list by row.
    std::string place = function(
        "place", arguments, chunkGrid, kTokenChunk, [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value c = body.block();
          Value n = e.addIndex(e.mulIndex(c, e.cIndex(kTokenChunk)),
                               body.thread());
          Value mine = tokenAt(body, n);
          body.ifThen(arith::CmpIOp::create(body.b, CmpIPredicate::sge, mine,
                                            e.c32(0)),
                      [&] {
                        Value v = body.index(mine);
                        Value at = e.add(
                            e.add(body.load(body.arg(kStarts), v),
                                  body.load(body.arg(kPerChunk),
                                            e.addIndex(e.mulIndex(
                                                           c, e.cIndex(vocab)),
                                                       v))),
                            body.load(body.arg(kRanks), n));
                        body.store(arith::IndexCastOp::create(body.b, e.i32(),
                                                              n),
                                   body.arg(kOrder), body.index(at));
                      });
        });
    add(place, chunkGrid, kTokenChunk, withScratch);
    // 5. A block per row of the table: its tokens' gradient rows added in
    // token order, four columns a thread (16-byte loads) where dim allows,
    // from zero or (accumulate) from the row's value.
    const int64_t lanes = dim % 4 == 0 ? 4 : 1;
    const int64_t groups = ceilDiv(dim, lanes);
    const int64_t threads =
        std::min<int64_t>(kElementwiseThreads, ceilDiv(groups, 32) * 32);
    std::array<int64_t, 3> tableGrid{vocab, 1, 1};
    std::string sums = function(
        "sums", arguments, tableGrid, threads, [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value v = body.block();
          Value begin = body.index(body.load(body.arg(kStarts), v));
          Value end = body.index(
              body.load(body.arg(kStarts), e.addIndex(v, e.cIndex(1))));
          Value accumulate = arith::CmpIOp::create(
              body.b, CmpIPredicate::ne, body.arg(kAccumulate), e.c64(0));
          VectorType vector = VectorType::get({lanes}, e.f32());
          auto loadLanes = [&](Value memory, Value at) -> Value {
            return vector::LoadOp::create(body.b, vector, memory,
                                          ValueRange{at},
                                          /*nontemporal=*/false,
                                          body.b.getI64IntegerAttr(4 * lanes));
          };
          body.strided(body.thread(), e.cIndex(groups), threads, {},
                       [&](Value group, ValueRange) {
            Value column = e.mulIndex(group, e.cIndex(lanes));
            Value at = e.addIndex(e.mulIndex(v, e.cIndex(dim)), column);
            Value zero = arith::ConstantOp::create(
                body.b, DenseElementsAttr::get(vector, 0.0f));
            Value initial = body.ifElse(
                accumulate,
                [&] {
                  return SmallVector<Value>{loadLanes(body.arg(kTable), at)};
                },
                ValueRange{zero})[0];
            auto rowOf = [&](Value k) {
              Value n = body.index(body.load(body.arg(kOrder), k));
              return loadLanes(body.arg(kDout),
                               e.addIndex(e.mulIndex(n, e.cIndex(dim)),
                                          column));
            };
            // Four rows' loads issued before their adds (in order).
            constexpr int64_t kUnroll = 4;
            Value length = e.subIndex(end, begin);
            Value bulkEnd = e.addIndex(
                begin, e.mulIndex(e.divIndex(length, kUnroll),
                                  e.cIndex(kUnroll)));
            Value sum = body.strided(
                begin, bulkEnd, kUnroll, ValueRange{initial},
                [&](Value k, ValueRange acc) {
                  SmallVector<Value> rows;
                  for (int64_t u = 0; u < kUnroll; ++u)
                    rows.push_back(rowOf(e.addIndex(k, e.cIndex(u))));
                  Value s = acc[0];
                  for (Value row : rows)
                    s = arith::AddFOp::create(body.b, s, row);
                  return SmallVector<Value>{s};
                })[0];
            sum = e.loop(bulkEnd, end, ValueRange{sum},
                         [&](Value k, ValueRange acc) -> SmallVector<Value> {
                           return {arith::AddFOp::create(body.b, acc[0],
                                                         rowOf(k))};
                         })[0];
            vector::StoreOp::create(body.b, sum, body.arg(kTable),
                                    ValueRange{at}, /*nontemporal=*/false,
                                    body.b.getI64IntegerAttr(4 * lanes));
            return SmallVector<Value>{};
          });
        });
    add(sums, tableGrid, threads, withScratch);
    return success();
  }

  //--- RMSNorm --------------------------------------------------------------//
  // Its row kernels: a warp (32 threads) per row, kNormRowsPerBlock rows a
  // block, `lanes` columns a load (four where dim allows: 16 bytes); a
  // row's sums over each thread's columns, then across the warp by xor
  // shuffles (every thread gets the same sum), with no barrier.
  auto normLanes = [](int64_t dim) -> int64_t {
    return dim % 4 == 0 ? 4 : dim % 2 == 0 ? 2 : 1;
  };
  auto normRows = [&](Body &body, int64_t rows,
                      function_ref<void(Value row, Value lane)> each) {
    QuantizationEmitter &e = body.e;
    Value tid = body.thread();
    Value lane = arith::RemUIOp::create(body.b, tid, e.cIndex(32));
    Value row = e.addIndex(
        e.mulIndex(body.block(), e.cIndex(kNormRowsPerBlock)),
        arith::DivUIOp::create(body.b, tid, e.cIndex(32)));
    body.ifThen(body.ult(row, e.cIndex(rows)), [&] { each(row, lane); });
  };
  auto loadLanes = [&](Body &body, Value memory, Value at,
                       int64_t lanes) -> SmallVector<Value> {
    Value loaded = vector::LoadOp::create(
        body.b, VectorType::get({lanes}, f32), memory, ValueRange{at},
        /*nontemporal=*/false, body.b.getI64IntegerAttr(4 * lanes));
    SmallVector<Value> values;
    for (int64_t l = 0; l < lanes; ++l)
      values.push_back(
          vector::ExtractOp::create(body.b, loaded, ArrayRef<int64_t>{l}));
    return values;
  };
  auto storeLanes = [&](Body &body, ArrayRef<Value> values, Value memory,
                        Value at) {
    vector::StoreOp::create(
        body.b,
        vector::FromElementsOp::create(
            body.b, VectorType::get({static_cast<int64_t>(values.size())}, f32),
            values),
        memory, ValueRange{at}, /*nontemporal=*/false,
        body.b.getI64IntegerAttr(4 * values.size()));
  };
  // The first column of group g of `lanes` columns.
  auto normColumn = [](QuantizationEmitter &e, Value g, int64_t lanes) {
    return e.mulIndex(g, e.cIndex(lanes));
  };
  auto normGrid = [](int64_t rows) -> std::array<int64_t, 3> {
    return {ceilDiv(rows, kNormRowsPerBlock), 1, 1};
  };
  constexpr int64_t kNormThreads = 32 * kNormRowsPerBlock;
  if (name == "rmsnorm.forward") {
    const int64_t rows = call.integer(0), dim = call.integer(1);
    const int64_t lanes = normLanes(dim), groups = dim / lanes;
    std::string symbol = function(
        bf16Variant, registryArguments(context, call), normGrid(rows),
        kNormThreads, [&](Body &body) {
          QuantizationEmitter &e = body.e;
          normRows(body, rows, [&](Value row, Value lane) {
            Value base = e.mulIndex(row, e.cIndex(dim));
            auto columnOf = [&](Value g) { return normColumn(e, g, lanes); };
            Value sum = body.strided(
                lane, e.cIndex(groups), 32, {body.cF64(0.0)},
                [&](Value g, ValueRange acc) {
                  Value s = acc[0];
                  for (Value x : loadLanes(body, body.arg(0),
                                           e.addIndex(base, columnOf(g)),
                                           lanes)) {
                    Value wide = body.toF64(x);
                    s = e.addf(s, e.mulf(wide, wide));
                  }
                  return SmallVector<Value>{s};
                })[0];
            for (int32_t mask = 16; mask >= 1; mask /= 2)
              sum = e.addf(sum, body.shuffleXorF64(sum, mask, 32));
            Value meanSquare = e.divf(sum, body.cF64(static_cast<double>(dim)));
            Value scale = body.toF32(e.divf(
                body.cF64(1.0), body.sqrt(e.addf(meanSquare, body.arg(6)))));
            body.ifThen(arith::CmpIOp::create(body.b, CmpIPredicate::eq, lane,
                                              e.cIndex(0)),
                        [&] { body.store(scale, body.arg(3), row); });
            body.strided(lane, e.cIndex(groups), 32, {},
                         [&](Value g, ValueRange) {
              Value at = e.addIndex(base, columnOf(g));
              SmallVector<Value> x = loadLanes(body, body.arg(0), at, lanes);
              SmallVector<Value> w =
                  loadLanes(body, body.arg(1), columnOf(g), lanes);
              SmallVector<Value> y;
              for (int64_t l = 0; l < lanes; ++l)
                y.push_back(e.mulf(e.mulf(x[l], scale), w[l]));
              if (!resultAsBF16) {
                storeLanes(body, y, body.arg(2), at);
                return SmallVector<Value>{};
              }
              SmallVector<Value> words; // of two columns
              for (int64_t l = 0; l < lanes; l += 2)
                words.push_back(e.bf16Pair(y[l], y[l + 1]));
              vector::StoreOp::create(
                  body.b,
                  vector::FromElementsOp::create(
                      body.b, VectorType::get({lanes / 2}, e.i32()), words),
                  body.arg(2), ValueRange{e.divIndex(at, 2)},
                  /*nontemporal=*/false, body.b.getI64IntegerAttr(2 * lanes));
              return SmallVector<Value>{};
            });
          });
        });
    add(symbol, normGrid(rows), kNormThreads, launch);
    return success();
  }
  if (name == "rmsnorm.backward") {
    const int64_t rows = call.integer(0), dim = call.integer(1);
    const int64_t lanes = normLanes(dim), groups = dim / lanes;
    // The CPU's operations on each element, one definition for both ways
    // below: a term of dx's row sum, dx's correction rstd^3 sum / dim, an
    // element of dx, and a term of the weight gradient.
    auto dxRowTerm = [](QuantizationEmitter &e, Value dy, Value w, Value x) {
      return e.mulf(e.mulf(dy, w), x);
    };
    auto dxCorrection = [dim](QuantizationEmitter &e, Value scale, Value sum) {
      return e.divf(e.mulf(e.mulf(e.mulf(scale, scale), scale), sum),
                    e.cF32(static_cast<float>(dim)));
    };
    auto dxOf = [](QuantizationEmitter &e, Value scale, Value dy, Value w,
                   Value correction, Value x) {
      return e.subf(e.mulf(e.mulf(scale, dy), w), e.mulf(correction, x));
    };
    auto weightTerm = [](QuantizationEmitter &e, Value dy, Value x,
                         Value scale) { return e.mulf(e.mulf(dy, x), scale); };
    // The weight gradient's partial sums over `chunks` chunks of rows (a
    // scratch buffer, the launch's last argument).
    struct Partials {
      int64_t chunks;
      SmallVector<std::pair<std::string, Type>> arguments;
      Launch launch;
    };
    auto partialsOf = [&](int64_t chunks) {
      Partials p{
          chunks,
          registryArguments(context, call,
                            {{"scratch:partials", flat(chunks * dim, f32)}}),
          launch};
      p.launch.buffers.push_back(scratch("dweight_partials", chunks * dim * 4));
      return p;
    };
    // The weight gradient's last launch: a thread per column adds the
    // partials in order to its start.
    auto addPartials = [&](const Partials &partials) {
      const int64_t chunks = partials.chunks;
      std::array<int64_t, 3> columnGrid{ceilDiv(dim, kRowThreads), 1, 1};
      std::string dweight = function(
          "dweight", partials.arguments, columnGrid, kRowThreads,
          [&](Body &body) {
            QuantizationEmitter &e = body.e;
            Value c = body.global(kRowThreads);
            body.ifThen(body.ult(c, e.cIndex(dim)), [&] {
              Value accumulate = arith::CmpIOp::create(
                  body.b, CmpIPredicate::ne, body.arg(9), e.c64(0));
              Value start =
                  e.select(accumulate, body.load(body.arg(5), c), e.cF32(0.0f));
              Value sum = e.loop(
                  e.cIndex(0), e.cIndex(chunks), ValueRange{start},
                  [&](Value k, ValueRange acc) {
                    return SmallVector<Value>{e.addf(
                        acc[0],
                        body.load(
                            body.arg(6),
                            e.addIndex(e.mulIndex(k, e.cIndex(dim)), c)))};
                  })[0];
              body.store(sum, body.arg(5), c);
            });
          });
      add(dweight, columnGrid, kRowThreads, partials.launch);
    };
    // One pass where a row fits a warp's registers: a block per
    // kFusedNormRows rows, a warp per row as below, each of its rows' dy,
    // weight and x loaded once for both of dx's sums, and the weight
    // gradient's terms dy * x * rstd summed by each lane for its columns
    // over the warp's rows in order, then the block's warps in order into
    // the block's partial sum (through shared memory) — x and dy read once
    // instead of twice. (A GPU step's rows, its GEMMs' M, are a multiple
    // of 32; rows past the end are skipped all the same.) On an H100 at
    // llama_125m's shape 4.87 -> 2.82 ms a step, of which the last
    // launch's sums of 1,024 partials a column 0.80 (docs/benchmarks.md);
    // the weight gradient summed in another order than below.
    const int64_t groupsPerLane = ceilDiv(groups, 32);
    if (groupsPerLane <= kFusedNormGroups) {
      const Partials partials = partialsOf(ceilDiv(rows, kFusedNormRows));
      std::array<int64_t, 3> grid{partials.chunks, 1, 1};
      std::string fused = function(
          "rows", partials.arguments, grid, kNormThreads, [&](Body &body) {
            QuantizationEmitter &e = body.e;
            Value tid = body.thread();
            Value lane = arith::RemUIOp::create(body.b, tid, e.cIndex(32));
            Value warp = arith::DivUIOp::create(body.b, tid, e.cIndex(32));
            Value firstRow = e.mulIndex(body.block(), e.cIndex(kFusedNormRows));
            // The lane's groups lane, lane + 32, ...: their first columns
            // (clamped into the row) and whether each is one of the row's.
            SmallVector<Value> column, inRow;
            for (int64_t j = 0; j < groupsPerLane; ++j) {
              Value g = e.addIndex(lane, e.cIndex(32 * j));
              inRow.push_back(body.ult(g, e.cIndex(groups)));
              column.push_back(normColumn(
                  e, arith::MinUIOp::create(body.b, g, e.cIndex(groups - 1)),
                  lanes));
            }
            SmallVector<SmallVector<Value>> w;
            for (int64_t j = 0; j < groupsPerLane; ++j)
              w.push_back(loadLanes(body, body.arg(1), column[j], lanes));
            SmallVector<Value> zeros(groupsPerLane * lanes, e.cF32(0.0f));
            SmallVector<Value> sums = body.strided(
                warp, e.cIndex(kFusedNormRows), kNormRowsPerBlock, zeros,
                [&](Value r, ValueRange acc) {
                  Value row = e.addIndex(firstRow, r);
                  Value real = body.ult(row, e.cIndex(rows));
                  Value at0 = e.mulIndex(
                      arith::MinUIOp::create(body.b, row, e.cIndex(rows - 1)),
                      e.cIndex(dim));
                  SmallVector<SmallVector<Value>> dy, x;
                  for (int64_t j = 0; j < groupsPerLane; ++j) {
                    Value at = e.addIndex(at0, column[j]);
                    dy.push_back(loadLanes(body, body.arg(3), at, lanes));
                    x.push_back(loadLanes(body, body.arg(0), at, lanes));
                  }
                  // dx's row sum, as the kernel below sums it.
                  Value gx = e.cF32(0.0f);
                  for (int64_t j = 0; j < groupsPerLane; ++j) {
                    Value s = gx;
                    for (int64_t l = 0; l < lanes; ++l)
                      s = e.addf(s, dxRowTerm(e, dy[j][l], w[j][l], x[j][l]));
                    gx = e.select(inRow[j], s, gx);
                  }
                  for (int32_t mask = 16; mask >= 1; mask /= 2)
                    gx = e.addf(gx, body.shuffleXor(gx, mask, 32));
                  Value scale = body.load(
                      body.arg(2),
                      arith::MinUIOp::create(body.b, row, e.cIndex(rows - 1)));
                  Value correction = dxCorrection(e, scale, gx);
                  SmallVector<Value> next(acc);
                  for (int64_t j = 0; j < groupsPerLane; ++j) {
                    SmallVector<Value> values;
                    for (int64_t l = 0; l < lanes; ++l) {
                      values.push_back(dxOf(e, scale, dy[j][l], w[j][l],
                                            correction, x[j][l]));
                      Value &sum = next[j * lanes + l];
                      sum = e.select(
                          e.bitAnd(real, inRow[j]),
                          e.addf(sum, weightTerm(e, dy[j][l], x[j][l], scale)),
                          sum);
                    }
                    body.ifThen(e.bitAnd(real, inRow[j]), [&] {
                      storeLanes(body, values, body.arg(4),
                                 e.addIndex(at0, column[j]));
                    });
                  }
                  return next;
                });
            // The warps' sums in order: each warp's into its row of shared
            // memory, then a thread per column adds them.
            Value staged = body.sharedArray(kNormRowsPerBlock * dim, f32);
            for (int64_t j = 0; j < groupsPerLane; ++j)
              body.ifThen(inRow[j], [&] {
                Value at =
                    e.addIndex(e.mulIndex(warp, e.cIndex(dim)), column[j]);
                for (int64_t l = 0; l < lanes; ++l)
                  body.store(sums[j * lanes + l], staged,
                             e.addIndex(at, e.cIndex(l)));
              });
            body.barrier();
            body.strided(
                tid, e.cIndex(dim), kNormThreads, {}, [&](Value c, ValueRange) {
                  Value sum = body.load(staged, c);
                  for (int64_t k = 1; k < kNormRowsPerBlock; ++k)
                    sum = e.addf(
                        sum,
                        body.load(staged, e.addIndex(c, e.cIndex(k * dim))));
                  body.store(
                      sum, body.arg(6),
                      e.addIndex(e.mulIndex(body.block(), e.cIndex(dim)), c));
                  return SmallVector<Value>{};
                });
          });
      add(fused, grid, kNormThreads, partials.launch);
      addPartials(partials);
      return success();
    }
    // dx: the CPU's operations on each element; the row's sum of
    // dy * weight * x in another order (each thread's columns, then the
    // warp's tree).
    std::string dx = function(
        "dx", registryArguments(context, call), normGrid(rows), kNormThreads,
        [&](Body &body) {
          QuantizationEmitter &e = body.e;
          normRows(body, rows, [&](Value row, Value lane) {
            Value base = e.mulIndex(row, e.cIndex(dim));
            // Group g's element index and its dy, weight and x values.
            struct Terms {
              Value at;
              SmallVector<Value> dy, w, x;
            };
            auto termsOf = [&](Value g) {
              Value column = normColumn(e, g, lanes);
              Value at = e.addIndex(base, column);
              return Terms{at, loadLanes(body, body.arg(3), at, lanes),
                           loadLanes(body, body.arg(1), column, lanes),
                           loadLanes(body, body.arg(0), at, lanes)};
            };
            Value gx = body.strided(
                lane, e.cIndex(groups), 32, {e.cF32(0.0f)},
                [&](Value g, ValueRange acc) {
                  Terms t = termsOf(g);
                  Value s = acc[0];
                  for (int64_t l = 0; l < lanes; ++l)
                    s = e.addf(s, dxRowTerm(e, t.dy[l], t.w[l], t.x[l]));
                  return SmallVector<Value>{s};
                })[0];
            for (int32_t mask = 16; mask >= 1; mask /= 2)
              gx = e.addf(gx, body.shuffleXor(gx, mask, 32));
            Value scale = body.load(body.arg(2), row);
            Value correction = dxCorrection(e, scale, gx);
            body.strided(lane, e.cIndex(groups), 32, {},
                         [&](Value g, ValueRange) {
              Terms t = termsOf(g);
              SmallVector<Value> values;
              for (int64_t l = 0; l < lanes; ++l)
                values.push_back(
                    dxOf(e, scale, t.dy[l], t.w[l], correction, t.x[l]));
              storeLanes(body, values, body.arg(4), t.at);
              return SmallVector<Value>{};
            });
          });
        });
    add(dx, normGrid(rows), kNormThreads, launch);
    // dweight: a thread per column sums a chunk of rows in order into a
    // partial; then a thread per column adds the chunks' partials in order
    // to its start (the CPU sums all rows in order: the same sum but for
    // its rounding).
    const Partials partials = partialsOf(ceilDiv(rows, kWeightGradientRows));
    std::array<int64_t, 3> chunkGrid{ceilDiv(dim, kRowThreads), partials.chunks,
                                     1};
    std::string chunkSums = function(
        "dweight_chunks", partials.arguments, chunkGrid, kRowThreads,
        [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value c = body.global(kRowThreads);
          Value chunk = body.block(gpu::Dimension::y);
          Value first = e.mulIndex(chunk, e.cIndex(kWeightGradientRows));
          Value last = arith::MinUIOp::create(
              body.b, e.addIndex(first, e.cIndex(kWeightGradientRows)),
              e.cIndex(rows));
          body.ifThen(body.ult(c, e.cIndex(dim)), [&] {
            Value sum = e.loop(first, last, ValueRange{e.cF32(0.0f)},
                               [&](Value r, ValueRange acc) {
                                 Value at = e.addIndex(
                                     e.mulIndex(r, e.cIndex(dim)), c);
                                 Value term = weightTerm(
                                     e, body.load(body.arg(3), at),
                                     body.load(body.arg(0), at),
                                     body.load(body.arg(2), r));
                                 return SmallVector<Value>{
                                     e.addf(acc[0], term)};
                               })[0];
            body.store(sum, body.arg(6),
                       e.addIndex(e.mulIndex(chunk, e.cIndex(dim)), c));
          });
        });
    add(chunkSums, chunkGrid, kRowThreads, partials.launch);
    addPartials(partials);
    return success();
  }

  //--- RoPE -----------------------------------------------------------------//
  if (name == "rope.forward" || name == "rope.backward") {
    const int64_t batch = call.integer(0), seq = call.integer(1),
                  heads = call.integer(2), headDim = call.integer(3);
    const double theta = call.real(4);
    const int64_t pairs = headDim / 2;
    const bool inverse = name == "rope.backward";
    // The tables, shared by every RoPE function of this shape.
    uint64_t thetaBits;
    std::memcpy(&thetaBits, &theta, sizeof(theta));
    std::string tableName = fmt::format("rope_table_{}_{}_{}", seq, headDim,
                                        llvm::utohexstr(thetaBits));
    Attribute global = gpu::AddressSpaceAttr::get(context,
                                                  gpu::AddressSpace::Global);
    auto tableType = MemRefType::get({seq * pairs}, f32, nullptr, global);
    for (const char *which : {"_cos", "_sin"}) {
      std::string symbol = tableName + which;
      if (library_.lookupSymbol(symbol))
        continue;
      std::vector<float> values(seq * pairs);
      for (int64_t p = 0; p < seq; ++p)
        for (int64_t i = 0; i < pairs; ++i) {
          float c, s;
          kernels::ropeCosSin(p, i, headDim, theta, c, s);
          values[p * pairs + i] = which[1] == 'c' ? c : s;
        }
      OpBuilder builder = OpBuilder::atBlockBegin(library_.getBody());
      memref::GlobalOp::create(
          builder, loc, symbol, builder.getStringAttr("private"), tableType,
          DenseElementsAttr::get(
              RankedTensorType::get({seq * pairs}, f32),
              ArrayRef<float>(values)),
          /*constant=*/true, builder.getI64IntegerAttr(16));
    }
    perElement(batch * seq * heads * pairs, [&](Body &body, Value i) {
      QuantizationEmitter &e = body.e;
      Value cosines = memref::GetGlobalOp::create(body.b, tableType,
                                                  tableName + "_cos");
      Value sines = memref::GetGlobalOp::create(body.b, tableType,
                                                tableName + "_sin");
      Value pair = arith::RemUIOp::create(body.b, i, e.cIndex(pairs));
      Value rowHead = arith::DivUIOp::create(body.b, i, e.cIndex(pairs));
      Value head = arith::RemUIOp::create(body.b, rowHead, e.cIndex(heads));
      Value row = arith::DivUIOp::create(body.b, rowHead, e.cIndex(heads));
      Value position = arith::RemUIOp::create(body.b, row, e.cIndex(seq));
      Value at = e.addIndex(e.mulIndex(position, e.cIndex(pairs)), pair);
      Value c = body.load(cosines, at), s = body.load(sines, at);
      if (inverse)
        s = arith::NegFOp::create(body.b, s);
      Value base = e.addIndex(
          e.addIndex(e.mulIndex(row, e.cIndex(heads * headDim)),
                     e.mulIndex(head, e.cIndex(headDim))),
          e.mulIndex(pair, e.cIndex(2)));
      Value next = e.addIndex(base, e.cIndex(1));
      Value x0 = body.load(body.arg(0), base), x1 = body.load(body.arg(0), next);
      Value y0 = e.subf(e.mulf(x0, c), e.mulf(x1, s));
      Value y1 = e.addf(e.mulf(x0, s), e.mulf(x1, c));
      if (resultAsBF16) {
        body.store(e.bf16Pair(y0, y1), body.arg(1), e.divIndex(base, 2));
        return;
      }
      body.store(y0, body.arg(1), base);
      body.store(y1, body.arg(1), next);
    });
    return success();
  }

  //--- Attention ------------------------------------------------------------//
  if (name == "attention.forward" || name == "attention.backward") {
    const int64_t batch = call.integer(0), seq = call.integer(1),
                  heads = call.integer(2), kvHeads = call.integer(3),
                  hd = call.integer(4);
    const bool bf16Operands = call.integer(5) != 0;
    const int64_t group = heads / kvHeads;
    const float scaleValue = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t qStride = heads * hd, kvStride = kvHeads * hd;
    // What a product sees of x: itself, or x rounded to BF16.
    auto operand = [&](Body &body, Value x) {
      return bf16Operands ? body.e.roundToBF16(x) : x;
    };
    // Loads hd consecutive floats from `memory` at `at` (as they are).
    auto vector = [&](Body &body, Value memory, Value at) {
      SmallVector<Value> values;
      for (int64_t d = 0; d < hd; ++d)
        values.push_back(
            body.load(memory, body.e.addIndex(at, body.e.cIndex(d))));
      return values;
    };
    // ... as a product's operand.
    auto operands = [&](Body &body, Value memory, Value at) {
      SmallVector<Value> values = vector(body, memory, at);
      for (Value &value : values)
        value = operand(body, value);
      return values;
    };
    // sum_d a[d] * b[d], d in order (the CPU's panel products).
    auto dotInOrder = [&](Body &body, ArrayRef<Value> a, ArrayRef<Value> b) {
      Value sum = body.e.mulf(a[0], b[0]);
      for (int64_t d = 1; d < hd; ++d)
        sum = body.e.addf(sum, body.e.mulf(a[d], b[d]));
      return sum;
    };
    const int64_t queryRows = batch * heads * seq;
    std::array<int64_t, 3> queryGrid{ceilDiv(queryRows, kRowThreads), 1, 1};
    // A thread per query row r = (b, h, t) of [batch, heads, seq].
    auto queryRow = [&](Body &body,
                        function_ref<void(Value b, Value h, Value t)> each) {
      QuantizationEmitter &e = body.e;
      Value r = body.global(kRowThreads);
      body.ifThen(body.ult(r, e.cIndex(queryRows)), [&] {
        Value t = arith::RemUIOp::create(body.b, r, e.cIndex(seq));
        Value bh = arith::DivUIOp::create(body.b, r, e.cIndex(seq));
        Value h = arith::RemUIOp::create(body.b, bh, e.cIndex(heads));
        Value b = arith::DivUIOp::create(body.b, bh, e.cIndex(heads));
        each(b, h, t);
      });
    };
    auto queryAt = [&](Body &body, Value b, Value t, Value h) {
      QuantizationEmitter &e = body.e;
      return e.addIndex(
          e.mulIndex(e.addIndex(e.mulIndex(b, e.cIndex(seq)), t),
                     e.cIndex(qStride)),
          e.mulIndex(h, e.cIndex(hd)));
    };
    auto keyAt = [&](Body &body, Value b, Value t, Value g) {
      QuantizationEmitter &e = body.e;
      return e.addIndex(
          e.mulIndex(e.addIndex(e.mulIndex(b, e.cIndex(seq)), t),
                     e.cIndex(kvStride)),
          e.mulIndex(g, e.cIndex(hd)));
    };
    auto statAt = [&](Body &body, Value b, Value h, Value t) {
      QuantizationEmitter &e = body.e;
      return e.addIndex(
          e.mulIndex(e.addIndex(e.mulIndex(b, e.cIndex(heads)), h),
                     e.cIndex(seq)),
          t);
    };

    // On the matrix units where the plan applies.
    const AttentionGeometry geometry{batch, seq, heads, kvHeads, hd,
                                     bf16Operands};
    auto tilingOf = [&](AttentionPass pass) -> std::optional<AttentionTiling> {
      if (!attentionTile_)
        return std::nullopt;
      return tileAttention(*attentionTile_, geometry, pass);
    };
    auto tiled = [&](AttentionPass pass, const std::string &variant) {
      AttentionTiling tiling = *tilingOf(pass);
      std::array<int64_t, 3> grid = attentionGrid(geometry, pass, tiling);
      const int64_t threads = tiling.warps() * attentionTile_->lanes();
      std::string symbol = function(
          variant, registryArguments(context, call), grid, threads,
          [&](Body &body) {
            buildTiledAttention(body, *attentionTile_, geometry, pass, tiling);
          });
      add(symbol, grid, threads, launch);
    };
    if (name == "attention.forward" && tilingOf(AttentionPass::Forward)) {
      tiled(AttentionPass::Forward, "tiles");
      return success();
    }
    if (name == "attention.backward" &&
        tilingOf(AttentionPass::QueryGradients) &&
        tilingOf(AttentionPass::KeyValueGradients)) {
      // dQ, whose blocks also write their rows' delta_i = dout_i . out_i,
      // then dK and dV.
      tiled(AttentionPass::QueryGradients, "dq_tiles");
      tiled(AttentionPass::KeyValueGradients, "dkv_tiles");
      return success();
    }

    // Elsewhere a thread per row, the CPU's loops.
    if (name == "attention.forward") {
      std::string symbol = function(
          "", registryArguments(context, call), queryGrid, kRowThreads,
          [&](Body &body) {
            queryRow(body, [&](Value b, Value h, Value t) {
              QuantizationEmitter &e = body.e;
              Value g = arith::DivUIOp::create(body.b, h, e.cIndex(group));
              SmallVector<Value> q = operands(body, body.arg(0),
                                              queryAt(body, b, t, h));
              Value count = e.addIndex(t, e.cIndex(1));
              Value scale = e.cF32(scaleValue);
              auto score = [&](Value j) {
                SmallVector<Value> k =
                    operands(body, body.arg(1), keyAt(body, b, j, g));
                return e.mulf(dotInOrder(body, q, k), scale);
              };
              Value maximum =
                  e.loop(e.cIndex(0), count, ValueRange{e.cF32(-INFINITY)},
                         [&](Value j, ValueRange acc) {
                           Value s = score(j);
                           Value larger =
                               e.cmpf(CmpFPredicate::OGT, s, acc[0]);
                           return SmallVector<Value>{
                               e.select(larger, s, acc[0])};
                         })[0];
              // f32: O = sum_j exp(s_j - max) v_j / sum, one sweep. BF16
              // operands: the sum first, then O = sum_j round(exp(s_j -
              // lse)) v_j (the backward's P).
              SmallVector<Value> init(bf16Operands ? 0 : hd, e.cF32(0.0f));
              init.push_back(body.cF64(0.0));
              SmallVector<Value> acc = e.loop(
                  e.cIndex(0), count, init, [&](Value j, ValueRange carried) {
                    Value p = e.fastExp(e.subf(score(j), maximum));
                    SmallVector<Value> next;
                    if (!bf16Operands) {
                      SmallVector<Value> v =
                          vector(body, body.arg(2), keyAt(body, b, j, g));
                      for (int64_t d = 0; d < hd; ++d)
                        next.push_back(e.addf(carried[d], e.mulf(p, v[d])));
                    }
                    next.push_back(e.addf(carried.back(), body.toF64(p)));
                    return next;
                  });
              Value sum = acc.back();
              Value lse = body.toF32(
                  e.addf(body.toF64(maximum), body.logF64(sum)));
              Value inverse = body.toF32(e.divf(body.cF64(1.0), sum));
              if (bf16Operands) {
                acc = e.loop(e.cIndex(0), count,
                             SmallVector<Value>(hd, e.cF32(0.0f)),
                             [&](Value j, ValueRange carried) {
                               Value p = operand(body, e.fastExp(
                                   e.subf(score(j), lse)));
                               SmallVector<Value> v = operands(
                                   body, body.arg(2), keyAt(body, b, j, g));
                               SmallVector<Value> next;
                               for (int64_t d = 0; d < hd; ++d)
                                 next.push_back(
                                     e.addf(carried[d], e.mulf(p, v[d])));
                               return next;
                             });
                inverse = e.cF32(1.0f);
              }
              Value out = queryAt(body, b, t, h);
              for (int64_t d = 0; d < hd; ++d)
                body.store(e.mulf(acc[d], inverse), body.arg(3),
                           e.addIndex(out, e.cIndex(d)));
              body.store(lse, body.arg(4), statAt(body, b, h, t));
            });
          });
      add(symbol, queryGrid, kRowThreads, launch);
      return success();
    }

    // Backward, pass 1 (a thread per query row i): delta_i and dq_i.
    std::string queries = function(
        "dq", registryArguments(context, call), queryGrid, kRowThreads,
        [&](Body &body) {
          queryRow(body, [&](Value b, Value h, Value i) {
            QuantizationEmitter &e = body.e;
            Value g = arith::DivUIOp::create(body.b, h, e.cIndex(group));
            Value at = queryAt(body, b, i, h);
            SmallVector<Value> q = operands(body, body.arg(0), at);
            SmallVector<Value> dout = operands(body, body.arg(5), at);
            Value delta = dotInLanes(body.e, vector(body, body.arg(5), at),
                                     vector(body, body.arg(3), at));
            Value stat = statAt(body, b, h, i);
            Value lse = body.load(body.arg(4), stat);
            body.store(delta, body.arg(9), stat);
            SmallVector<Value> init(hd, e.cF32(0.0f));
            SmallVector<Value> acc = e.loop(
                e.cIndex(0), e.addIndex(i, e.cIndex(1)), init,
                [&](Value j, ValueRange carried) {
                  Value kv = keyAt(body, b, j, g);
                  SmallVector<Value> k = operands(body, body.arg(1), kv);
                  SmallVector<Value> v = operands(body, body.arg(2), kv);
                  Value p = e.fastExp(e.subf(
                      e.mulf(dotInOrder(body, q, k), e.cF32(scaleValue)), lse));
                  Value dp = dotInOrder(body, dout, v);
                  Value alpha = operand(body, e.mulf(p, e.subf(dp, delta)));
                  SmallVector<Value> next;
                  for (int64_t d = 0; d < hd; ++d)
                    next.push_back(e.addf(carried[d], e.mulf(alpha, k[d])));
                  return next;
                });
            for (int64_t d = 0; d < hd; ++d)
              body.store(e.mulf(acc[d], e.cF32(scaleValue)), body.arg(6),
                         e.addIndex(at, e.cIndex(d)));
          });
        });
    add(queries, queryGrid, kRowThreads, launch);

    // Pass 2 (a thread per key row j of kv head g): dk_j and dv_j over the
    // group's query heads and rows i >= j, in order.
    const int64_t keyRows = batch * kvHeads * seq;
    std::array<int64_t, 3> keyGrid{ceilDiv(keyRows, kRowThreads), 1, 1};
    std::string keys = function(
        "dkv", registryArguments(context, call), keyGrid, kRowThreads,
        [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value r = body.global(kRowThreads);
          body.ifThen(body.ult(r, e.cIndex(keyRows)), [&] {
            Value j = arith::RemUIOp::create(body.b, r, e.cIndex(seq));
            Value bg = arith::DivUIOp::create(body.b, r, e.cIndex(seq));
            Value g = arith::RemUIOp::create(body.b, bg, e.cIndex(kvHeads));
            Value b = arith::DivUIOp::create(body.b, bg, e.cIndex(kvHeads));
            Value kv = keyAt(body, b, j, g);
            SmallVector<Value> k = operands(body, body.arg(1), kv);
            SmallVector<Value> v = operands(body, body.arg(2), kv);
            SmallVector<Value> acc(2 * hd, e.cF32(0.0f)); // dk, dv
            for (int64_t member = 0; member < group; ++member) {
              Value h = e.addIndex(e.mulIndex(g, e.cIndex(group)),
                                   e.cIndex(member));
              acc = e.loop(
                  j, e.cIndex(seq), acc, [&](Value i, ValueRange carried) {
                    Value at = queryAt(body, b, i, h);
                    SmallVector<Value> q = operands(body, body.arg(0), at);
                    SmallVector<Value> dout = operands(body, body.arg(5), at);
                    Value stat = statAt(body, b, h, i);
                    Value p = e.fastExp(
                        e.subf(e.mulf(dotInOrder(body, k, q),
                                      e.cF32(scaleValue)),
                               body.load(body.arg(4), stat)));
                    Value dp = dotInOrder(body, v, dout);
                    Value alpha = operand(
                        body,
                        e.mulf(p, e.subf(dp, body.load(body.arg(9), stat))));
                    Value pOperand = operand(body, p);
                    SmallVector<Value> next;
                    for (int64_t d = 0; d < hd; ++d)
                      next.push_back(e.addf(carried[d], e.mulf(alpha, q[d])));
                    for (int64_t d = 0; d < hd; ++d)
                      next.push_back(e.addf(carried[hd + d],
                                            e.mulf(pOperand, dout[d])));
                    return next;
                  });
            }
            for (int64_t d = 0; d < hd; ++d) {
              Value to = e.addIndex(kv, e.cIndex(d));
              body.store(e.mulf(acc[d], e.cF32(scaleValue)), body.arg(7), to);
              body.store(acc[hd + d], body.arg(8), to);
            }
          });
        });
    add(keys, keyGrid, kRowThreads, launch);
    return success();
  }

  //--- Cross-entropy --------------------------------------------------------//
  if (name == "cross_entropy.forward") {
    const int64_t rows = call.integer(0), vocab = call.integer(1);
    int rowLosses = scratch("row_losses", rows * 8);
    auto arguments = registryArguments(context, call,
                                       {{"scratch:row_losses", flat(rows, f64)}});
    Launch withScratch = launch;
    withScratch.buffers.push_back(rowLosses);
    // With the logits' loss parts (LossParts): their pairs (m, sum) of each
    // row merged as the logits are below, a pair for a group of columns.
    auto perRowArguments =
        parts ? registryArguments(
                    context, call,
                    {{"scratch:row_losses", flat(rows, f64)},
                     {"loss_parts", flat(2 * rows * parts->slabs, f64)}})
              : arguments;
    Launch perRowLaunch = withScratch;
    if (parts)
      perRowLaunch.buffers.push_back(parts->buffer);
    // A block per row: lse and the row's loss in fp64, the row read once.
    // Its threads read four columns at a time (16-byte loads) where the
    // vocabulary allows, each keeping the largest logit it has seen, m,
    // and the fp64 sum of exp(x - m) over its columns, scaled by exp(m -
    // m') when m grows to m'; the block then scales each thread's sum by
    // exp(m - M) to the row's largest, M. The same exponentials as the
    // CPU's exp(x - M) but for the roundings of those factors (about 2^-24
    // relative each, a few a thread): lse within an fp32 ulp. (Two sweeps,
    // the maximum first, read the 125M step's 6.6 GB of logits twice: 4.14
    // ms on an H100, the second sweep missing L2. Blocks of 1,024 threads,
    // so few rows are read at once and the second sweep finds its row in
    // L2, took 4.3 ms instead of 3.0 ms on the H200: a block per
    // multiprocessor, idle at its barriers.)
    // From loss parts (the logits' GEMM's epilogue summed each slab of a
    // row so: its largest logit m and the sum of fastExp(x - m)), the
    // same merge a part at a time, where a part's sum is scaled by
    // exp(m_part - m) (exactly 1 where m_part is the largest): the logits
    // are read at the targets alone.
    const int64_t lanes = vocab % 4 == 0 ? 4 : 1;
    std::array<int64_t, 3> rowGrid{rows, 1, 1};
    std::string perRow = function(
        parts ? "rows_from_parts" : "rows", perRowArguments, rowGrid,
        kRowThreads, [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value shared = body.sharedArray(kRowThreads, f64);
          Value row = body.block(), tid = body.thread();
          Value base = e.mulIndex(row, e.cIndex(vocab));
          auto larger = [&](Value a, Value b) {
            return e.select(e.cmpf(CmpFPredicate::OGT, a, b), a, b);
          };
          // The sum so far, scaled to a new largest logit m (where it grew).
          auto rescaled = [&](ValueRange acc, Value m) {
            return body.ifElse(
                e.cmpf(CmpFPredicate::OGT, m, acc[0]),
                [&] {
                  return SmallVector<Value>{
                      e.mulf(acc[1], body.toF64(e.fastExp(e.subf(acc[0], m))))};
                },
                ValueRange{acc[1]})[0];
          };
          auto fromLogits = [&] {
            return body.strided(
                tid, e.cIndex(vocab / lanes), kRowThreads,
                ValueRange{e.cF32(-INFINITY), body.cF64(0.0)},
                [&](Value group, ValueRange acc) {
                  Value x = vector::LoadOp::create(
                      body.b, VectorType::get({lanes}, f32), body.arg(0),
                      ValueRange{
                          e.addIndex(base, e.mulIndex(group, e.cIndex(lanes)))},
                      /*nontemporal=*/false,
                      body.b.getI64IntegerAttr(4 * lanes));
                  SmallVector<Value> xs;
                  for (int64_t l = 0; l < lanes; ++l)
                    xs.push_back(vector::ExtractOp::create(
                        body.b, x, ArrayRef<int64_t>{l}));
                  Value m = acc[0];
                  for (Value v : xs)
                    m = larger(v, m);
                  Value sum = rescaled(acc, m);
                  for (Value v : xs)
                    sum = e.addf(sum, body.toF64(e.fastExp(e.subf(v, m))));
                  return SmallVector<Value>{m, sum};
                });
          };
          auto fromParts = [&] {
            return body.strided(
                tid, e.cIndex(parts->slabs), kRowThreads,
                ValueRange{e.cF32(-INFINITY), body.cF64(0.0)},
                [&](Value slab, ValueRange acc) {
                  Value pair = vector::LoadOp::create(
                      body.b, VectorType::get({2}, f64), body.arg(5),
                      ValueRange{e.mulIndex(
                          e.addIndex(e.mulIndex(row, e.cIndex(parts->slabs)),
                                     slab),
                          e.cIndex(2))},
                      /*nontemporal=*/false, body.b.getI64IntegerAttr(16));
                  Value top = body.toF32(vector::ExtractOp::create(
                      body.b, pair, ArrayRef<int64_t>{0}));
                  Value partSum = vector::ExtractOp::create(
                      body.b, pair, ArrayRef<int64_t>{1});
                  Value m = larger(top, acc[0]);
                  Value sum = rescaled(acc, m);
                  return SmallVector<Value>{
                      m, e.addf(sum,
                                e.mulf(partSum, rescaleToLargest(e, top, m)))};
                });
          };
          SmallVector<Value> online = parts ? fromParts() : fromLogits();
          Value maximum32 = body.toF32(
              body.reduce(body.toF64(online[0]), shared, kRowThreads, larger));
          // A thread that saw no column (or only -inf) adds nothing.
          Value partial = e.select(
              e.cmpf(CmpFPredicate::OEQ, online[1], body.cF64(0.0)), online[1],
              e.mulf(online[1],
                     body.toF64(e.fastExp(e.subf(online[0], maximum32)))));
          Value sum = body.reduce(partial, shared, kRowThreads,
                                  [&](Value a, Value b) { return e.addf(a, b); });
          Value lse = e.addf(body.toF64(maximum32), body.logF64(sum));
          body.ifThen(arith::CmpIOp::create(body.b, CmpIPredicate::eq, tid,
                                            e.cIndex(0)),
                      [&] {
                        body.store(body.toF32(lse), body.arg(3), row);
                        Value target = body.index(body.load(body.arg(1), row));
                        Value logit = body.load(body.arg(0),
                                                e.addIndex(base, target));
                        body.store(e.subf(lse, body.toF64(logit)),
                                   body.arg(4), row);
                      });
        });
    add(perRow, rowGrid, kRowThreads, perRowLaunch);
    // The rows' losses summed in order, as the CPU does: the block stages
    // kRowThreads of them at a time in shared memory, and every thread adds
    // them in order, kLossesAhead loaded before their adds (one thread's
    // loop of dependent loads and adds took 0.54 ms for 32K rows).
    constexpr int64_t kLossesAhead = 16;
    std::array<int64_t, 3> one{1, 1, 1};
    std::string total = function(
        "total", arguments, one, kRowThreads, [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value staged = body.sharedArray(kRowThreads, f64);
          Value tid = body.thread();
          Value sum = body.strided(
              e.cIndex(0), e.cIndex(rows), kRowThreads,
              ValueRange{body.cF64(0.0)}, [&](Value start, ValueRange acc) {
                Value n = e.addIndex(start, tid);
                body.barrier();
                body.store(body.load(body.arg(4),
                                     arith::MinUIOp::create(
                                         body.b, n, e.cIndex(rows - 1))),
                           staged, tid);
                body.barrier();
                return body.strided(
                    e.cIndex(0), e.cIndex(kRowThreads), kLossesAhead,
                    ValueRange{acc[0]}, [&](Value j, ValueRange partial) {
                      SmallVector<Value> losses;
                      for (int64_t u = 0; u < kLossesAhead; ++u)
                        losses.push_back(body.load(
                            staged, e.addIndex(j, e.cIndex(u))));
                      Value s = partial[0];
                      for (int64_t u = 0; u < kLossesAhead; ++u)
                        s = e.select(
                            body.ult(e.addIndex(e.addIndex(start, j),
                                                e.cIndex(u)),
                                     e.cIndex(rows)),
                            e.addf(s, losses[u]), s);
                      return SmallVector<Value>{s};
                    });
              })[0];
          body.ifThen(arith::CmpIOp::create(body.b, CmpIPredicate::eq, tid,
                                            e.cIndex(0)),
                      [&] {
                        body.store(body.toF32(e.divf(
                                       sum, body.cF64(static_cast<double>(rows)))),
                                   body.arg(2), e.cIndex(0));
                      });
        });
    add(total, one, kRowThreads, withScratch);
    return success();
  }
  if (name == "cross_entropy.backward") {
    // A block per (row, 2,048 columns): the row's lse, target and factor
    // read once a thread, eight columns a thread (two 16-byte loads) where
    // the vocabulary allows. With `resultAsBF16` the gradient is written as
    // the codes (i32 words of two, nearest even) that a BF16 operand's
    // rounding prologue would make of it: the fp32 gradient never exists.
    const int64_t rows = call.integer(0), vocab = call.integer(1);
    const int64_t lanes = vocab % 8 == 0   ? 8
                          : vocab % 4 == 0 ? 4
                                           : (resultAsBF16 ? 2 : 1);
    const int64_t threads = kElementwiseThreads;
    const int64_t columnBlocks = ceilDiv(vocab, lanes * threads);
    auto vectorOf = [&](Type element, int64_t n) {
      return VectorType::get({n}, element);
    };
    // The `lanes` logits of `row` from `column` on (in bounds).
    auto logitsAt = [&](Body &body, Value row, Value column) {
      return vector::LoadOp::create(
          body.b, vectorOf(f32, lanes), body.arg(0),
          ValueRange{body.e.addIndex(body.e.mulIndex(row, body.e.cIndex(vocab)),
                                     column)},
          /*nontemporal=*/false, body.b.getI64IntegerAttr(4 * lanes));
    };
    // Their gradients, stored (as codes with `resultAsBF16`).
    auto storeGradients = [&](Body &body, Value row, Value column,
                              Value logits) {
      QuantizationEmitter &e = body.e;
      Value factor =
          body.toF32(e.divf(body.toF64(body.load(body.arg(3), e.cIndex(0))),
                            body.cF64(static_cast<double>(rows))));
      Value lse = body.load(body.arg(2), row);
      Value target = body.index(body.load(body.arg(1), row));
      Value first = e.addIndex(e.mulIndex(row, e.cIndex(vocab)), column);
      SmallVector<Value> gradients;
      for (int64_t l = 0; l < lanes; ++l) {
        Value value =
            e.mulf(e.fastExp(e.subf(vector::ExtractOp::create(
                                        body.b, logits, ArrayRef<int64_t>{l}),
                                    lse)),
                   factor);
        Value isTarget = arith::CmpIOp::create(
            body.b, CmpIPredicate::eq, e.addIndex(column, e.cIndex(l)), target);
        gradients.push_back(e.select(isTarget, e.subf(value, factor), value));
      }
      if (!resultAsBF16) {
        vector::StoreOp::create(body.b,
                                vector::FromElementsOp::create(
                                    body.b, vectorOf(f32, lanes), gradients),
                                body.arg(4), ValueRange{first},
                                /*nontemporal=*/false,
                                body.b.getI64IntegerAttr(4 * lanes));
        return;
      }
      SmallVector<Value> words;
      for (int64_t w = 0; w < lanes / 2; ++w)
        words.push_back(e.bf16Pair(gradients[2 * w], gradients[2 * w + 1]));
      vector::StoreOp::create(body.b,
                              vector::FromElementsOp::create(
                                  body.b, vectorOf(e.i32(), lanes / 2), words),
                              body.arg(4), ValueRange{e.divIndex(first, 2)},
                              /*nontemporal=*/false,
                              body.b.getI64IntegerAttr(2 * lanes));
    };
    // Rows [firstRow, firstRow + count), a block per (row, columns).
    auto rowRange = [&](const std::string &variant, int64_t firstRow,
                        int64_t count) {
      std::array<int64_t, 3> grid{count, columnBlocks, 1};
      std::string symbol = function(
          variant, registryArguments(context, call), grid, threads,
          [&](Body &body) {
            QuantizationEmitter &e = body.e;
            Value row = e.addIndex(body.block(), e.cIndex(firstRow));
            Value column =
                e.mulIndex(e.addIndex(e.mulIndex(body.block(gpu::Dimension::y),
                                                 e.cIndex(threads)),
                                      body.thread()),
                           e.cIndex(lanes));
            body.ifThen(body.ult(column, e.cIndex(vocab)), [&] {
              storeGradients(body, row, column, logitsAt(body, row, column));
            });
          });
      add(symbol, grid, threads, launch);
    };
    if (!overInput) {
      rowRange(bf16Variant, 0, rows);
      // Each element of the logits is read before its gradient is written:
      // the fp32 gradient may take the logits' memory (their last use).
      if (!resultAsBF16)
        launches.back().inPlace = {{4, 0}};
      return success();
    }
    // The codes over the logits' own memory (placed at their offset by the
    // in-place pair every launch declares): row r's codes are the bytes of
    // logits row floor(r / 2). So the rows go in launches [0, 1), [1, 2),
    // [2, 4), [4, 8), ...: a launch's codes overwrite only rows an earlier
    // launch has read. Row 0, over its own first half, is one block
    // walking its columns in order, all of a piece's logits loaded before
    // a barrier and its codes stored after it (piece k's codes lie over
    // piece floor(k / 2)'s logits).
    const size_t before = launches.size();
    std::array<int64_t, 3> one{1, 1, 1};
    std::string firstRow = function(
        "bf16_over_logits_row_0", registryArguments(context, call), one,
        threads, [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value row = e.cIndex(0);
          body.strided(
              e.cIndex(0), e.cIndex(columnBlocks), 1, ValueRange{},
              [&](Value piece, ValueRange) {
                Value column =
                    e.mulIndex(e.addIndex(e.mulIndex(piece, e.cIndex(threads)),
                                          body.thread()),
                               e.cIndex(lanes));
                Value logits =
                    logitsAt(body, row,
                             arith::MinUIOp::create(body.b, column,
                                                    e.cIndex(vocab - lanes)));
                body.barrier();
                body.ifThen(body.ult(column, e.cIndex(vocab)),
                            [&] { storeGradients(body, row, column, logits); });
                return SmallVector<Value>{};
              });
        });
    add(firstRow, one, threads, launch);
    for (int64_t begin = 1; begin < rows; begin *= 2)
      rowRange(fmt::format("bf16_over_logits_rows_{}", begin), begin,
               std::min(begin, rows - begin));
    for (size_t l = before; l < launches.size(); ++l)
      launches[l].inPlace = {{4, 0}};
    return success();
  }

  //--- The global norm and clipping: one launch for every tensor -----------//
  if (name == "global_norm") {
    // Piece p of kNormPiece elements: its sum of squares in fp64 into
    // partials[p] (a piece never spans two tensors, as on the CPU); then
    // one block adds the pieces in order.
    const size_t tensors = launch.buffers.size() - 1;
    std::vector<int64_t> firstPiece = firstBlocks(
        tensors, kNormPiece, [&](size_t t) { return call.integer(t); });
    const int64_t pieces = firstPiece.back();
    int partials = scratch("partials", pieces * 8);
    Launch squares;
    squares.origin = launch.origin;
    squares.buffers.assign(launch.buffers.begin() + 1, launch.buffers.end());
    squares.buffers.push_back(partials);
    SmallVector<std::pair<std::string, Type>> arguments;
    for (size_t t = 0; t < tensors; ++t)
      arguments.push_back({fmt::format("buffer:{}", t + 1),
                           flat(std::max<int64_t>(1, call.integer(t)), f32)});
    arguments.push_back({"scratch:partials", flat(pieces, f64)});
    std::array<int64_t, 3> grid{pieces, 1, 1};
    std::string symbol = function(
        "squares", arguments, grid, kRowThreads, [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value shared = body.sharedArray(kRowThreads, f64);
          Value block = body.block();
          Value partial = body.cF64(0.0);
          for (size_t t = 0; t < tensors; ++t) {
            Value mine = body.within(block, e.cIndex(firstPiece[t]),
                                     e.cIndex(firstPiece[t + 1]));
            partial = body.ifElse(
                mine,
                [&] {
                  Value first = e.mulIndex(
                      e.subIndex(block, e.cIndex(firstPiece[t])),
                      e.cIndex(kNormPiece));
                  Value last = arith::MinUIOp::create(
                      body.b, e.addIndex(first, e.cIndex(kNormPiece)),
                      e.cIndex(call.integer(t)));
                  return body.strided(
                      e.addIndex(first, body.thread()), last, kRowThreads,
                      ValueRange{body.cF64(0.0)},
                      [&](Value i, ValueRange acc) {
                        Value x = body.toF64(body.load(body.arg(t), i));
                        return SmallVector<Value>{
                            e.addf(acc[0], e.mulf(x, x))};
                      });
                },
                ValueRange{partial})[0];
          }
          Value sum =
              body.reduce(partial, shared, kRowThreads,
                          [&](Value a, Value b) { return e.addf(a, b); });
          body.ifThen(arith::CmpIOp::create(body.b, CmpIPredicate::eq,
                                            body.thread(), e.cIndex(0)),
                      [&] {
                        body.store(sum, body.arg(tensors), block);
                      });
        });
    add(symbol, grid, kRowThreads, squares);
    Launch finish;
    finish.origin = launch.origin;
    finish.buffers = {launch.buffers[0], partials};
    std::array<int64_t, 3> one{1, 1, 1};
    symbol = function(
        "finish",
        {{"buffer:0", flat(1, f32)}, {"scratch:partials", flat(pieces, f64)}},
        one, kRowThreads,
        [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value shared = body.sharedArray(kRowThreads, f64);
          Value partial =
              body.strided(body.thread(), e.cIndex(pieces), kRowThreads,
                           ValueRange{body.cF64(0.0)},
                           [&](Value i, ValueRange acc) {
                             return SmallVector<Value>{
                                 e.addf(acc[0], body.load(body.arg(1), i))};
                           })[0];
          Value sum = body.reduce(partial, shared, kRowThreads,
                                  [&](Value a, Value b) { return e.addf(a, b); });
          body.ifThen(arith::CmpIOp::create(body.b, CmpIPredicate::eq,
                                            body.thread(), e.cIndex(0)),
                      [&] {
                        body.store(body.toF32(body.sqrt(sum)), body.arg(0),
                                   e.cIndex(0));
                      });
        });
    add(symbol, one, kRowThreads, finish);
    return success();
  }
  if (name == "clip_by_global_norm") {
    // x *= max_norm / (norm + 1e-6) where that is below 1 (in fp64, then
    // rounded): a NaN norm leaves the tensors (the trainer stops first).
    // Scalars: max_norm, then each tensor's count (constants here). A block
    // clips a piece of kClipPiece elements of one tensor, its threads
    // striding over it: which tensor is the block's is decided once a block
    // (one block per 256 elements spent most of its time there: 8.3 ms for
    // the 125M model's 111 tensors on the H200).
    const size_t tensors = launch.buffers.size() - 1;
    std::vector<int64_t> firstPiece =
        firstBlocks(tensors, kClipPiece,
                    [&](size_t t) { return call.integer(t + 1); });
    Launch clip = launch;
    clip.scalars = {launch.scalars[0]};
    llvm::erase_if(clip.boundScalars,
                   [](const auto &bound) { return bound.first != 0; });
    SmallVector<std::pair<std::string, Type>> arguments{
        {"buffer:0", flat(1, f32)}};
    for (size_t t = 0; t < tensors; ++t)
      arguments.push_back(
          {fmt::format("buffer:{}", t + 1),
           flat(std::max<int64_t>(1, call.integer(t + 1)), f32)});
    arguments.push_back({"scalar:0", f64});
    std::array<int64_t, 3> grid{firstPiece.back(), 1, 1};
    std::string symbol = function(
        "", arguments, grid, kElementwiseThreads, [&](Body &body) {
          QuantizationEmitter &e = body.e;
          Value block = body.block();
          Value norm = body.toF64(body.load(body.arg(0), e.cIndex(0)));
          Value factor =
              e.divf(body.arg(tensors + 1), e.addf(norm, body.cF64(1e-6)));
          Value clips =
              e.cmpf(CmpFPredicate::OLT, factor, body.cF64(1.0));
          Value factor32 = body.toF32(factor);
          body.ifThen(clips, [&] {
            for (size_t t = 0; t < tensors; ++t) {
              Value mine = body.within(block, e.cIndex(firstPiece[t]),
                                       e.cIndex(firstPiece[t + 1]));
              body.ifThen(mine, [&] {
                Value first = e.mulIndex(
                    e.subIndex(block, e.cIndex(firstPiece[t])),
                    e.cIndex(kClipPiece));
                Value last = arith::MinUIOp::create(
                    body.b, e.addIndex(first, e.cIndex(kClipPiece)),
                    e.cIndex(call.integer(t + 1)));
                Value x = body.arg(t + 1);
                body.strided(e.addIndex(first, body.thread()), last,
                             kElementwiseThreads, {},
                             [&](Value i, ValueRange) {
                               body.store(e.mulf(body.load(x, i), factor32),
                                          x, i);
                               return SmallVector<Value>{};
                             });
              });
            }
          });
        });
    add(symbol, grid, kElementwiseThreads, clip);
    return success();
  }

  return emitError(loc) << "the library kernel '" << name
                        << "' has no GPU implementation yet (" << launch.origin
                        << ")";
}
