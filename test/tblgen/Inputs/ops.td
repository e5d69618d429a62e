// The dialect's ODS and one extra op, whose definition the RUN lines complete with -D.
include "med/IR/MedOps.td"

#ifdef NO_DECISION
def Test_NoDecisionOp : Med_ShapedOp<"test_no_decision", []> {
  let arguments = (ins Med_FloatTensor:$input);
  let results = (outs Med_FloatTensor:$result);
}
#endif
#ifdef BAD_FLOPS
def Test_BadFlopsOp : Med_ShapedOp<"test_bad_flops", [Med_NotDifferentiable]> {
  let flops = "7 per weight";
  let arguments = (ins Med_FloatTensor:$input);
  let results = (outs Med_FloatTensor:$result);
}
#endif
#ifdef BAD_WIDE
def Test_BadWideOp : Med_ShapedOp<"test_bad_wide", [Med_NotDifferentiable]> {
  let wideOperands = ["gamma"];
  let arguments = (ins Med_FloatTensor:$input);
  let results = (outs Med_FloatTensor:$result);
}
#endif
#ifdef BAD_RULE
def Test_BadRuleOp : Med_ShapedOp<"test_bad_rule", [Med_NotDifferentiable]> {
  let shapeRule = "unary($input, $groups)";
  let arguments = (ins Med_FloatTensor:$input);
  let results = (outs Med_FloatTensor:$result);
}
#endif
#ifdef NO_PLAN_FORM
def Test_NoPlanFormOp : Med_ShapedOp<"test_no_plan_form", [Med_NotDifferentiable]> {
  let arguments = (ins Med_FloatTensor:$input, DictionaryAttr:$options);
  let results = (outs Med_FloatTensor:$result);
}
#endif
#ifdef GOOD
def Test_GoodOp : Med_ShapedOp<"test_good", [Med_NotDifferentiable]> {
  let flops = "3 per input";
  let shapeRule = "unary($input)";
  let arguments = (ins Med_FloatTensor:$input, DefaultValuedAttr<I64Attr, "2">:$groups);
  let results = (outs Med_FloatTensor:$result);
}
#endif
