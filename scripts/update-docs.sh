#!/usr/bin/env bash
# Copies the documentation generated from ODS (built by the `med-docs` target) into docs/.
# A test fails when docs/ and the ODS descriptions drift apart.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
cmake --build "$BUILD" --target med-docs MedOpTableGen >/dev/null
cp "$BUILD/docs/med/MedDialect.md" docs/dialect.md
cp "$BUILD/docs/med/MedPasses.md" docs/passes.md
cp "$BUILD/docs/med/OpTable.md" docs/op-table.md
echo "docs/dialect.md, docs/passes.md and docs/op-table.md updated"
