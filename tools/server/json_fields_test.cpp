#include "server/json_fields.h"

#include <gtest/gtest.h>

namespace sd::server {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const BadRequest& e) {
    return e.what();
  }
  return "";
}

TEST(JsonFields, ReadsTypedValuesAndTreatsNullAsAbsent) {
  const nlohmann::json j = {{"steps", 20}, {"w", 512.0}, {"cfg", 7.5},
                            {"p", "cat"},  {"on", true}, {"none", nullptr}};
  const JsonFields f(j, "");
  EXPECT_EQ(f.integer("steps", 1, 100), 20);
  EXPECT_EQ(f.integer("w", 1, 4096), 512);
  EXPECT_EQ(f.number("cfg", 0, 30), 7.5);
  EXPECT_EQ(f.text("p"), "cat");
  EXPECT_EQ(f.boolean("on"), true);
  EXPECT_FALSE(f.text("none"));
  EXPECT_FALSE(f.integer("missing", 0, 1));
}

TEST(JsonFields, ErrorsNameTheFieldByItsPath) {
  const nlohmann::json j = {{"sample_params", {{"sample_steps", "ten"}, {"eta", -1}}}};
  const JsonFields f(j, "");
  const auto s = f.object("sample_params");
  ASSERT_TRUE(s);
  EXPECT_EQ(error_of([&] { s->integer("sample_steps", 1, 100); }),
            "field 'sample_params.sample_steps' must be an integer, got a string");
  EXPECT_EQ(error_of([&] { s->number("eta", 0, 1); }),
            "field 'sample_params.eta' must be from 0.0 to 1.0, got -1");
  EXPECT_NE(error_of([&] { f.reject_unknown({"prompt"}); }).find("unknown field 'sample_params'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { JsonFields(nlohmann::json::array(), ""); }).find("JSON object"),
            std::string::npos);
}

TEST(JsonFields, BodyParsingSaysWhatIsWrong) {
  EXPECT_NE(error_of([] { parse_json_body(""); }).find("empty"), std::string::npos);
  EXPECT_NE(error_of([] { parse_json_body("{oops"); }).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of([] { parse_json_body("[1]"); }).find("JSON object"), std::string::npos);
  EXPECT_EQ(parse_json_body("{\"a\": 1}")["a"], 1);
}

// 58,000 nested arrays in a 117 KB body crashed the server (a recursion per level when the
// answer copied it): refused before parsing. Brackets inside strings are text.
TEST(JsonFields, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = "{\"x\": " + std::string(58000, '[') + std::string(58000, ']') + "}";
  EXPECT_NE(error_of([&] { parse_json_body(deep); }).find("more than 400 deep"), std::string::npos);
  const std::string ok = "{\"x\": " + std::string(399, '[') + std::string(399, ']') + "}";
  EXPECT_TRUE(parse_json_body(ok).is_object());
  const std::string text = "{\"prompt\": \"" + std::string(1000, '[') + "\\\"{{\"}";
  EXPECT_EQ(parse_json_body(text)["prompt"].get<std::string>().size(), 1003u);
  EXPECT_NE(error_of([] { parse_json_body("[1, 2]"); }).find("must be a JSON object"),
            std::string::npos);
}

}  // namespace
}  // namespace sd::server
