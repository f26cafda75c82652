// `mlxcpp embed` against tools/oracle/embedding_goldens.py: texts through a tiny qwen3 carrying
// the real Qwen3 tokenizer with Qwen3-Embedding's post-processor (transformers' ids, the
// <|endoftext|> appended; mlx-lm's pooled, normalized vectors bit for bit with --parity, within
// cosine 0.9999 on the fast path), --file, --ids on a tiny checkpoint, --dimensions,
// --no-normalize, and one-line errors naming the input or option.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <mlx/mlx.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "golden_model.h"
#include "test_support.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace mlxcpp::test;

namespace {

const json& text_golden() {
  static const json g = load_golden_json("embedding/text.json", "embedding_goldens.py");
  return g;
}

std::string text_model() { return quote((golden_dir() / text_golden().at("model").get<std::string>()).string()); }

// The JSON lines of a successful run.
std::vector<json> lines_of(const CliResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> out;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

std::vector<float> floats(const json& j) {
  std::vector<float> v;
  for (const auto& x : j) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

std::vector<float> floats(mlx::core::array a) {
  mlx::core::eval(a);
  return {a.data<float>(), a.data<float>() + a.size()};
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

std::string text_args() {
  std::string args;
  for (const auto& c : text_golden().at("cases")) args += " --text " + quote(c.at("text").get<std::string>());
  return args;
}

TEST(CliEmbed, TextsEqualMlxLmInParity) {
  const auto& cases = text_golden().at("cases");
  auto lines = lines_of(run_cli("embed --parity --model " + text_model() + text_args()));
  ASSERT_EQ(lines.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].at("text").get<std::string>());
    EXPECT_EQ(lines[i].at("index"), i);
    EXPECT_EQ(lines[i].at("tokens"), cases[i].at("ids"));  // transformers' ids, <|endoftext|> last
    EXPECT_EQ(floats(lines[i].at("embedding")), floats(cases[i].at("embedding")));
  }
  const int d = text_golden().at("dimensions");
  auto dims =
      lines_of(run_cli("embed --parity --dimensions " + std::to_string(d) + " --model " + text_model() + text_args()));
  ASSERT_EQ(dims.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(floats(dims[i].at("embedding")), floats(cases[i].at("embedding_dim"))) << "case " << i;
  }
}

TEST(CliEmbed, FastPathAndFileLines) {
  const auto& cases = text_golden().at("cases");
  TempDir tmp("cli_embed");
  auto file = tmp.path() / "lines.txt";
  std::vector<size_t> on_lines;  // cases without a newline, one per line
  {
    std::ofstream out(file, std::ios::binary);
    for (size_t i = 0; i < cases.size(); ++i) {
      auto t = cases[i].at("text").get<std::string>();
      if (t.find('\n') != std::string::npos) continue;
      out << t << "\n";
      on_lines.push_back(i);
    }
  }
  ASSERT_GE(on_lines.size(), 2u);
  auto lines = lines_of(run_cli("embed --model " + text_model() + " --file " + quote(file.string())));
  ASSERT_EQ(lines.size(), on_lines.size());
  for (size_t k = 0; k < on_lines.size(); ++k) {
    const auto& c = cases[on_lines[k]];
    EXPECT_EQ(lines[k].at("tokens"), c.at("ids"));
    EXPECT_GE(cosine(floats(lines[k].at("embedding")), floats(c.at("embedding"))), 0.9999) << "line " << k + 1;
  }
}

TEST(CliEmbed, IdsOnATinyCheckpoint) {
  auto g = load_golden_file("embedding", "qwen3-bf16", "embedding_goldens.py");
  ASSERT_TRUE(g.has_value());
  const std::string model = quote(tiny_model_dir("qwen3-bf16"));
  std::string args;
  std::vector<std::vector<int>> ids;
  for (int i = 0; i < std::stoi(g->field("count")); ++i) {
    std::vector<int> v;
    for (int64_t x : int64s(g->at("ids_" + std::to_string(i)))) v.push_back(static_cast<int>(x));
    args += " --ids " + join_ids(v);
    ids.push_back(v);
  }
  auto lines = lines_of(run_cli("embed --parity --model " + model + args));
  auto raw = lines_of(run_cli("embed --parity --no-normalize --model " + model + args));
  ASSERT_EQ(lines.size(), ids.size());
  ASSERT_EQ(raw.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(lines[i].at("tokens").get<std::vector<int>>(), ids[i]);
    EXPECT_EQ(floats(lines[i].at("embedding")), floats(g->at("emb_" + std::to_string(i)))) << "input " << i;
    EXPECT_EQ(floats(raw[i].at("embedding")), floats(g->at("hidden_" + std::to_string(i)))) << "input " << i;
  }
}

TEST(CliEmbed, ErrorsNameTheInput) {
  const int context = text_golden().at("context_length");
  std::string long_text;
  for (int i = 0; i < context + 8; ++i) long_text += " word";
  expect_one_line_error(run_cli("embed --model " + text_model() + " --text hi --text " + quote(long_text)),
                        "--text 2");
  expect_one_line_error(run_cli("embed --model " + text_model() + " --text ''"), "--text 1 is empty");
  expect_one_line_error(run_cli("embed --model " + text_model() + " --dimensions 100000 --text hi"), "--dimensions");
  expect_one_line_error(run_cli("embed --model " + text_model() + " --ids 1,x"), "--ids 1");
  expect_one_line_error(run_cli("embed --model " + text_model()), "--text");
}

}  // namespace
