//===- Artifact.h - writing the artifact medrun executes -----------------------===//
//
// Serializes a specialized module into the artifact format of docs/artifact.md: manifest,
// parameter table and the op-level plan of every public function.
//
//===----------------------------------------------------------------------------------===//
#ifndef MED_TARGET_ARTIFACT_H
#define MED_TARGET_ARTIFACT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include "llvm/ADT/ArrayRef.h"

#include <map>
#include <string>

namespace mlir::med {

constexpr uint32_t kArtifactFormatVersion = 11;

struct ArtifactManifest {
  std::string compiler;     ///< "medc 0.1.0"
  std::string source;       ///< path of the compiled file
  std::string sourceSha256; ///< hex digest of its contents
  std::map<std::string, std::string> options;
};

/// A named binary section stored after the JSON document (format version 3):
/// "cuda.source", "cuda.cubin", "cuda.ptx".
struct ArtifactSection {
  std::string name;
  std::string data;
};

/// The artifact's JSON document (manifest, parameter table, plans).
FailureOr<llvm::json::Value> artifactDocument(ModuleOp module, const ArtifactManifest &manifest);

/// Writes the artifact: the document framed as docs/artifact.md describes. Fails, with a diagnostic at the offending op, if a public function
/// has a value of non-static shape or an op the plan cannot express.
LogicalResult writeArtifact(ModuleOp module, const ArtifactManifest &manifest,
                            llvm::raw_ostream &os);

/// Writes a document and its binary sections in the container of docs/artifact.md.
/// Appends to the document's "functions" one function per fusion body, `fusion_check_<k>`:
/// the body's inputs as arguments, one `fusion` op of body k, its outputs as results. Run on
/// the CUDA backend and the CPU backend, each checks one fused kernel in isolation (medrun
/// cuda-check --fusions). Returns how many were added.
size_t appendFusionCheckFunctions(llvm::json::Object &doc);

/// `v` with every number JSON cannot spell (±inf, NaN: a constant or an attribute may hold
/// one) written as {"nonfinite": "inf" | "-inf" | "nan"}, as the runtime reads it
/// (docs/artifact.md).
llvm::json::Value spellNonFinite(const llvm::json::Value &v);

void writeArtifactContainer(const llvm::json::Value &doc, llvm::ArrayRef<ArtifactSection> sections,
                            llvm::raw_ostream &os);

} // namespace mlir::med

#endif // MED_TARGET_ARTIFACT_H
