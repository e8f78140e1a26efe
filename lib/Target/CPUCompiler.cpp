//===- CPUCompiler.cpp - Models to native shared objects ------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Target/CPUCompiler.h"

#include "zb/Conversion/Passes.h"
#include "zb/Dialect/Pipe/PipeDialect.h"
#include "zb/Dialect/Sched/SchedDialect.h"
#include "zb/Pipelines/Pipelines.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;

void zb::registerCPUCompilerDependencies(DialectRegistry &registry) {
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registry
      .insert<zb::ZBDialect, zb::pipe::PipeDialect, zb::sched::SchedDialect>();
  // Builtin and LLVM for the host; GPU and NVVM for target=gpu (kernels,
  // embedded binaries and launches).
  registerAllGPUToLLVMIRTranslations(registry);
}

/// The host's feature string, e.g. "+avx2,+fma,-avx512f".
static std::string hostFeatures() {
  llvm::SubtargetFeatures features;
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    features.AddFeature(feature.first(), feature.second);
  return features.getString();
}

/// The CPU the code is for and its features: `options.cpu`, else this host.
static std::pair<std::string, std::string>
targetCPU(const zb::CPUCompileOptions &options) {
  if (!options.cpu.empty())
    return {options.cpu, ""};
  return {llvm::sys::getHostCPUName().str(), hostFeatures()};
}

/// The host target's subtarget information for `cpu`, made without LLVM's
/// own message for an unknown name (printed to stderr once per call): null
/// when there is no host target or `cpu` is not one of its CPUs.
static std::unique_ptr<llvm::MCSubtargetInfo>
knownSubtarget(llvm::StringRef cpu) {
  llvm::InitializeNativeTarget();
  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  std::unique_ptr<llvm::MCSubtargetInfo> generic(
      target->createMCSubtargetInfo(triple, "", ""));
  if (!generic || !generic->isCPUStringValid(cpu))
    return nullptr;
  return std::unique_ptr<llvm::MCSubtargetInfo>(
      target->createMCSubtargetInfo(triple, cpu, ""));
}

std::string zb::unknownTargetCPU(llvm::StringRef cpu) {
  if (cpu.empty() || knownSubtarget(cpu))
    return "";
  return ("unknown target CPU '" + cpu + "' for " +
          llvm::sys::getProcessTriple() +
          " (LLVM's names, e.g. x86-64-v3, skylake-avx512, znver4; "
          "'llc -mcpu=help' lists them)")
      .str();
}

std::string zb::hostCannotRun(llvm::StringRef cpu) {
  if (cpu.empty())
    return "";
  // An unknown name is unknownTargetCPU's to report.
  std::unique_ptr<llvm::MCSubtargetInfo> info = knownSubtarget(cpu);
  if (!info)
    return "";
  // The instruction sets `cpu` implies that this CPU reports absent (its
  // features name instruction sets only, never tuning): those the code
  // generator uses on its own, in vectorised and scalar code (x86's SIMD
  // and bit manipulation); system instructions (mwaitx, rdpru, ...) that a
  // virtual machine may hide are never emitted unasked.
  static constexpr llvm::StringLiteral kEmitted[] = {
      "sse",        "ssse3",  "avx",   "fma",  "f16c", "bmi",
      "lzcnt",      "popcnt", "movbe", "gfni", "vaes", "aes",
      "vpclmulqdq", "pclmul", "sha",   "adx",  "amx",  "evex512"};
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  std::string missing;
  for (const llvm::SubtargetFeatureKV &feature :
       info->getAllProcessorFeatures()) {
    llvm::StringRef name = feature.Key;
    if (!info->getFeatureBits().test(feature.Value) ||
        llvm::none_of(kEmitted, [&](llvm::StringRef family) {
          return name.starts_with(family);
        }))
      continue;
    auto it = host.find(name);
    if (it != host.end() && !it->second)
      missing += (missing.empty() ? "" : ", ") + name.str();
  }
  if (missing.empty())
    return "";
  return ("code for the CPU '" + cpu + "' needs " + missing +
          ", which this machine's CPU lacks; it can be compiled here "
          "(--compile-only) but not run")
      .str();
}

std::string zb::getCPUCompilerFingerprint(const CPUCompileOptions &options) {
  auto [cpu, features] = targetCPU(options);
  // zb-cpu-N: the generation of the calls compiled code makes into the
  // runtime (3: causal attention's products over the terms they need), so
  // that a cache does not serve an older generation's objects.
  return "zb-cpu-3;llvm-" LLVM_VERSION_STRING ";" +
         llvm::sys::getProcessTriple() + ";" + cpu + ";" + features + ";O" +
         std::to_string(options.optLevel) +
         (options.target == "gpu"
              ? ";gpu-" + options.gpuChip + "-" + options.gpuDtype
              : std::string());
}

/// Adds `void zb_entry_<name>(void **args)` calling `_mlir_ciface_<name>`
/// with the unpacked pointers, for every C interface in `module`.
static void addPackedEntries(llvm::Module &module) {
  constexpr llvm::StringLiteral ciface = "_mlir_ciface_";
  llvm::LLVMContext &ctx = module.getContext();
  auto *ptrType = llvm::PointerType::get(ctx, 0);
  SmallVector<llvm::Function *> interfaces;
  for (llvm::Function &fn : module)
    if (!fn.isDeclaration() && fn.getName().starts_with(ciface))
      interfaces.push_back(&fn);
  for (llvm::Function *fn : interfaces) {
    std::string name =
        (zb::kEntryPrefix + fn->getName().drop_front(ciface.size())).str();
    auto *type =
        llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptrType}, false);
    auto *entry = llvm::Function::Create(
        type, llvm::GlobalValue::ExternalLinkage, name, module);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", entry));
    SmallVector<llvm::Value *> args;
    for (unsigned i = 0, e = fn->arg_size(); i < e; ++i) {
      llvm::Value *slot =
          b.CreateConstGEP1_64(ptrType, entry->getArg(0), i, "slot");
      args.push_back(b.CreateLoad(ptrType, slot));
    }
    b.CreateCall(fn, args);
    b.CreateRetVoid();
    // Programs are entered through zb_entry_* alone, so the C interface
    // and the function it wraps need not be exported. Internal, LLVM may
    // drop the descriptor fields the function never reads (its static
    // sizes and strides) instead of passing every field of every memref:
    // that call's code generation alone took seconds for a whole model's
    // gradient.
    fn->setLinkage(llvm::GlobalValue::InternalLinkage);
    if (llvm::Function *wrapped =
            module.getFunction(fn->getName().drop_front(ciface.size()));
        wrapped && !wrapped->isDeclaration())
      wrapped->setLinkage(llvm::GlobalValue::InternalLinkage);
  }
}

LogicalResult zb::compileToSharedObject(ModuleOp module, StringRef outputPath,
                                        const CPUCompileOptions &options) {
  PassManager pm(module.getContext());
  if (options.target == "gpu" || options.target == "gpu-emulated") {
    LowerToGPUOptions gpu;
    gpu.chip = options.gpuChip;
    gpu.dtype = options.gpuDtype;
    gpu.emulate = options.target == "gpu-emulated";
    buildLowerToGPUPipeline(pm, gpu);
  } else if (options.target == "cpu") {
    buildLowerToCPUPipeline(pm, LowerToCPUOptions());
  } else {
    return module.emitError("unknown compile target '")
           << options.target << "'; known: cpu, gpu, gpu-emulated";
  }
  if (failed(pm.run(module)))
    return failure();
  // The model convention's argument attributes (zb.param, ...) mean nothing
  // to LLVM, which would warn about each.
  module.walk([](FunctionOpInterface fn) {
    for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
      for (NamedAttribute attr : fn.getArgAttrs(i))
        if (attr.getName().getValue().starts_with("zb."))
          fn.removeArgAttr(i, attr.getName());
  });

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext);
  if (!llvmModule)
    return module.emitError("cannot translate the lowered model to LLVM IR");
  addPackedEntries(*llvmModule);

  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return module.emitError("no LLVM target for the host: ") << error;
  llvm::CodeGenOptLevel level = options.optLevel >= 3
                                    ? llvm::CodeGenOptLevel::Aggressive
                                : options.optLevel == 0
                                    ? llvm::CodeGenOptLevel::None
                                    : llvm::CodeGenOptLevel::Default;
  if (std::string problem = unknownTargetCPU(options.cpu); !problem.empty())
    return module.emitError(problem);
  auto [cpu, features] = targetCPU(options);
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features,
      llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt, level));
  if (!machine)
    return module.emitError("cannot create an LLVM target machine for ")
           << triple.str();
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());

  auto optimize = makeOptimizingTransformer(options.optLevel,
                                            /*sizeLevel=*/0, machine.get());
  if (llvm::Error err = optimize(llvmModule.get()))
    return module.emitError("LLVM optimisation failed: ")
           << llvm::toString(std::move(err));

  // Emit the object next to the output, then link it into a shared object.
  SmallString<128> objectPath;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
          "zb-model", "o", objectPath))
    return module.emitError("cannot create a temporary object file: ")
           << ec.message();
  llvm::scope_exit removeObject([&] { llvm::sys::fs::remove(objectPath); });
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(objectPath, ec);
    if (ec)
      return module.emitError("cannot write '") << objectPath
                                                << "': " << ec.message();
    llvm::legacy::PassManager codegen;
    if (machine->addPassesToEmitFile(codegen, os, nullptr,
                                     llvm::CodeGenFileType::ObjectFile))
      return module.emitError("the host target cannot emit object files");
    codegen.run(*llvmModule);
  }

  llvm::ErrorOr<std::string> cc = llvm::sys::findProgramByName("cc");
  if (!cc)
    return module.emitError(
        "no C compiler driver 'cc' on PATH to link the model");
  std::string tmpOutput = (outputPath + ".tmp").str();
  // What compiled code calls beyond the C library (the runtime's C ABI,
  // memrefCopy among it) resolves against the runtime loaded in the process.
  SmallVector<StringRef> argv = {*cc,       "-shared",  "-o",
                                 tmpOutput, objectPath, "-lm"};
  std::string linkError;
  int rc = llvm::sys::ExecuteAndWait(*cc, argv, std::nullopt, {}, 0, 0,
                                     &linkError);
  if (rc != 0)
    return module.emitError("linking the model failed (")
           << *cc << " exited with " << rc << ")"
           << (linkError.empty() ? "" : ": ") << linkError;
  if (std::error_code ec = llvm::sys::fs::rename(tmpOutput, outputPath))
    return module.emitError("cannot write '") << outputPath
                                              << "': " << ec.message();
  return success();
}
