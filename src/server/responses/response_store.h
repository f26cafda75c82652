// The Responses API's memory: response id -> the conversation it ends (input and output as chat
// messages) and the response object, so a later request's previous_response_id continues it.
// In memory only, byte-capped, least recently used first out; thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/message.h"
#include "core/errors.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace mlxcpp::server {

// A referenced object that does not exist (HTTP 404, with the field that named it).
class NotFoundError : public HttpStatusError {
 public:
  NotFoundError(std::string param, const std::string& message) : HttpStatusError(404, std::move(param), message) {}
};

struct StoredResponse {
  std::vector<Message> conversation;  // every turn so far, instructions excluded
  Json response;                      // the response object as it was returned
};

class ResponseStore {
 public:
  static constexpr int64_t kDefaultMaxBytes = 256LL << 20;
  explicit ResponseStore(int64_t max_bytes = kDefaultMaxBytes);

  // Inserts or replaces; evicts least recently used entries beyond the cap. An entry larger
  // than the whole cap is not kept.
  void put(const std::string& id, StoredResponse r);
  // A copy (the entry becomes the most recently used); nullopt when unknown or evicted.
  std::optional<StoredResponse> get(const std::string& id);
  // As get(), but an unknown id is a NotFoundError naming `param`.
  StoredResponse at(const std::string& id, const std::string& param = "previous_response_id");
  bool erase(const std::string& id);

  size_t size() const;
  int64_t bytes() const;
  int64_t max_bytes() const { return max_bytes_; }

  // The bytes an entry is charged (its texts and JSON, plus a fixed overhead per message).
  static int64_t estimate_bytes(const std::string& id, const StoredResponse& r);

 private:
  struct Entry {
    std::string id;
    StoredResponse value;
    int64_t bytes = 0;
  };
  void evict_locked();

  const int64_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  int64_t bytes_ = 0;
};

}  // namespace mlxcpp::server
