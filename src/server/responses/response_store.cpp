#include "server/responses/response_store.h"

#include <fmt/format.h>

namespace mlxcpp::server {

namespace {

constexpr int64_t kEntryOverhead = 256;
constexpr int64_t kMessageOverhead = 64;

int64_t json_bytes(const Json& j) {
  return static_cast<int64_t>(j.dump(-1, ' ', false, Json::error_handler_t::replace).size());
}

int64_t message_bytes(const Message& m) {
  int64_t n = kMessageOverhead + static_cast<int64_t>(m.role.size());
  if (m.content) n += static_cast<int64_t>(m.content->size());
  if (m.parts) {
    for (const auto& p : *m.parts) n += json_bytes(p.value);
  }
  if (m.reasoning_content) n += static_cast<int64_t>(m.reasoning_content->size());
  for (const auto& c : m.tool_calls) {
    n += kMessageOverhead + static_cast<int64_t>(c.id.size() + c.name.size()) + json_bytes(c.arguments);
  }
  if (m.tool_call_id) n += static_cast<int64_t>(m.tool_call_id->size());
  if (m.name) n += static_cast<int64_t>(m.name->size());
  return n;
}

}  // namespace

ResponseStore::ResponseStore(int64_t max_bytes) : max_bytes_(max_bytes) {}

int64_t ResponseStore::estimate_bytes(const std::string& id, const StoredResponse& r) {
  int64_t n = kEntryOverhead + static_cast<int64_t>(id.size()) + json_bytes(r.response);
  for (const auto& m : r.conversation) n += message_bytes(m);
  return n;
}

void ResponseStore::put(const std::string& id, StoredResponse r) {
  const int64_t b = estimate_bytes(id, r);
  std::lock_guard lock(mu_);
  if (auto it = index_.find(id); it != index_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (b > max_bytes_) return;
  lru_.push_front(Entry{id, std::move(r), b});
  index_[id] = lru_.begin();
  bytes_ += b;
  evict_locked();
}

void ResponseStore::evict_locked() {
  while (bytes_ > max_bytes_ && !lru_.empty()) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().id);
    lru_.pop_back();
  }
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->value;
}

StoredResponse ResponseStore::at(const std::string& id, const std::string& param) {
  auto r = get(id);
  if (!r) {
    throw NotFoundError(param, fmt::format("Previous response with id '{}' not found (responses are kept in memory, "
                                           "least recently used evicted first, and only with 'store': true)",
                                           id));
  }
  return std::move(*r);
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  bytes_ -= it->second->bytes;
  lru_.erase(it->second);
  index_.erase(it);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

int64_t ResponseStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace mlxcpp::server
