// check_tool_arguments: valid arguments pass; each kind of violation names the failing path.
#include <gtest/gtest.h>

#include "chat/output_parsers.h"

namespace mlxcpp {
namespace {

using Json = nlohmann::ordered_json;

const Json& schema() {
  static const Json kSchema = Json::parse(R"({
    "type": "object",
    "properties": {
      "city": {"type": "string", "minLength": 2},
      "days": {"type": "integer", "minimum": 1, "maximum": 14},
      "unit": {"enum": ["celsius", "fahrenheit"]},
      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
      "where": {"$ref": "#/$defs/point"},
      "when": {"anyOf": [{"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}, {"type": "null"}]},
      "ratio": {"type": ["number", "null"], "exclusiveMinimum": 0}
    },
    "required": ["city"],
    "additionalProperties": false,
    "$defs": {"point": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                        "required": ["lat", "lon"]}}
  })");
  return kSchema;
}

std::string error_of(const std::string& args) { return check_tool_arguments(schema(), args).value_or("(valid)"); }

TEST(ToolArgumentsSchema, ValidArguments) {
  EXPECT_EQ(error_of(R"({"city": "Paris"})"), "(valid)");
  EXPECT_EQ(error_of(R"({"city": "Zürich", "days": 3, "unit": "celsius", "tags": ["a", "b"],
                         "where": {"lat": 47.4, "lon": 8.5}, "when": "2025-01-31", "ratio": 0.5})"),
            "(valid)");
  EXPECT_EQ(error_of(R"({"city": "Rome", "days": 2.0, "when": null, "ratio": null})"), "(valid)");  // 2.0 is an integer
  EXPECT_EQ(check_tool_arguments(Json::object(), R"({"anything": [1]})"), std::nullopt);
}

TEST(ToolArgumentsSchema, ViolationsNameThePath) {
  EXPECT_EQ(error_of(R"({"days": 3})"), "arguments.city: required property is missing");
  EXPECT_EQ(error_of(R"({"city": 3})"), "arguments.city: expected string, got integer 3");
  EXPECT_EQ(error_of(R"({"city": "P"})"), "arguments.city: string shorter than minLength 2");
  EXPECT_EQ(error_of(R"({"city": "Paris", "days": 2.5})"), "arguments.days: expected integer, got number 2.5");
  EXPECT_EQ(error_of(R"({"city": "Paris", "days": 15})"), "arguments.days: 15 is above the maximum 14");
  EXPECT_EQ(error_of(R"({"city": "Paris", "unit": "kelvin"})"),
            "arguments.unit: \"kelvin\" is not one of [\"celsius\",\"fahrenheit\"]");
  EXPECT_EQ(error_of(R"({"city": "Paris", "tags": ["a", 2]})"), "arguments.tags[1]: expected string, got integer 2");
  EXPECT_EQ(error_of(R"({"city": "Paris", "tags": ["a", "b", "c", "d"]})"), "arguments.tags: more than maxItems 3 items");
  EXPECT_EQ(error_of(R"({"city": "Paris", "where": {"lat": 1}})"), "arguments.where.lon: required property is missing");
  EXPECT_EQ(error_of(R"({"city": "Paris", "country": "FR"})"),
            "arguments.country: property is not allowed (additionalProperties is false)");
  EXPECT_EQ(error_of(R"({"city": "Paris", "ratio": 0})"), "arguments.ratio: 0 is not above 0");
  EXPECT_EQ(error_of(R"({"city": "Paris", "when": "tomorrow"})"),
            "arguments.when: matches none of anyOf (first: arguments.when: \"tomorrow\" does not match pattern "
            "\"^[0-9]{4}-[0-9]{2}-[0-9]{2}$\")");
  EXPECT_EQ(error_of(R"(["Paris"])"), "arguments: expected object, got array [\"Paris\"]");
}

TEST(ToolArgumentsSchema, BrokenJson) {
  EXPECT_EQ(error_of(R"({"city": "Par)"), "arguments: not valid JSON: \"{\\\"city\\\": \\\"Par\"");
  EXPECT_EQ(error_of(""), "arguments: not valid JSON: \"\"");
}

}  // namespace
}  // namespace mlxcpp
