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

// expected-error @+1 {{parameter w must have a static shape, got 'tensor<?xf32>'}}
med.parameter @w : tensor<?xf32> init zeros

// -----

func.func @undeclared() -> tensor<4xf32> {
  // expected-error @+1 {{parameter @nope is not declared (no med.parameter of that name)}}
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
