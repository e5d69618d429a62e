// RUN: med-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{init uniform needs the fan-in, e.g. `init uniform(27)`}}
med.parameter @w : tensor<4x1x3x3x3xf32> init uniform

// -----

// expected-error @+1 {{fan-in must be positive, got 0}}
med.parameter @w : tensor<4x1x3x3x3xf32> init uniform(0)

// -----

// expected-error @+1 {{init ones takes no fan-in}}
med.parameter @w : tensor<4xf32> init ones(4)

// -----

// expected-error @+1 {{init constant needs its value, e.g. `init constant value 2.5e-01`}}
med.parameter @w : tensor<4xf32> init constant

// -----

// expected-error @+1 {{init constant value must be finite in f32, got 1.000000e+39}}
med.parameter @w : tensor<4xf32> init constant value 1.0e39

// -----

// expected-error @+1 {{init zeros takes no value}}
med.parameter @w : tensor<4xf32> init zeros value 1.0

// -----

// expected-error @+1 {{parameter w must have a static shape, got 'tensor<?xf32>'}}
med.parameter @w : tensor<?xf32> init zeros

// -----

func.func @undeclared() -> tensor<4xf32> {
  // expected-error @+1 {{parameter @nope is not declared (no med.parameter or med.flat_buffer of that name)}}
  %0 = med.param @nope : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

med.parameter @"n.weight" : tensor<4xf32> init ones
func.func @wrong_type() -> tensor<5xf32> {
  // expected-error @+1 {{result type 'tensor<5xf32>' differs from the declared type 'tensor<4xf32>' of parameter @n.weight}}
  %0 = med.param @"n.weight" : tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

func.func @not_at_module_level() {
  // expected-error @+1 {{expects parent op 'builtin.module'}}
  "med.parameter"() {sym_name = "w", type = tensor<4xf32>, init = 0 : i32} : () -> ()
  return
}

// -----

func.func @constant_vector() {
  // expected-error @+1 {{value must be a ranked tensor}}
  %0 = "med.constant"() {value = dense<1.0> : vector<2xf32>} : () -> tensor<2xf32>
  return
}

// -----

// expected-error @+1 {{init copy needs the parameter to copy, e.g. `init copy from @"w"`}}
med.parameter @ema : tensor<4xf32> init copy frozen

// -----

// expected-error @+1 {{copies @w, which is not declared}}
med.parameter @ema : tensor<4xf32> init copy from @w frozen

// -----

med.parameter @w : tensor<5xf32> init zeros
// expected-error @+1 {{copies @w of type 'tensor<5xf32>', but has type 'tensor<4xf32>'}}
med.parameter @ema : tensor<4xf32> init copy from @w frozen

// -----

med.parameter @w : tensor<4xf32> init zeros
med.parameter @a : tensor<4xf32> init copy from @w
// expected-error @+1 {{copies @a, which is itself a copy}}
med.parameter @b : tensor<4xf32> init copy from @a

// -----

med.parameter @w : tensor<4xf32> init zeros
// expected-error @+1 {{init ones copies nothing; remove `from`}}
med.parameter @b : tensor<4xf32> init ones from @w

// -----

med.parameter @a : tensor<3xf32> init zeros
// expected-error @+1 {{member @b is not a med.parameter}}
med.flat_buffer @f : tensor<128xf32> members [@a, @b] offsets [0, 64] alignment 64

// -----

med.parameter @a : tensor<3xf32> init zeros
med.parameter @b : tensor<5xf32> init zeros
// expected-error @+1 {{member @b at offset 32: expected a multiple of 64 at or after 3}}
med.flat_buffer @f : tensor<128xf32> members [@a, @b] offsets [0, 32] alignment 64

// -----

med.parameter @a : tensor<100xf32> init zeros
med.parameter @b : tensor<5xf32> init zeros
// expected-error @+1 {{member @b at offset 64: expected a multiple of 64 at or after 100}}
med.flat_buffer @f : tensor<256xf32> members [@a, @b] offsets [0, 64] alignment 64

// -----

med.parameter @a : tensor<3xf32> init zeros
med.parameter @b : tensor<100xf32> init zeros
// expected-error @+1 {{member @b ends at 164, beyond the size 128}}
med.flat_buffer @f : tensor<128xf32> members [@a, @b] offsets [0, 64] alignment 64

// -----

med.parameter @a : tensor<3xf32> init zeros
med.flat_buffer @f : tensor<64xf32> members [@a] offsets [0] alignment 64
// expected-error @+1 {{member @a is also a member of @f}}
med.flat_buffer @g : tensor<64xf32> members [@a] offsets [0] alignment 64

// -----

med.parameter @a : tensor<3xf32> init zeros
// expected-error @+1 {{type must be a 1-D f32 tensor of static size, got 'tensor<8x8xf32>'}}
med.flat_buffer @f : tensor<8x8xf32> members [@a] offsets [0] alignment 64

// -----

med.parameter @a : tensor<3xf32> init zeros
med.flat_buffer @f : tensor<64xf32> members [@a] offsets [0] alignment 64
func.func @wrong_read() -> tensor<3xf32> {
  // expected-error @+1 {{result type 'tensor<3xf32>' differs from the declared type 'tensor<64xf32>' of parameter @f}}
  %0 = med.param @f : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @pack_overlap(%a: tensor<3xf32>, %b: tensor<5xf32>) -> tensor<64xf32> {
  // expected-error @+1 {{'med.pack' op 'offsets': input 1 at 2 overlaps the one before it (which ends at 3)}}
  %0 = med.pack %a, %b offsets [0, 2] size 64 : (tensor<3xf32>, tensor<5xf32>) -> tensor<64xf32>
  return %0 : tensor<64xf32>
}

// -----

func.func @pack_size(%a: tensor<3xf32>, %b: tensor<5xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'med.pack' op input 1 (5 elements at offset 4) does not fit in 'size' 8}}
  %0 = med.pack %a, %b offsets [0, 4] size 8 : (tensor<3xf32>, tensor<5xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
