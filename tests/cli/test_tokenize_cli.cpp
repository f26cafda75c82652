// `mlxcpp tokenize` against transformers' ids (tools/oracle/tokenizer_goldens.py) for fixture
// tokenizers: --text (plain and --json, with and without --add-special) and --file over the
// whole single-line corpus.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "test_support.h"

using nlohmann::json;
using namespace mlxcpp::test;

namespace {

json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error(p.string() + " is missing: run tools/oracle/tokenizer_goldens.py (make goldens)");
  return json::parse(in);
}

struct Golden {
  std::string dir;
  std::vector<std::string> strings;
  json cases;
};

Golden golden(const std::string& name) {
  auto root = golden_dir() / "tokenizer";
  auto g = read_json(root / (name + ".json"));
  return {g.at("dir"), read_json(root / "corpus.json").at("strings").get<std::vector<std::string>>(), g.at("cases")};
}

std::vector<int> ids_of(const json& j) { return j.get<std::vector<int>>(); }

class CliTokenize : public ::testing::TestWithParam<std::string> {};

TEST_P(CliTokenize, TextEqualsTransformers) {
  auto g = golden(GetParam());
  // Corpus strings of four kinds: ASCII, CJK, an emoji ZWJ sequence, a special-token lookalike.
  for (size_t i : {7u, 15u, 30u, 75u}) {
    ASSERT_LT(i, g.strings.size());
    const auto& s = g.strings[i];
    SCOPED_TRACE("string " + std::to_string(i) + ": " + s);
    auto plain = run_cli("tokenize --model " + quote(g.dir) + " --text " + quote(s));
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_EQ(plain.out, join_ids(ids_of(g.cases[i]["ids_plain"]), " ") + "\n");
    auto special = run_cli("tokenize --json --add-special --model " + quote(g.dir) + " --text " + quote(s));
    ASSERT_EQ(special.exit_code, 0) << special.err;
    EXPECT_EQ(ids_of(json::parse(special.out)), ids_of(g.cases[i]["ids"]));
  }
}

TEST_P(CliTokenize, FileLinesEqualTransformers) {
  auto g = golden(GetParam());
  TempDir tmp("cli_tok");
  auto file = tmp.path() / "lines.txt";
  std::vector<size_t> picked;
  {
    std::ofstream out(file, std::ios::binary);
    for (size_t i = 0; i < g.strings.size(); ++i) {
      if (g.strings[i].find('\n') != std::string::npos) continue;  // one string per line
      out << g.strings[i] << "\n";
      picked.push_back(i);
    }
  }
  ASSERT_GT(picked.size(), 1000u);
  for (bool special : {false, true}) {
    auto r = run_cli(std::string("tokenize ") + (special ? "--add-special " : "") + "--model " + quote(g.dir) +
                     " --file " + quote(file.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::string line;
    size_t n = 0;
    for (; std::getline(lines, line); ++n) {
      ASSERT_LT(n, picked.size());
      const auto& expect = g.cases[picked[n]][special ? "ids" : "ids_plain"];
      ASSERT_EQ(ids_of(json::parse(line)), ids_of(expect)) << "string " << picked[n] << ": " << g.strings[picked[n]];
    }
    EXPECT_EQ(n, picked.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CliTokenize, ::testing::Values("qwen3", "llama3", "llama2", "gemma3"));

TEST(CliTokenizeErrors, MissingInputsAndFiles) {
  auto g = golden("qwen3");
  expect_one_line_error(run_cli("tokenize --model " + quote(g.dir)), "--text");
  expect_one_line_error(run_cli("tokenize --model " + quote(g.dir) + " --file /nonexistent/lines.txt"),
                        "/nonexistent/lines.txt");
  expect_one_line_error(run_cli("tokenize --model /nonexistent/model --text hi"), "/nonexistent/model");
}

}  // namespace
