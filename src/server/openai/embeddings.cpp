// POST /v1/embeddings in OpenAI's shape: "input" a string, a list of strings, a list of token ids
// or a list of those; "encoding_format" float or base64 (little-endian float32, what the openai
// SDK asks for by default); "dimensions" (Matryoshka: the first N values, renormalized). Texts are
// encoded with the tokenizer's special tokens (Qwen3-Embedding's appends <|endoftext|>), token
// ids are taken as given; the engine thread pools and normalizes (generate/embedder.h).
#include <cstring>

#include <fmt/format.h>

#include "server/event_relay.h"
#include "server/openai/openai_common.h"
#include "server/server_context.h"

namespace mlxcpp::server::openai {

namespace {

// OpenAI's limit on inputs per request.
constexpr size_t kMaxInputs = 2048;

struct EmbeddingsCall {
  sched::EmbeddingRequest req;
  bool base64 = false;
  int prompt_tokens = 0;
};

// "input" as token-id lists: texts encoded, ids checked against the vocabulary and the context.
std::vector<std::vector<int>> read_inputs(const Fields& f, const sched::ServedModel& m) {
  const Json* in = f.get("input");
  if (!in) f.fail("input", "is required");
  const char* kinds = "must be a string, a list of strings, a list of token ids or a list of lists of token ids";
  std::vector<std::vector<int>> out;
  auto text = [&](const Json& v, size_t i) {
    if (v.get_ref<const std::string&>().empty()) f.fail("input", fmt::format("item {} is an empty string", i));
    auto ids = m.tokenizer.encode(v.get<std::string>(), /*add_special_tokens=*/true);
    out.emplace_back(ids.begin(), ids.end());
  };
  if (in->is_string()) {
    text(*in, 0);
  } else if (!in->is_array()) {
    f.fail("input", fmt::format("{}; got {}", kinds, brief(*in)));
  } else if (in->empty()) {
    f.fail("input", "is an empty list");
  } else if (in->front().is_number()) {
    out.push_back(token_ids(*in, "input"));
  } else {
    if (in->size() > kMaxInputs) f.fail("input", fmt::format("holds {} inputs; at most {}", in->size(), kMaxInputs));
    const bool strings = in->front().is_string();
    for (size_t i = 0; i < in->size(); ++i) {
      const Json& v = (*in)[i];
      if (strings && v.is_string()) {
        text(v, i);
      } else if (!strings && v.is_array() && !v.empty()) {
        out.push_back(token_ids(v, "input"));
      } else {
        f.fail("input", fmt::format("{} (one kind throughout, none empty); item {} is {}", kinds, i, brief(v)));
      }
    }
  }
  const int vocab = m.model().vocab_size();
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].empty()) f.fail("input", fmt::format("item {} encodes to no tokens", i));
    if (m.context_length > 0 && out[i].size() > static_cast<size_t>(m.context_length)) {
      f.fail("input", fmt::format("item {} has {} tokens, over the model's context window of {} tokens", i,
                                  out[i].size(), m.context_length));
    }
    for (int id : out[i]) {
      if (id >= vocab) {
        f.fail("input", fmt::format("item {}: token id {} is outside the vocabulary (size {})", i, id, vocab));
      }
    }
  }
  return out;
}

EmbeddingsCall parse_embeddings_call(const Json& body, const sched::ServedModel& m) {
  Fields f(body);
  check_model_field(f, m);
  EmbeddingsCall c;
  c.req.inputs = read_inputs(f, m);
  for (const auto& in : c.req.inputs) c.prompt_tokens += static_cast<int>(in.size());
  const std::string format = f.str("encoding_format").value_or("float");
  if (format != "float" && format != "base64") {
    f.fail("encoding_format", fmt::format("must be 'float' or 'base64', got {}", brief(*f.get("encoding_format"))));
  }
  c.base64 = format == "base64";
  if (auto d = f.integer("dimensions", 1, m.model().hidden_size())) c.req.options.dimensions = static_cast<int>(*d);
  f.str("user");  // accepted (a string), not used
  return c;
}

std::string base64_floats(const std::vector<float>& v) {
  static const char* const kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  bytes.reserve(v.size() * 4);
  for (float x : v) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>((u >> (8 * k)) & 0xff));  // little-endian
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t k = 0; k < 3; ++k) chunk = (chunk << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out.push_back(k <= n ? kAlphabet[(chunk >> (18 - 6 * k)) & 0x3f] : '=');
  }
  return out;
}

Json embeddings_body(const std::vector<std::vector<float>>& vectors, bool base64, const std::string& model,
                     int prompt_tokens) {
  Json data = Json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    data.push_back(Json{{"object", "embedding"},
                        {"index", i},
                        {"embedding", base64 ? Json(base64_floats(vectors[i])) : Json(vectors[i])}});
  }
  return Json{{"object", "list"},
              {"data", std::move(data)},
              {"model", model},
              {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

void create_embeddings(ServerContext& ctx, const HttpRequest& req, const std::shared_ptr<ResponseWriter>& w) {
  Json body = parse_body(req.body);
  EmbeddingsCall c = parse_embeddings_call(body, ctx.engine.model());
  auto sink = [w, base64 = c.base64, model = ctx.engine.model().id, tokens = c.prompt_tokens](
                  sched::EmbeddingResult r) {
    if (auto* f = std::get_if<sched::Failure>(&r)) {
      send_error(*w, Protocol::kOpenAI, ApiError{f->status, f->message, ""});
      return;
    }
    w->send(200, "application/json", dump(embeddings_body(std::get<0>(r), base64, model, tokens)));
  };
  ctx.engine.submit_embedding(std::move(c.req), std::move(sink));
}

}  // namespace

}  // namespace mlxcpp::server::openai

namespace mlxcpp::server {
void add_openai_embedding_routes(HttpServer& http, ServerContext& ctx) {
  add_route(http, ctx, "POST", "/v1/embeddings", "embeddings", openai::create_embeddings);
}
}  // namespace mlxcpp::server
