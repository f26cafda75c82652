// One exception hierarchy for the engine. Messages name the file, the field and the value;
// one boundary (cli/, later server/) maps them to exit codes or HTTP bodies.
#pragma once

#include <stdexcept>
#include <string>

namespace mlxcpp {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// config.json / generation_config.json / CLI option values.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// Weight files: safetensors headers, missing/extra/mis-shaped tensors.
class WeightError : public Error {
 public:
  using Error::Error;
};

// tokenizer.json / tokenizer_config.json and the tokenizer bridge (encode/decode failures).
class TokenizerError : public Error {
 public:
  using Error::Error;
};

// Chat templates: syntax errors, render errors, raise_exception() from the template.
class TemplateError : public Error {
 public:
  using Error::Error;
};

// A request the engine cannot serve as asked (bad ids, bad sampler values).
class RequestError : public Error {
 public:
  using Error::Error;
};

// The engine cannot take the request now or at all: too long for the context or the memory
// budget (413), the queue is full (429), the server is stopping or overloaded (503).
class CapacityError : public Error {
 public:
  CapacityError(int status, const std::string& message) : Error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// The HTTP status an engine error stands for: CapacityError its own, a bad request (RequestError,
// TemplateError, TokenizerError) 400, anything else 500. Used where errors cross to clients.
inline int error_status(const std::exception& e) {
  if (auto* c = dynamic_cast<const CapacityError*>(&e)) return c->status();
  if (dynamic_cast<const RequestError*>(&e) || dynamic_cast<const TemplateError*>(&e) ||
      dynamic_cast<const TokenizerError*>(&e)) {
    return 400;
  }
  return 500;
}

}  // namespace mlxcpp
