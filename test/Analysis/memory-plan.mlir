// RUN: med-opt %s --split-input-file --test-med-print-memory-plan -o /dev/null | FileCheck %s

// A chain: each value lives from the op that defines it (arguments: the upload, "in") to
// its last reader (returned and assigned values: the download, "out"); dead values share
// bytes, largest first, offsets aligned to 256. A parameter stored as declared is resident
// state (no arena bytes); a reshape shares its source's buffer and extends its life.
module {
  med.parameter @w : tensor<1024xf32> init zeros
  // CHECK-LABEL: memory plan @chain
  func.func @chain(%x: tensor<1024xf32>) -> tensor<8x128xf32> {
    // CHECK-NEXT: %arg0: offset = 0, size = 4096, live = [in, 1]
    %w = med.param @w : tensor<1024xf32>
    // CHECK-NEXT: %1: offset = 4096, size = 4096, live = [1, 6]
    %a = med.add %x, %w : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
    %b = med.gelu %a : tensor<1024xf32>
    // CHECK-NEXT: %2: offset = 0, size = 4096, live = [2, 4]
    %c = med.gelu %b : tensor<1024xf32>
    // CHECK-NEXT: %3: offset = 8192, size = 4096, live = [3, 4]
    // CHECK-NEXT: %4: offset = 12288, size = 4096, live = [4, out]
    %d = med.add %c, %b : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
    %r = med.reshape %d {shape = array<i64: 8, 128>} : (tensor<1024xf32>) -> tensor<8x128xf32>
    %e = med.add %a, %d : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
    // CHECK-NEXT: %6: offset = 0, size = 4096, live = [6, out]
    med.assign @w, %e : tensor<1024xf32>
    // CHECK-NEXT: arena = 16384, resident = 4096
    return %r : tensor<8x128xf32>
  }
}

// -----

// Mixed precision: values count at their storage type (med.storage); a parameter stored in
// bf16 is a converted copy that lives from the upload to its last reader.
module {
  med.parameter @w : tensor<1024xf32> init zeros
  // CHECK-LABEL: memory plan @mixed
  func.func @mixed(%x: tensor<1024xf32>) -> tensor<f32> attributes {med.arg_storage = [bf16]} {
    // CHECK-NEXT: %arg0: offset = 0, size = 2048, live = [in, 1]
    // CHECK-NEXT: %0: offset = 2048, size = 2048, live = [in, 1]
    %w = med.param @w {med.storage = [bf16]} : tensor<1024xf32>
    // CHECK-NEXT: %1: offset = 4096, size = 2048, live = [1, 2]
    %a = med.add %x, %w {med.storage = [bf16]} : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
    // CHECK-NEXT: %2: offset = 0, size = 4, live = [2, out]
    %s = med.reduce sum %a {axes = array<i64: 0>, med.storage = [f32]} : (tensor<1024xf32>) -> tensor<f32>
    // CHECK-NEXT: arena = 6144, resident = 4096
    return %s : tensor<f32>
  }
}
