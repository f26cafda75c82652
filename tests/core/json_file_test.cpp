// JsonView: every error is a ConfigError naming the file and the dotted field path.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_file.h"

namespace fs = std::filesystem;
using namespace mlxcpp;
using nlohmann::json;

namespace {

// The message of the ConfigError `f` throws; any other outcome fails the test.
std::string config_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a ConfigError, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected a ConfigError, nothing was thrown";
  return {};
}

void expect_contains(const std::string& msg, std::initializer_list<std::string> parts) {
  for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("mlxcpp-json-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
    return path_ / name;
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

const json kDoc = json::parse(R"({
  "i": 7, "f": 4096.0, "half": 2.5, "s": "text", "b": true, "n": null, "neg": -3,
  "big": 18446744073709551615, "huge": 1e300, "wide": 4294967424,
  "obj": {"inner": {"x": "str"}, "list": [1, 2, 3], "bad_list": [1, "two"]},
  "arr": [1, 2]
})");

JsonView root() { return JsonView(&kDoc, "dir/config.json"); }

}  // namespace

TEST(JsonFile, ParsesAFile) {
  TempDir dir;
  auto f = dir.write("c.json", R"({"a": 1})");
  EXPECT_EQ(JsonView::parse_file(f)["a"], 1);
}

TEST(JsonFile, MissingFileNamesIt) {
  TempDir dir;
  auto msg = config_error([&] { JsonView::parse_file(dir.path() / "config.json"); });
  expect_contains(msg, {(dir.path() / "config.json").string(), "does not exist"});
}

TEST(JsonFile, DirectoryIsNotAFile) {
  TempDir dir;
  fs::create_directories(dir.path() / "config.json");
  auto msg = config_error([&] { JsonView::parse_file(dir.path() / "config.json"); });
  expect_contains(msg, {(dir.path() / "config.json").string(), "not a regular file"});
}

TEST(JsonFile, InvalidJsonNamesTheFile) {
  TempDir dir;
  for (const char* text : {"{\"a\": ", "", "not json", "{\"a\": 1} trailing"}) {
    auto f = dir.write("bad.json", text);
    auto msg = config_error([&] { JsonView::parse_file(f); });
    expect_contains(msg, {f.string(), "invalid JSON"});
  }
}

TEST(JsonFile, TypedAccess) {
  auto r = root();
  EXPECT_EQ(r.req_int("i"), 7);
  EXPECT_EQ(r.req_int("f"), 4096);  // Python writes integral floats too
  EXPECT_EQ(r.req_int("neg"), -3);
  EXPECT_DOUBLE_EQ(r.req_number("half"), 2.5);
  EXPECT_EQ(r.req_string("s"), "text");
  EXPECT_TRUE(r.bool_or("b", false));
  EXPECT_EQ(r.int_or("absent", 5), 5);
  EXPECT_EQ(r.int_or("n", 5), 5);  // null counts as absent
  EXPECT_FALSE(r.has("n"));
  EXPECT_FALSE(r.opt_int("absent").has_value());
  EXPECT_EQ(r.string_or("absent", "d"), "d");
  EXPECT_EQ(r.at("obj").at("inner").req_string("x"), "str");
  EXPECT_FALSE(r.get("absent").has_value());
  EXPECT_EQ(r.at("obj").int_list("list"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(r.int_list("i"), (std::vector<int64_t>{7}));
  EXPECT_TRUE(r.int_list("absent").empty());
  EXPECT_EQ(r.req_int32("i"), 7);
  EXPECT_EQ(r.int32_or("absent", 9), 9);
}

TEST(JsonFile, MissingRequiredField) {
  auto msg = config_error([] { root().req_int("num_hidden_layers"); });
  expect_contains(msg, {"dir/config.json", "field 'num_hidden_layers'", "missing"});
  msg = config_error([] { root().req_string("n"); });  // null is missing
  expect_contains(msg, {"field 'n'", "missing"});
}

TEST(JsonFile, IllTypedFieldsNameTheValue) {
  auto msg = config_error([] { root().req_int("s"); });
  expect_contains(msg, {"dir/config.json", "field 's'", "expected an integer", "\"text\""});
  msg = config_error([] { root().req_int("half"); });
  expect_contains(msg, {"field 'half'", "2.5"});
  msg = config_error([] { root().req_number("s"); });
  expect_contains(msg, {"field 's'", "expected a number"});
  msg = config_error([] { root().req_string("i"); });
  expect_contains(msg, {"field 'i'", "expected a string"});
  msg = config_error([] { root().bool_or("i", false); });
  expect_contains(msg, {"field 'i'", "expected a boolean"});
  msg = config_error([] { root().at("s"); });
  expect_contains(msg, {"field 's'", "expected an object"});
  msg = config_error([] { root().get("arr"); });
  expect_contains(msg, {"field 'arr'", "expected an object"});
}

TEST(JsonFile, NestedFieldsUseDottedPaths) {
  auto msg = config_error([] { root().at("obj").at("inner").req_int("x"); });
  expect_contains(msg, {"dir/config.json", "field 'obj.inner.x'"});
  msg = config_error([] { root().at("obj").req_int("missing"); });
  expect_contains(msg, {"field 'obj.missing'", "missing"});
  msg = config_error([] { root().at("obj").int_list("bad_list"); });
  expect_contains(msg, {"field 'obj.bad_list'", "\"two\""});
  msg = config_error([] { root().int_list("s"); });
  expect_contains(msg, {"field 's'", "list of integers"});
}

TEST(JsonFile, OutOfRangeIntegersAreErrorsNotWraps) {
  // 2^64 - 1 used to wrap to -1, and casting 1e300 to int64 is undefined behaviour.
  auto msg = config_error([] { root().req_int("big"); });
  expect_contains(msg, {"field 'big'", "18446744073709551615"});
  msg = config_error([] { root().req_int("huge"); });
  expect_contains(msg, {"field 'huge'", "expected an integer"});
  msg = config_error([] { root().int_list("big"); });
  expect_contains(msg, {"field 'big'", "out of range"});
  msg = config_error([] { root().req_int32("wide"); });
  expect_contains(msg, {"field 'wide'", "4294967424", "32-bit"});
  EXPECT_EQ(root().req_int("wide"), 4294967424LL);
}

TEST(JsonFile, MemberOfANonObject) {
  const json arr = json::array({1, 2});
  JsonView v(&arr, "x.json");
  auto msg = config_error([&] { v.req_int("a"); });
  expect_contains(msg, {"x.json", "<root>", "must be an object"});
  JsonView nested(&arr, "x.json", "rope_scaling");
  msg = config_error([&] { nested.req_string("type"); });
  expect_contains(msg, {"x.json", "'rope_scaling'", "must be an object"});
}

TEST(JsonFile, FailFormat) {
  auto msg = config_error([] { root().at("obj").fail("list", "'foo' is not supported"); });
  EXPECT_EQ(msg, "dir/config.json: field 'obj.list': 'foo' is not supported");
}
