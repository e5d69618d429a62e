#!/usr/bin/env bash
# Copies the documentation generated from ODS (built by the `med-docs` target) into docs/.
# A test fails when docs/ and the ODS descriptions drift apart.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
cmake --build "$BUILD" --target med-docs >/dev/null
cp "$BUILD/docs/med/MedDialect.md" docs/dialect.md
cp "$BUILD/docs/med/MedPasses.md" docs/passes.md
echo "docs/dialect.md and docs/passes.md updated"
