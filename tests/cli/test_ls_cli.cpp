// `mlxcpp ls`: snapshots under --models-dir and in the Hugging Face cache layout ($HF_HOME/hub,
// refs/main -> snapshots/HASH, files linked to blobs), each line with family, status,
// quantization and size; `--families`; names `ls` shows accepted wherever --model is.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace mlxcpp::test;

namespace {

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// The line of `out` that starts with `name` followed by a space ("" if none).
std::string line_of(const std::string& out, const std::string& name) {
  size_t at = 0;
  while (at < out.size()) {
    const size_t end = out.find('\n', at);
    std::string line = out.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (line.rfind(name + " ", 0) == 0) return line;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return "";
}

// HF_HOME for the child processes this test starts (restored after).
class ScopedHfHome {
 public:
  explicit ScopedHfHome(const fs::path& home) {
    if (const char* v = std::getenv("HF_HOME")) old_ = v;
    if (const char* v = std::getenv("HF_HUB_CACHE")) old_hub_ = v;
    ::setenv("HF_HOME", home.c_str(), 1);
    ::unsetenv("HF_HUB_CACHE");
  }
  ~ScopedHfHome() {
    if (old_) ::setenv("HF_HOME", old_->c_str(), 1);
    else ::unsetenv("HF_HOME");
    if (old_hub_) ::setenv("HF_HUB_CACHE", old_hub_->c_str(), 1);
  }

 private:
  std::optional<std::string> old_, old_hub_;
};

// A cache entry models--ORG--NAME whose refs/main names snapshot `hash`, its files links into
// blobs/ (as huggingface_hub writes them); the blobs link to `from`'s files (no 100 MB copies).
void cache_entry(const fs::path& hub, const std::string& org, const std::string& name, const fs::path& from) {
  const fs::path entry = hub / ("models--" + org + "--" + name);
  const std::string hash = "0123abcd";
  write(entry / "refs" / "main", hash);
  fs::create_directories(entry / "snapshots" / hash);
  fs::create_directories(entry / "blobs");
  int i = 0;
  for (const auto& f : fs::directory_iterator(from)) {
    if (!f.is_regular_file()) continue;
    const fs::path blob = entry / "blobs" / ("blob" + std::to_string(i++));
    fs::create_symlink(fs::absolute(f.path()), blob);
    fs::create_symlink(fs::path("..") / ".." / "blobs" / blob.filename(), entry / "snapshots" / hash / f.path().filename());
  }
}

}  // namespace

TEST(CliLs, ListsModelsDirAndHfCacheWithStatusQuantizationAndSize) {
  TempDir tmp("ls");
  const fs::path models = tmp.path() / "models", home = tmp.path() / "hf";
  const std::string weights(2000, 'w');
  write(models / "good" / "config.json",
        R"({"model_type": "qwen3", "quantization": {"group_size": 64, "bits": 4, "mode": "affine"}})");
  write(models / "good" / "model.safetensors", weights);
  write(models / "good" / "tokenizer.json", "{}");
  write(models / "mixed" / "config.json",
        R"({"model_type": "llama", "quantization": {"group_size": 32, "bits": 4, "mode": "affine",
            "model.layers.0.mlp.down_proj": {"group_size": 32, "bits": 8}}})");
  write(models / "mixed" / "model.safetensors", weights);
  write(models / "mixed" / "tokenizer.json", "{}");
  write(models / "mamba" / "config.json", R"({"model_type": "mamba", "torch_dtype": "bfloat16"})");
  write(models / "mamba" / "model.safetensors", weights);
  write(models / "noweights" / "config.json", R"({"model_type": "llama"})");
  write(models / "broken" / "config.json", "{not json");
  write(models / "notamodel" / "readme.txt", "hello");
  cache_entry(home / "hub", "acme", "tiny-model", models / "good");
  ScopedHfHome env(home);

  auto r = run_cli("ls --models-dir " + quote(models.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string good = line_of(r.out, "good");
  EXPECT_NE(good.find("llama"), std::string::npos) << good;  // qwen3 runs through the llama family file
  EXPECT_NE(good.find("supported"), std::string::npos) << good;
  EXPECT_EQ(good.find("not supported"), std::string::npos) << good;
  EXPECT_NE(good.find("affine 4-bit g64"), std::string::npos) << good;
  EXPECT_NE(good.find("2.1 kB"), std::string::npos) << good;  // 2000 + 2 + the config's bytes
  EXPECT_NE(line_of(r.out, "mixed").find("affine 4-bit g32 + 1 layer overrides"), std::string::npos) << r.out;
  const std::string mamba = line_of(r.out, "mamba");
  EXPECT_NE(mamba.find("not supported: model_type 'mamba' is not supported"), std::string::npos) << mamba;
  EXPECT_NE(mamba.find("bfloat16"), std::string::npos) << mamba;
  EXPECT_NE(line_of(r.out, "noweights").find("not supported: no *.safetensors weights"), std::string::npos) << r.out;
  EXPECT_NE(line_of(r.out, "broken").find("not supported: config.json is not valid JSON"), std::string::npos) << r.out;
  EXPECT_EQ(line_of(r.out, "notamodel"), "") << r.out;
  // The cache entry: ORG/NAME, sizes through the links to blobs.
  const std::string cached = line_of(r.out, "acme/tiny-model");
  EXPECT_NE(cached.find("supported"), std::string::npos) << r.out;
  EXPECT_NE(cached.find("2.1 kB"), std::string::npos) << cached;
}

TEST(CliLs, FamiliesListTheRegistry) {
  auto r = run_cli("ls --families");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* t : {"llama", "qwen3", "phi3", "minicpm", "mistral", "olmo2", "granite", "mistral3", "gemma3_text"}) {
    EXPECT_NE(r.out.find(t), std::string::npos) << t << " missing from:\n" << r.out;
  }
  EXPECT_EQ(r.out.rfind("llama", 0), 0u) << r.out;  // name first
}

// A name `ls` shows works as --model (the cache's ORG/NAME and its NAME alone), giving what the
// folder gives; a missing folder, a folder without config.json and an unknown name are one-line
// errors naming the argument.
TEST(CliLs, ModelNamesResolveWhereverModelIsTaken) {
  const fs::path smol = source_dir() / "models" / "SmolLM2-135M-Instruct";
  if (!fs::exists(smol / "config.json")) GTEST_SKIP() << smol << " missing (make models)";
  TempDir tmp("lsname");
  cache_entry(tmp.path() / "hf" / "hub", "HuggingFaceTB", "SmolLM2-135M-Instruct", smol);
  ScopedHfHome env(tmp.path() / "hf");
  auto by_dir = run_cli("generate --model " + quote(smol.string()) + " --prompt-ids 1,2,3 -m 3");
  ASSERT_EQ(by_dir.exit_code, 0) << by_dir.err;
  for (const std::string name : {"HuggingFaceTB/SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct"}) {
    auto r = run_cli("generate --model " + quote(name) + " --prompt-ids 1,2,3 -m 3");
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_EQ(r.out, by_dir.out) << name;
    auto t = run_cli("tokenize --model " + quote(name) + " --text 'hello world'");
    auto td = run_cli("tokenize --model " + quote(smol.string()) + " --text 'hello world'");
    EXPECT_EQ(t.out, td.out) << name << ": " << t.err;
  }
  expect_one_line_error(run_cli("generate --model /nonexistent/mlxcpp-model --prompt hi"),
                        "/nonexistent/mlxcpp-model: not a model folder");
  expect_one_line_error(run_cli("generate --model " + quote(tmp.path().string()) + " --prompt hi"),
                        "not a model folder (no config.json");
  expect_one_line_error(run_cli("tokenize --model no-such-model --text hi"), "no-such-model: not a model folder");
}
