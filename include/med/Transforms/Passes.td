//===- Passes.td - passes of the med compiler ----------------------------------===//
#ifndef MED_TRANSFORMS_PASSES_TD
#define MED_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MedSpecialize : Pass<"med-specialize", "::mlir::ModuleOp"> {
  let summary = "fixes the batch and patch size of entry functions and inlines their calls";
  let description = [{
    Model files describe a network for any batch and patch size (`?` dimensions) as a network
    function that calls one function per block shape. This pass prepares one concrete
    instance:

    1. inlines every call reachable from the entry function — the one named by `entry`, or
       else every public function (the block functions stay in the module; `symbol-dce`
       removes them);
    2. sets the batch (axis 0) and the patch (the last three axes) of every entry argument of
       rank 5 whose size there is `?`;
    3. re-infers the result type of every op in order and updates the function's result types.

    An inconsistent size (a patch not divisible by the network's downsampling factor, say) is
    reported by the op where the shapes stop matching.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "function to specialize (default: every public function)">,
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "batch size for axis 0 of rank-5 arguments (0: leave as is)">,
    ListOption<"patch", "patch", "int64_t",
               "D,H,W for the last three axes of rank-5 arguments (empty: leave as is)">,
  ];
}

def MedAutodiff : Pass<"med-autodiff", "::mlir::ModuleOp"> {
  let summary = "builds the gradient function of a loss function (reverse mode)";
  let description = [{
    For each selected function whose first result is a scalar loss, adds a public function
    `<name>_grad` with the same arguments that returns the original results, then the
    gradient of the loss with respect to every parameter the function reads (in declaration
    order), then with respect to every floating-point argument. Its `med.output_names`
    attribute names the results (`out0`, …, `grad.<parameter>`, `grad.arg<i>`).

    The algorithm: values that depend on a parameter or an argument and on which the loss
    depends are active; ops are visited in reverse order, each active op's
    GradientOpInterface builds its operands' gradients from its results', and several
    contributions to one value are summed. Ops marked NotDifferentiable (constants, gradient
    ops) stop the gradient. A parameter or argument the loss does not depend on gets a zero
    gradient and a warning. Needs static shapes: run med-specialize first.
  }];
  let options = [
    Option<"function", "func", "std::string", /*default=*/"\"\"",
           "function to differentiate (default: every public function returning a scalar first)">,
  ];
}

#endif // MED_TRANSFORMS_PASSES_TD
