// JSON schemas through llguidance with real tokenizers: the official JSON Schema Test Suite
// (draft4, npm json-schema-test-suite in build/fixtures) and tests/structured/schemas (realistic
// schemas written by tools/structured/make_schemas.py). For each schema that compiles, every
// valid instance (compact and indented) is accepted token by token and ends where EOS is allowed;
// no invalid instance is. What does not hold yet is listed in tests/structured/ratchet.txt, which
// may only shrink.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "structured_util.h"
#include "test_support.h"

namespace mlxcpp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path suite_dir() {
  return test::source_dir() / "build" / "fixtures" / "node_modules" / "json-schema-test-suite" / "tests";
}

fs::path ratchet_path() { return test::source_dir() / "tests" / "structured" / "ratchet.txt"; }

// The ratchet's cases for one tokenizer (lines "<tokenizer> <case>"; '#' starts a comment).
std::set<std::string> ratchet_for(const std::string& tokenizer) {
  std::ifstream in(ratchet_path());
  std::set<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind(tokenizer + " ", 0) == 0) out.insert(line);
  }
  return out;
}

// Files of the test-suite format: [{description, schema, tests: [{description, data, valid}]}].
std::vector<fs::path> case_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

// Runs every case of `files` (named relative to `root`) and returns the failing case names.
std::set<std::string> failing_cases(const test::TokenizerUnderTest& t, const fs::path& root,
                                    const std::vector<fs::path>& files, size_t* n_checked) {
  std::set<std::string> failing;
  for (const auto& file : files) {
    std::ifstream in(file);
    const json groups = json::parse(in);
    const std::string rel = fs::relative(file, root).generic_string();
    for (const auto& group : groups) {
      const std::string gname = t.name + " " + rel + ": " + one_line(group["description"].get<std::string>());
      std::optional<Grammar> grammar;
      try {
        grammar.emplace(t.env->compile({GrammarKind::kJsonSchema, group["schema"].dump(), -1}));
      } catch (const RequestError& e) {
        failing.insert(gname + " / (compile)");
        continue;
      }
      for (const auto& tc : group["tests"]) {
        const bool valid = tc["valid"].get<bool>();
        const std::string cname = gname + " / " + one_line(tc["description"].get<std::string>());
        std::vector<std::pair<std::string, std::string>> forms = {{"compact", tc["data"].dump()}};
        if (valid) forms.emplace_back("indented", tc["data"].dump(2));
        for (const auto& [form, text] : forms) {
          ++*n_checked;
          if (test::feed_text(*grammar, t, text).accepted != valid) failing.insert(cname + " [" + form + "]");
        }
      }
    }
  }
  return failing;
}

void expect_matches_ratchet(const std::string& tokenizer, const std::set<std::string>& failing,
                            const std::string& prefix) {
  std::set<std::string> listed;
  for (const auto& c : ratchet_for(tokenizer))
    if (c.rfind(tokenizer + " " + prefix, 0) == 0) listed.insert(c);
  for (const auto& c : failing)
    EXPECT_TRUE(listed.count(c)) << "fails and is not in " << ratchet_path().string() << " (fix it, or list it):\n"
                                 << c;
  for (const auto& c : listed)
    EXPECT_TRUE(failing.count(c)) << "passes now: remove it from the ratchet " << ratchet_path().string() << ":\n"
                                  << c;
}

class SchemaSuite : public ::testing::TestWithParam<std::string> {};

TEST_P(SchemaSuite, JsonSchemaTestSuiteDraft4) {
  const auto root = suite_dir();
  if (!fs::exists(root / "draft4")) GTEST_SKIP() << root << " is missing: run `make fixtures`";
  const auto& t = test::structured_tokenizer(GetParam());
  size_t n = 0;
  const auto failing = failing_cases(t, root, case_files(root / "draft4"), &n);
  EXPECT_GT(n, 300u);  // instances (and forms) of the schemas that compile
  expect_matches_ratchet(t.name, failing, "draft4/");
}

TEST_P(SchemaSuite, RealisticSchemas) {
  const auto root = test::source_dir() / "tests" / "structured";
  const auto& t = test::structured_tokenizer(GetParam());
  size_t n = 0;
  const auto files = case_files(root / "schemas");
  const auto failing = failing_cases(t, root, files, &n);
  size_t n_schemas = 0;
  for (const auto& f : files) n_schemas += json::parse(std::ifstream(f)).size();
  EXPECT_GE(n_schemas, 100u);
  expect_matches_ratchet(t.name, failing, "schemas/");
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, SchemaSuite, ::testing::Values("smollm2", "gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mlxcpp
