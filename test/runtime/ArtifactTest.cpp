//===- ArtifactTest.cpp - artifact container and plan validation ----------------===//
#include "medrun/Artifact.h"
#include "medrun/LaunchContract.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Random.h"

#include "ArtifactFiles.h"

#include "gtest/gtest.h"

#include <array>
#include <cstdio>
#include <string>

using namespace medrun;

namespace {

const char *kPlan = R"({"format":"medc-artifact","compiler":"test","source":"t.mlir",
 "source_sha256":"00","options":{},
 "parameters":[{"name":"w","dtype":"f32","shape":[2,3],"init":"uniform","fan_in":3}],
 "functions":[{"name":"f","values":[{"dtype":"f32","shape":[2,3]},{"dtype":"f32","shape":[2,3]},
   {"dtype":"f32","shape":[2,3]}],"inputs":[0],"outputs":[2],
   "ops":[{"op":"param","operands":{},"results":[1],"attrs":{"name":"w"},"loc":"t.mlir:3:5"},
          {"op":"add","operands":{"lhs":[0],"rhs":[1]},"results":[2],"attrs":{},"loc":""}]}]})";

using test::container;
using test::writeTemp;

/// A container of the current version with binary sections.
std::string withSections(const std::string &json,
                         const std::vector<std::pair<std::string, std::string>> &sections) {
  std::string bytes(kArtifactMagic, 8);
  test::appendLE<uint32_t>(bytes, Artifact::kFormatVersion);
  test::appendLE<uint32_t>(bytes, 0);
  test::appendLE<uint64_t>(bytes, json.size());
  bytes += json;
  test::appendLE<uint64_t>(bytes, sections.size());
  for (auto &[name, data] : sections) {
    test::appendLE<uint64_t>(bytes, name.size());
    bytes += name;
    test::appendLE<uint64_t>(bytes, data.size());
    bytes += data;
  }
  test::appendLE<uint32_t>(bytes, crc32(bytes.data(), bytes.size()));
  return bytes;
}

std::string loadError(const std::string &path) {
  try {
    Artifact::load(path);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

TEST(Artifact, LoadsPlan) {
  Artifact a = Artifact::load(writeTemp("ok.medc", container(kPlan)));
  ASSERT_EQ(a.functions.size(), 1u);
  const Function &f = a.function("f");
  EXPECT_EQ(f.ops.size(), 2u);
  EXPECT_EQ(f.ops[0].strAttr("name"), "w");
  EXPECT_EQ(f.ops[1].single("lhs"), 0);
  EXPECT_EQ(f.ops[0].describe(), "'med.param' at t.mlir:3:5");
  ASSERT_NE(a.parameter("w"), nullptr);
  EXPECT_EQ(a.parameter("w")->fanIn, 3);
  EXPECT_NE(std::string(loadError(writeTemp("x.medc", container(kPlan)))), "x");
  try {
    a.function("g");
    FAIL();
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("no function 'g' (the artifact has: f)"), std::string::npos);
  }
}

TEST(Artifact, RejectsOtherVersion) {
  // Version 10 plans (before the kernels' launch contracts) and older are no longer read:
  // recompile them.
  for (uint32_t v : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 10u, 12u}) {
    std::string msg = loadError(writeTemp("v.medc", container(kPlan, v)));
    EXPECT_NE(msg.find(str("artifact format version ", v,
                           ", but this medrun reads version 11 only; recompile")),
              std::string::npos)
        << msg;
  }
}

/// kPlan's function as one fusion `f(x) = x + w` of the body table, with `body` and
/// `bodies` spliced in.
std::string fusionPlan(const std::string &body, const std::string &bodies) {
  return R"({"format":"medc-artifact","compiler":"test","source":"t.mlir",
 "source_sha256":"00","options":{},
 "parameters":[{"name":"w","dtype":"f32","shape":[2,3],"init":"uniform","fan_in":3}],
 "fusions":[)" + bodies + R"(],
 "functions":[{"name":"f","values":[{"dtype":"f32","shape":[2,3]},{"dtype":"f32","shape":[2,3]},
   {"dtype":"f32","shape":[2,3]}],"inputs":[0],"outputs":[2],
   "ops":[{"op":"param","operands":{},"results":[1],"attrs":{"name":"w"},"loc":"t.mlir:3:5"},
          {"op":"fusion","operands":{"inputs":[0,1]},"results":[2],
           "attrs":{"template":"elementwise","body":)" + body + R"(},"loc":"t.mlir:4:5"}]}]})";
}

const char *kAddBody = R"({"template":"elementwise","values":[{"dtype":"f32","shape":[2,3]},
  {"dtype":"f32","shape":[2,3]},{"dtype":"f32","shape":[2,3]}],"inputs":[0,1],"outputs":[2],
  "ops":[{"op":"add","operands":{"lhs":[0],"rhs":[1]},"results":[2],"attrs":{}}]})";

TEST(Artifact, ReadsFusionBodies) {
  Artifact a = Artifact::load(writeTemp("fusion.medc", container(fusionPlan("0", kAddBody))));
  ASSERT_EQ(a.fusions.size(), 1u);
  const OpInfo &op = a.function("f").ops.at(1);
  ASSERT_TRUE(op.body);
  EXPECT_EQ(op.body.get(), a.fusions[0].get());
  EXPECT_EQ(op.body->fusionTemplate, "elementwise");
  EXPECT_EQ(op.body->ops.at(0).kind, "add");
}

TEST(Artifact, RejectsBadFusions) {
  auto error = [](const std::string &body, const std::string &bodies) {
    return loadError(writeTemp("badfusion.medc", container(fusionPlan(body, bodies))));
  };
  // A body that is not in the table.
  std::string msg = error("1", kAddBody);
  EXPECT_NE(msg.find("function 'f'.ops[1]: a fusion needs 'body', the index of its body in "
                     "'fusions' (1 bodies)"),
            std::string::npos)
      << msg;
  msg = error("0", "");
  EXPECT_NE(msg.find("(0 bodies)"), std::string::npos) << msg;
  // A body whose inputs or results do not match the op.
  std::string oneInput = kAddBody;
  const std::string twoInputs = "\"inputs\":[0,1]";
  oneInput.replace(oneInput.find(twoInputs), twoInputs.size(), "\"inputs\":[0]");
  oneInput.replace(oneInput.find("\"rhs\":[1]"), 9, "\"rhs\":[0]"); // x + x
  msg = error("0", oneInput);
  EXPECT_NE(msg.find("the fusion has 2 inputs, fusion body 0 has 1"), std::string::npos)
      << msg;
  std::string otherShape = kAddBody;
  otherShape.replace(otherShape.rfind("[2,3]"), 5, "[3,2]");
  msg = error("0", otherShape);
  EXPECT_NE(msg.find("results #0 is 2x3 f32, in fusion body 0 3x2 f32"), std::string::npos) << msg;
  // A body that refers to a missing value.
  std::string missing = kAddBody;
  const std::string rhs = "\"rhs\":[1]";
  missing.replace(missing.find(rhs), rhs.size(), "\"rhs\":[7]");
  msg = error("0", missing);
  EXPECT_NE(msg.find("'fusion body 0'.ops[0].operands.rhs: value id 7 out of range (3 values)"),
            std::string::npos)
      << msg;
  msg = error("0", R"({"values":[],"inputs":[],"outputs":[],"ops":[]})");
  EXPECT_NE(msg.find("fusion body 0: missing 'template'"), std::string::npos) << msg;
}

TEST(Artifact, ReadsSections) {
  std::string cubin("\x7f" "ELF\0binary", 10);
  Artifact a = Artifact::load(
      writeTemp("sec.medc", withSections(kPlan, {{"a", "xyz"}, {"cuda.cubin", cubin}, {"e", ""}})));
  EXPECT_EQ(a.sections.size(), 3u);
  EXPECT_EQ(a.sections.at("a"), "xyz");
  EXPECT_EQ(a.sections.at("cuda.cubin"), cubin);
  EXPECT_EQ(a.sections.at("e"), "");
  // Cut inside the second section: the size it declares is reported.
  std::string bytes = withSections(kPlan, {{"a", "xyz"}, {"cuda.cubin", cubin}});
  std::string msg = loadError(writeTemp("seccut.medc", bytes.substr(0, bytes.size() - 8)));
  EXPECT_NE(msg.find("truncated artifact: expected"), std::string::npos) << msg;
  // A flipped byte inside a section breaks the checksum.
  bytes[bytes.size() - 6] ^= 1;
  msg = loadError(writeTemp("secbad.medc", bytes));
  EXPECT_NE(msg.find("corrupted artifact: checksum"), std::string::npos) << msg;
  msg = loadError(writeTemp("secdup.medc", withSections(kPlan, {{"a", "1"}, {"a", "2"}})));
  EXPECT_NE(msg.find("section 'a' appears twice"), std::string::npos) << msg;
}

TEST(Artifact, ValidatesCudaPlan) {
  std::string plan = kPlan;
  auto withPlan = [&](const std::string &cudaPlan, const std::string &cuda) {
    std::string p = plan;
    p.insert(p.rfind("]}]}") + 1, ",\"cuda_plan\":" + cudaPlan);
    p.insert(p.size() - 1, cuda);
    return p;
  };
  // Two modules compiled apart: add_0 in the first, mul_1 in the second; both have the
  // prelude's conversion kernel.
  const std::string cuda = R"(,"cuda":{"arch":"sm_90","nvrtc":"13.0","kernels":2,"launches":1,
    "modules":[{"source":"cuda.source.0","cubin":"cuda.cubin.0","ptx":"cuda.ptx.0"},
               {"source":"cuda.source.1","cubin":"cuda.cubin.1"}]})";
  // add_0's launch contract (plan v11) as medc writes it: the op's signature, the geometry,
  // the role of each argument.
  const std::string signature = opSignature(readPlan(kPlan, "t").functions[0],
                                            readPlan(kPlan, "t").functions[0].ops[1]);
  const std::string good = R"({"scratch":[4],"steps":[
    {"kind":"param","op":0,"name":"w","value":1},
    {"kind":"launch","op":1,"kernel":"add_0","grid":[1,1,1],"block":[256,1,1],"shared":0,
     "args":[2,0,1,3],"scalars":[2]}],"memory":{"arena":512,"offsets":[0,-1,256,0]},
    "kernels":{"add_0":[{"op":"add","signature":")" + signature + R"(","grid":[1,1,1],
      "block":[256,1,1],"shared":0,"args":["result 0","operand lhs 0","operand rhs 0","status"]}]}})";
  const std::string prelude =
      "extern \"C\" __global__ void med_f32_to_bf16(const float *x, bf16 *y, i64 n) {}\n";
  std::vector<std::pair<std::string, std::string>> secs = {
      {"cuda.source.0", prelude + "extern \"C\" __global__ void __launch_bounds__(256) "
                                  "add_0(float *y, const float *a, const float *b, unsigned "
                                  "*status, const unsigned code) {}"},
      {"cuda.cubin.0", "bin"}, {"cuda.ptx.0", "ptx"},
      {"cuda.source.1", prelude + "extern \"C\" __global__ void __launch_bounds__(128) "
                                  "mul_1(float *y, const float *a, const float *b) {}"},
      {"cuda.cubin.1", "bin1"}};
  Artifact a = Artifact::load(writeTemp("plan.medc", withSections(withPlan(good, cuda), secs)));
  ASSERT_TRUE(a.cuda);
  ASSERT_EQ(a.cuda->modules.size(), 2u);
  EXPECT_EQ(a.cuda->modules[0].cubin, "bin");
  EXPECT_EQ(a.cuda->modules[0].ptx, "ptx");
  EXPECT_EQ(a.cuda->modules[1].cubin, "bin1");
  EXPECT_EQ(a.cuda->modules[1].ptx, "");
  EXPECT_EQ(a.cuda->kernelModule,
            (std::map<std::string, size_t>{{"add_0", 0}, {"mul_1", 1}, {"med_f32_to_bf16", 0}}));
  const Function &f = a.function("f");
  ASSERT_TRUE(f.cuda);
  ASSERT_EQ(f.cuda->steps.size(), 2u);
  EXPECT_EQ(f.cuda->steps[1].kernel, "add_0");
  EXPECT_EQ(f.cuda->steps[1].args, (std::vector<int>{2, 0, 1, 3}));
  EXPECT_EQ(f.cuda->arenaBytes, 512);
  EXPECT_EQ(f.cuda->offsets, (std::vector<int64_t>{0, -1, 256, 0}));
  // The memory plan (version 8) must be there, with one offset per buffer.
  for (auto [from, to, expected] : std::vector<std::array<std::string, 3>>{
           {",\"memory\":{\"arena\":512,\"offsets\":[0,-1,256,0]}", "",
            "no 'memory' (the memory plan of plan format 8"},
           {"[0,-1,256,0]", "[0,-1,256]", "'offsets' has 3 entries for 4 buffers"},
           {"[0,-1,256,0]", "[0,-2,256,0]", "offset -2 is neither a byte offset nor -1"}}) {
    std::string edited = good;
    edited.replace(edited.find(from), from.size(), to);
    std::string m = loadError(writeTemp("plan6.medc", withSections(withPlan(edited, cuda), secs)));
    EXPECT_NE(m.find(expected), std::string::npos) << m;
    EXPECT_NE(m.find("function 'f'.cuda_plan"), std::string::npos) << m;
  }
  // Argument 4 is beyond the 3 values and 1 scratch buffer.
  std::string bad = good;
  bad.replace(bad.find("[2,0,1,3]"), 9, "[2,0,1,4]");
  std::string msg = loadError(writeTemp("plan2.medc", withSections(withPlan(bad, cuda), secs)));
  EXPECT_NE(msg.find("argument 4 is neither a value nor a scratch buffer"), std::string::npos)
      << msg;
  // The plan verifier: the kernel must be in a module, launched as its contract says (for
  // this op, with these arguments, this grid and block), take as many pointers as the
  // launch passes (counted in its own module's source), and the launch touch only its op's
  // operands and results.
  for (auto [from, to, expected] : std::vector<std::array<std::string, 3>>{
           {"\"kernel\":\"add_0\"", "\"kernel\":\"sub_0\"", "'kernel': kernel 'sub_0' is in no module"},
           {"\"kernel\":\"add_0\"", "\"kernel\":\"mul_1\"",
            "'kernel': kernel 'mul_1' has no launch contract in this function's cuda_plan.kernels"},
           {"[2,0,1,3]", "[2,1,0,3]",
            "cuda_plan step 1: 'args' [2, 1, 0, 3] are not the buffers kernel 'add_0' takes for "
            "this op: [result 0, operand lhs 0, operand rhs 0, status]"},
           {"\"grid\":[1,1,1],\"block\":[256,1,1],\"shared\":0,\n     \"args\"",
            "\"grid\":[4,1,1],\"block\":[256,1,1],\"shared\":0,\n     \"args\"",
            "'grid' is [4, 1, 1], kernel 'add_0' was generated for grid [1, 1, 1]"},
           {"\"scalars\":[2]", "\"scalars\":[1]", "'scalars' must be [2] (the op's status code)"},
           {"\"op\":1,\"kernel\"", "\"op\":0,\"kernel\"",
            "'kernel': kernel 'add_0' was generated for a 'add' op, not for this 'param'"}}) {
    std::string edited = good;
    edited.replace(edited.find(from), from.size(), to);
    msg = loadError(writeTemp("plan4.medc", withSections(withPlan(edited, cuda), secs)));
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
    EXPECT_NE(msg.find("invalid plan: function 'f'"), std::string::npos) << msg;
  }
  msg = loadError(writeTemp("plan3.medc", withSections(withPlan(good, cuda),
                                                       {secs[0], secs[1], secs[2], secs[3]})));
  EXPECT_NE(msg.find("cuda.modules[1]: 'cubin' names the section 'cuda.cubin.1', which the file "
                     "lacks"),
            std::string::npos)
      << msg;
  std::string noModules = cuda;
  noModules.replace(noModules.find("\"modules\":["), 11, "\"modules\":[],\"x\":[");
  msg = loadError(writeTemp("plan5.medc", withSections(withPlan(good, noModules), secs)));
  EXPECT_NE(msg.find("cuda: 'modules' must be a non-empty list"), std::string::npos) << msg;
}

TEST(Artifact, RejectsTruncated) {
  std::string bytes = container(kPlan);
  std::string msg = loadError(writeTemp("cut.medc", bytes.substr(0, bytes.size() - 10)));
  EXPECT_NE(msg.find("truncated artifact: expected " + std::to_string(bytes.size()) + " bytes"),
            std::string::npos)
      << msg;
  msg = loadError(writeTemp("tiny.medc", bytes.substr(0, 12)));
  EXPECT_NE(msg.find("truncated artifact"), std::string::npos) << msg;
}

TEST(Artifact, RejectsCorrupted) {
  std::string bytes = container(kPlan);
  bytes[40] ^= 0x20;
  std::string msg = loadError(writeTemp("bad.medc", bytes));
  EXPECT_NE(msg.find("corrupted artifact: checksum"), std::string::npos) << msg;
}

TEST(Artifact, RejectsOtherFilesAndMissing) {
  EXPECT_NE(loadError(writeTemp("npy.medc", "\x93NUMPY")).find("not a medc artifact"),
            std::string::npos);
  EXPECT_NE(loadError("/nonexistent/x.medc").find("cannot open the artifact"), std::string::npos);
}

TEST(Artifact, RejectsMalformedPlans) {
  std::string plan = kPlan;
  std::string undefined = plan;
  undefined.replace(undefined.find("\"lhs\":[0]"), 9, "\"lhs\":[2]");
  std::string msg = loadError(writeTemp("undef.medc", container(undefined)));
  EXPECT_NE(msg.find("uses value 2 before it is defined"), std::string::npos) << msg;
  std::string badId = plan;
  badId.replace(badId.find("\"outputs\":[2]"), 13, "\"outputs\":[9]");
  msg = loadError(writeTemp("id.medc", container(badId)));
  EXPECT_NE(msg.find("value id 9 out of range (3 values)"), std::string::npos) << msg;
  msg = loadError(writeTemp("json.medc", container("{\"format\":")));
  EXPECT_NE(msg.find("malformed artifact"), std::string::npos) << msg;
}

// `init: constant` needs a finite value within f32; CPU initialization fills it.
TEST(Artifact, ReadsConstantInit) {
  std::string uniform = R"("init":"uniform","fan_in":3)";
  auto with = [&](const std::string &init) {
    std::string plan = kPlan;
    return plan.replace(plan.find(uniform), uniform.size(), init);
  };
  Artifact a = Artifact::load(writeTemp("const.medc", container(with(R"("init":"constant","value":0.25)"))));
  EXPECT_EQ(a.parameter("w")->value, 0.25f);
  EXPECT_EQ(initParameters(a, 1).at("w").data<float>()[5], 0.25f);
  for (const char *bad : {R"("init":"constant")", R"("init":"constant","value":"x")",
                          R"("init":"constant","value":1e39)"}) {
    std::string msg = loadError(writeTemp("badconst.medc", container(with(bad))));
    EXPECT_NE(msg.find("parameter 'w'"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("value"), std::string::npos) << bad << ": " << msg;
  }
}

// A training step's precision and init_loss_scale, and the `fp32` flag of its ops.
TEST(Artifact, ReadsPrecision) {
  std::string plan = kPlan;
  plan.replace(plan.find("\"outputs\":[2]"), 13,
               "\"outputs\":[2],\"precision\":\"fp16-mixed\",\"init_loss_scale\":65536");
  plan.replace(plan.find("\"loc\":\"\""), 8, "\"loc\":\"\",\"fp32\":true");
  // A mixed-precision function records how each value is stored (med-assign-storage).
  std::string unstored = plan;
  const std::string shape = "\"shape\":[2,3]}";
  for (const char *storage : {"f16", "f16", "f32"})
    plan.replace(plan.find(shape), shape.size(),
                 std::string("\"shape\":[2,3],\"storage\":\"") + storage + "\"}");
  Artifact a = Artifact::load(writeTemp("prec.medc", container(plan)));
  const Function &f = a.function("f");
  EXPECT_EQ(f.precision, "fp16-mixed");
  EXPECT_EQ(f.initLossScale, 65536);
  EXPECT_FALSE(f.ops[0].fp32);
  EXPECT_TRUE(f.ops[1].fp32);
  EXPECT_EQ(f.values[0].storage, DType::F16);
  EXPECT_EQ(f.values[2].storage, DType::F32);
  std::string msg = loadError(writeTemp("unstored.medc", container(unstored)));
  EXPECT_NE(msg.find("function 'f'.values[0]: a fp16-mixed function needs the storage type of "
                     "every value"),
            std::string::npos)
      << msg;
  std::string intStored = plan;
  intStored.replace(intStored.find("\"storage\":\"f32\""), 15, "\"storage\":\"i32\"");
  msg = loadError(writeTemp("intstored.medc", container(intStored)));
  EXPECT_NE(msg.find("function 'f'.values[2]: storage i32 for a value of type f32"),
            std::string::npos)
      << msg;
  // Absent: no precision recorded, no op marked.
  Artifact plain = Artifact::load(writeTemp("plain.medc", container(kPlan)));
  EXPECT_EQ(plain.function("f").precision, "");
  EXPECT_FALSE(plain.function("f").ops[1].fp32);

  std::string bad = kPlan;
  bad.replace(bad.find("\"outputs\":[2]"), 13, "\"outputs\":[2],\"precision\":\"fp8\"");
  msg = loadError(writeTemp("badprec.medc", container(bad)));
  EXPECT_NE(msg.find("function 'f': unknown precision 'fp8' (expected fp32, bf16-mixed or "
                     "fp16-mixed)"),
            std::string::npos)
      << msg;
  bad = kPlan;
  bad.replace(bad.find("\"outputs\":[2]"), 13, "\"outputs\":[2],\"init_loss_scale\":-1");
  msg = loadError(writeTemp("badscale.medc", container(bad)));
  EXPECT_NE(msg.find("'init_loss_scale' must be a positive number"), std::string::npos) << msg;
  bad = kPlan;
  bad.replace(bad.find("\"loc\":\"\""), 8, "\"loc\":\"\",\"fp32\":1");
  msg = loadError(writeTemp("badflag.medc", container(bad)));
  EXPECT_NE(msg.find("'fp32' must be true or false"), std::string::npos) << msg;
  // The instance-norm mark (medc's med.instance_norm): absent is false, read when present.
  EXPECT_FALSE(plain.function("f").ops[1].instanceNorm);
  std::string marked = kPlan;
  marked.replace(marked.find("\"loc\":\"\""), 8, "\"loc\":\"\",\"instance_norm\":true");
  EXPECT_TRUE(Artifact::load(writeTemp("marked.medc", container(marked)))
                  .function("f")
                  .ops[1]
                  .instanceNorm);
  bad = kPlan;
  bad.replace(bad.find("\"loc\":\"\""), 8, "\"loc\":\"\",\"instance_norm\":\"yes\"");
  msg = loadError(writeTemp("badmark.medc", container(bad)));
  EXPECT_NE(msg.find("'instance_norm' must be true or false"), std::string::npos) << msg;
}

// Known-answer vectors of Philox4x32-10 (Random123's kat_vectors).
TEST(Random, PhiloxKnownAnswers) {
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                       {0xffffffffu, 0xffffffffu}),
            (PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                       {0xa4093822u, 0x299f31d0u}),
            (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Random, Crc32MatchesZlib) {
  // zlib.crc32(b"123456789") == 0xcbf43926, the CRC-32 check value.
  EXPECT_EQ(crc32("123456789", 9), 0xcbf43926u);
}

} // namespace
