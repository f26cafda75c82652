#include "tokenizer/streaming_detokenizer.h"

#include <array>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace mlxcpp {

namespace {

using nlohmann::json;

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kSpmSpace = "\xE2\x96\x81";     // U+2581

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Code points of a valid UTF-8 string (token strings from the tokenizer are valid).
std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> cps;
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<unsigned char>(s[i]);
    int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    cps.push_back(cp);
    i += n;
  }
  return cps;
}

// GPT-2's bytes_to_unicode, inverted: code point -> byte, -1 when the character is no byte.
const std::array<int, 324>& byte_decoder() {
  static const std::array<int, 324> table = [] {
    std::array<int, 324> t;
    t.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      if (printable) t[b] = b;
      else t[256 + n++] = b;
    }
    return t;
  }();
  return table;
}

int byte_of(uint32_t cp) { return cp < byte_decoder().size() ? byte_decoder()[cp] : -1; }

}  // namespace

std::string utf8_decode_replace(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  const size_t n = bytes.size();
  auto at = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  for (size_t i = 0; i < n;) {
    unsigned char b = at(i);
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    int need;
    unsigned char lo = 0x80, hi = 0xBF;  // range of the first continuation byte
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b == 0xE0) need = 2, lo = 0xA0;
    else if (b == 0xED) need = 2, hi = 0x9F;
    else if (b >= 0xE1 && b <= 0xEF) need = 2;
    else if (b == 0xF0) need = 3, lo = 0x90;
    else if (b == 0xF4) need = 3, hi = 0x8F;
    else if (b >= 0xF1 && b <= 0xF3) need = 3;
    else {
      out += kReplacement;
      ++i;
      continue;
    }
    size_t j = i + 1;
    int got = 0;
    for (; got < need && j < n; ++got, ++j) {
      unsigned char c = at(j);
      if (got == 0 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) break;
    }
    if (got == need) out.append(bytes, i, j - i);
    else out += kReplacement;  // the maximal subpart; resume at the byte that broke it
    i = j;
  }
  return out;
}

StreamingDetokenizer::Kind StreamingDetokenizer::kind_for(const Tokenizer& tokenizer) {
  // The file's decoder, kept by Tokenizer::load (mlx-lm looks at tokenizer.json as written).
  const std::string& text = tokenizer.file_decoder_json();
  if (text.empty()) return Kind::kNaive;
  const json d = json::parse(text);
  json spm = {{"type", "Sequence"},
              {"decoders",
               {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                {{"type", "ByteFallback"}},
                {{"type", "Fuse"}}}}};
  if (d == spm) return Kind::kSpmNoTrim;
  spm["decoders"].push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  if (d == spm) return Kind::kSpm;
  if (d.is_object() && d.value("type", "") == "ByteLevel") return Kind::kBpe;
  return Kind::kNaive;
}

StreamingDetokenizer::StreamingDetokenizer(Tokenizer tokenizer) : StreamingDetokenizer(tokenizer, kind_for(tokenizer)) {}

StreamingDetokenizer::StreamingDetokenizer(Tokenizer tokenizer, Kind kind) : tok_(std::move(tokenizer)), kind_(kind) {
  if (kind_ == Kind::kNaive) {
    auto probe = tok_.encode("a ,b", false);
    clean_spaces_ = tok_.decode(probe).find(" ,") == std::string::npos;
  }
}

void StreamingDetokenizer::reset() {
  tokens_.clear();
  text_.clear();
  unflushed_.clear();
  current_tokens_.clear();
  current_text_.clear();
  offset_ = 0;
}

std::string StreamingDetokenizer::token_bytes_spm(int32_t id) const {
  auto t = tok_.id_to_token(id).value_or("");
  if (t.rfind("<0x", 0) == 0 && t.size() >= 5) {
    try {
      return std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
    } catch (const std::exception&) {
    }
  }
  return t;
}

// mlx-lm's _decode_bytes: byte characters become their byte (except byte 0, which its
// truthiness test treats as "not a byte" unless finalizing), others stay UTF-8.
std::string StreamingDetokenizer::bpe_bytes(const std::string& token, bool zero_is_byte) const {
  std::string out;
  for (uint32_t cp : code_points(token)) {
    int b = byte_of(cp);
    if (b > 0 || (b == 0 && zero_is_byte)) out += static_cast<char>(b);
    else append_utf8(out, cp);
  }
  return out;
}

void StreamingDetokenizer::spm_flush(bool force) {
  std::string raw;
  for (size_t pos = 0;;) {
    size_t hit = unflushed_.find(kSpmSpace, pos);
    raw.append(unflushed_, pos, hit == std::string::npos ? std::string::npos : hit - pos);
    if (hit == std::string::npos) break;
    raw += ' ';
    pos = hit + kSpmSpace.size();
  }
  std::string t = utf8_decode_replace(raw);
  if (!force && ends_with(t, kReplacement)) return;
  if (text_.empty() && kind_ == Kind::kSpm && !t.empty() && t[0] == ' ') t.erase(0, 1);
  text_ += t;
  unflushed_.clear();
}

void StreamingDetokenizer::add_token(int32_t id) {
  tokens_.push_back(id);
  switch (kind_) {
    case Kind::kSpm:
    case Kind::kSpmNoTrim:
      unflushed_ += token_bytes_spm(id);
      spm_flush(false);
      break;
    case Kind::kBpe: {
      // Ids past the tokenizer (a padded model vocabulary) read as "!", as in mlx-lm.
      std::string v = tok_.id_to_token(id).value_or("!");
      unflushed_ += v;
      std::string t = utf8_decode_replace(bpe_bytes(unflushed_, false));
      auto cps = code_points(v);
      bool lone_space = cps.size() == 1 && byte_of(cps[0]) == ' ';
      if (!ends_with(t, kReplacement) && !lone_space) {
        if (text_.empty() && !t.empty() && t[0] == ' ') t.erase(0, 1);
        text_ += t;
        unflushed_.clear();
      }
      break;
    }
    case Kind::kNaive:
      current_tokens_.push_back(id);
      break;
  }
}

void StreamingDetokenizer::finalize() {
  switch (kind_) {
    case Kind::kSpm:
    case Kind::kSpmNoTrim:
      spm_flush(true);
      unflushed_.clear();
      break;
    case Kind::kBpe: {
      std::string t = utf8_decode_replace(bpe_bytes(unflushed_, true));
      if (text_.empty() && !t.empty() && t[0] == ' ') t.erase(0, 1);
      text_ += t;
      unflushed_.clear();
      break;
    }
    case Kind::kNaive:
      text_ += tok_.decode(current_tokens_);
      current_tokens_.clear();
      current_text_.clear();
      break;
  }
}

std::string StreamingDetokenizer::text() {
  if (kind_ != Kind::kNaive) return text_;
  if (!current_tokens_.empty()) {
    current_text_ = tok_.decode(current_tokens_);
    if (ends_with(current_text_, kReplacement)) {
      while (ends_with(current_text_, kReplacement)) current_text_.resize(current_text_.size() - kReplacement.size());
    } else if (clean_spaces_ && !current_text_.empty() && current_text_.back() == ' ') {
      current_text_.pop_back();
    }
  }
  if (!current_text_.empty() && current_text_.back() == '\n') {
    text_ += current_text_;
    current_tokens_.clear();
    current_text_.clear();
  }
  return text_ + current_text_;
}

std::string StreamingDetokenizer::last_segment() {
  std::string t = text();
  std::string seg = offset_ < t.size() ? t.substr(offset_) : "";
  offset_ = t.size();
  return seg;
}

}  // namespace mlxcpp
