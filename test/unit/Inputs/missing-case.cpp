// A dispatch over the op table that handles only med.conv3d: it must not compile with
// -Werror=switch, the flag of the executors' dispatch, and the compiler names the ops it
// lacks, med.gelu among them (test/unit/CMakeLists.txt, unit/op_table_missing_case_fails_build).
#include "med/OpTable.h"

int dispatch(med::ops::OpKind k) {
  switch (k) {
  case med::ops::OpKind::Conv3d:
    return 1;
  }
  return 0;
}
