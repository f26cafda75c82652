#include "scheduler/served_model.h"

#include <chrono>
#include <future>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>
#include <spdlog/spdlog.h>

#include "cache/prompt_cache.h"
#include "core/elapsed.h"
#include "core/errors.h"
#include "core/files.h"
#include "scheduler/chat_formats.h"
#include "scheduler/model_text.h"

namespace mx = mlx::core;

namespace mlxcpp::sched {

namespace {

std::string read_template_file(const std::filesystem::path& file) {
  auto text = read_file(file);
  if (!text) throw ConfigError(fmt::format("{}: cannot read the chat template file", file.string()));
  return std::move(*text);
}

// A one-token forward on a fresh cache: warms up the kernels and measures the cache's bytes per
// token (a KV cache reserves KVCache::kStep rows at once).
int64_t measure_kv_bytes_per_token(const Model& model) {
  auto caches = model.make_cache();
  int id = 0;
  auto logits = model(mx::array(&id, {1, 1}, mx::int32), &caches);
  mx::eval(logits);
  int64_t total = 0;
  for (const auto& c : caches) total += c->nbytes() / KVCache::kStep;
  return total;
}

}  // namespace

ServedModel load_served_model(const std::filesystem::path& dir, const ModelOptions& mopts,
                              const ServeModelOptions& sopts) {
  // The tokenizer (a few hundred ms for a large vocabulary) loads while the weights do.
  auto tok = std::async(std::launch::async, [&] {
    Tokenizer t = Tokenizer::load(dir);
    auto kind = StreamingDetokenizer::kind_for(t);
    return std::make_pair(std::move(t), kind);
  });
  LoadedModel loaded;
  try {
    loaded = load_model(dir, mopts);
  } catch (...) {
    tok.wait();
    throw;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto tok_kind = tok.get();
  spdlog::debug("load: tokenizer waited {:.1f} ms", ms_since(t0));
  ServedModel m{.id = sopts.id.empty() ? dir.filename().string() : sopts.id,
                .loaded = std::move(loaded),
                .tokenizer = std::move(tok_kind.first),
                .detokenizer = tok_kind.second};
  if (m.id.empty()) m.id = dir.parent_path().filename().string();
  if (!sopts.chat_template_file.empty()) {
    m.template_source = read_template_file(sopts.chat_template_file);
    m.chat_template = ChatTemplate::compile(m.template_source, sopts.chat_template_file);
  } else if (!m.tokenizer.chat_templates().empty()) {
    m.template_source = m.tokenizer.chat_template();
    m.chat_template = compile_chat_template(m.tokenizer);
  }
  m.default_template_kwargs = sopts.template_kwargs;
  m.eos_ids = merged_eos_ids(m.loaded.checkpoint, m.tokenizer);
  m.xtc_special = xtc_special_tokens(m.tokenizer, m.eos_ids);
  m.grammars = std::make_shared<LazyGrammarCache>(m.tokenizer, std::vector<int32_t>(m.eos_ids.begin(), m.eos_ids.end()),
                                                  static_cast<size_t>(m.model().vocab_size()));
  const std::string& model_type = m.loaded.checkpoint.model_type();
  auto formats = choose_chat_formats(find_family(model_type), m.tokenizer, m.template_source, sopts.tool_call_format);
  if (!formats.missing_markers.empty()) {
    spdlog::info("load: the tokenizer lacks {} of {}'s chat tokens ({}): tool calls and reasoning as its own chat "
                 "template and vocabulary teach", formats.missing_markers.size(), model_type,
                 fmt::join(formats.missing_markers, " "));
  }
  m.reasoning = formats.reasoning;
  m.tool_format = formats.tool_format;
  m.context_length = m.loaded.checkpoint.context_length();
  for (const auto& p : m.loaded.model->parameters()) m.weight_bytes += static_cast<int64_t>(p.nbytes());
  spdlog::debug("load: template and formats {:.1f} ms", ms_since(t0));
  m.kv_bytes_per_token = measure_kv_bytes_per_token(*m.loaded.model);
  spdlog::debug("load: kv measured {:.1f} ms", ms_since(t0));
  m.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch()).count();
  return m;
}

}  // namespace mlxcpp::sched
