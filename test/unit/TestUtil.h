//===- TestUtil.h - parsing med snippets in unit tests ---------------------------===//
#ifndef MED_TEST_UNIT_TESTUTIL_H
#define MED_TEST_UNIT_TESTUTIL_H

#include "med/InitMed.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

namespace medtest {

/// A context with the med dialects, whose diagnostics are collected instead of printed.
struct Context {
  mlir::MLIRContext ctx;
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler;

  Context()
      : ctx(registry()), handler(&ctx, [this](mlir::Diagnostic &d) {
          diagnostics += d.str() + "\n";
          return mlir::success();
        }) {}

  mlir::OwningOpRef<mlir::ModuleOp> parse(const std::string &text) {
    diagnostics.clear();
    return mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  }

private:
  static mlir::DialectRegistry registry() {
    mlir::DialectRegistry r;
    mlir::med::registerMedDialects(r);
    return r;
  }
};

} // namespace medtest

#endif // MED_TEST_UNIT_TESTUTIL_H
