// The HTTP layer over real loopback sockets: keep-alive, limits and timeouts, routing errors,
// API keys, CORS, streaming, disconnects and a graceful stop. Every wait is bounded.
#include <atomic>
#include <csignal>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http_test_client.h"

namespace mlxcpp::server::test {
namespace {

using Clock = std::chrono::steady_clock;

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<Ms>(Clock::now() - t0).count();
}

void add_hello(HttpServer& s) {
  s.route("GET", "/hello", [](const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
    w->send(200, "text/plain", "hi " + req.query, {{"X-Remote", req.remote}});
  });
}

nlohmann::json json_of(const Reply& r) { return nlohmann::json::parse(r.res.body(), nullptr, false); }

TEST(HttpServer, KeepAliveServesTwoRequestsOnOneConnection) {
  ServerRunner r(test_options());
  add_hello(r.server);
  r.start();
  Client c(r.port());
  auto a = c.request("GET", "/hello?n=1");
  ASSERT_FALSE(a.ec) << a.ec.message();
  EXPECT_EQ(a.status(), 200);
  EXPECT_EQ(a.res.body(), "hi n=1");
  EXPECT_TRUE(a.res.keep_alive());
  auto b = c.request("GET", "/hello?n=2");
  ASSERT_FALSE(b.ec) << b.ec.message();
  EXPECT_EQ(b.res.body(), "hi n=2");
  EXPECT_EQ(a.header("X-Remote"), b.header("X-Remote"));  // same client port: same connection
}

TEST(HttpServer, Http10GetsConnectionClose) {
  ServerRunner r(test_options());
  add_hello(r.server);
  r.start();
  Client c(r.port());
  ASSERT_TRUE(c.send_raw("GET /hello HTTP/1.0\r\n\r\n"));
  std::string got;
  EXPECT_TRUE(c.wait_closed(3000ms, &got));
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  EXPECT_NE(got.find("hi "), std::string::npos);
}

TEST(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  ServerRunner r(test_options());
  add_hello(r.server);
  r.start();
  Client c(r.port());
  ASSERT_TRUE(c.send_raw("GET /hello?a HTTP/1.1\r\nHost: x\r\n\r\nGET /hello?b HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto a = c.read();
  auto b = c.read();
  ASSERT_FALSE(a.ec) << a.ec.message();
  ASSERT_FALSE(b.ec) << b.ec.message();
  EXPECT_EQ(a.res.body(), "hi a");
  EXPECT_EQ(b.res.body(), "hi b");
}

TEST(HttpServer, UnknownPathIs404AndWrongMethodIs405) {
  ServerRunner r(test_options());
  add_hello(r.server);
  r.server.route("PUT", "/hello", [](const HttpRequest&, std::shared_ptr<ResponseWriter> w) { w->send(200, "", ""); });
  r.start();
  Client c(r.port());
  auto nf = c.request("GET", "/nope");
  ASSERT_FALSE(nf.ec) << nf.ec.message();
  EXPECT_EQ(nf.status(), 404);
  auto j = json_of(nf);
  ASSERT_TRUE(j.contains("error")) << nf.res.body();
  EXPECT_EQ(j["error"]["code"], "not_found");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("/nope"), std::string::npos);
  auto na = c.request("POST", "/hello", "{}");
  ASSERT_FALSE(na.ec) << na.ec.message();
  EXPECT_EQ(na.status(), 405);
  EXPECT_EQ(na.header(bhttp::field::allow), "GET, PUT");
  EXPECT_EQ(json_of(na)["error"]["code"], "method_not_allowed");
}

TEST(HttpServer, ErrorShaperShapesServerErrors) {
  ServerRunner r(test_options());
  r.server.set_error_shaper([](const HttpRequest& req, int status, const std::string&) {
    return std::make_pair(std::string("text/plain"), "shaped " + std::to_string(status) + " " + req.path);
  });
  r.start();
  Client c(r.port());
  auto nf = c.request("GET", "/v1/messages");
  ASSERT_FALSE(nf.ec);
  EXPECT_EQ(nf.status(), 404);
  EXPECT_EQ(nf.header(bhttp::field::content_type), "text/plain");
  EXPECT_EQ(nf.res.body(), "shaped 404 /v1/messages");
}

TEST(HttpServer, BodyOverLimitIs413AndServerKeepsServing) {
  auto o = test_options();
  o.max_body_bytes = 1024;
  ServerRunner r(o);
  add_hello(r.server);
  r.server.route("POST", "/echo", [](const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
    w->send(200, "text/plain", std::to_string(req.body.size()));
  });
  r.start();
  {  // declared length over the limit: answered before the body is read
    Client c(r.port());
    auto big = c.request("POST", "/echo", std::string(4096, 'x'));
    ASSERT_FALSE(big.ec) << big.ec.message();
    EXPECT_EQ(big.status(), 413);
    EXPECT_EQ(json_of(big)["error"]["code"], "request_too_large");
    EXPECT_TRUE(c.wait_closed(3000ms));
  }
  {  // chunked upload that grows past the limit
    Client c(r.port());
    std::string chunk(600, 'y');
    ASSERT_TRUE(c.send_raw("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n" + chunk +
                           "\r\n258\r\n" + chunk + "\r\n0\r\n\r\n"));
    auto big = c.read();
    ASSERT_FALSE(big.ec) << big.ec.message();
    EXPECT_EQ(big.status(), 413);
  }
  Client c(r.port());
  auto ok = c.request("POST", "/echo", std::string(1024, 'z'));  // exactly the limit
  ASSERT_FALSE(ok.ec) << ok.ec.message();
  EXPECT_EQ(ok.status(), 200);
  EXPECT_EQ(ok.res.body(), "1024");
}

TEST(HttpServer, ExpectContinueGetsInterimResponse) {
  ServerRunner r(test_options());
  r.server.route("POST", "/echo", [](const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
    w->send(200, "text/plain", req.body);
  });
  r.start();
  Client c(r.port());
  ASSERT_TRUE(c.send_raw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  auto cont = c.read();
  ASSERT_FALSE(cont.ec) << cont.ec.message();
  EXPECT_EQ(cont.status(), 100);
  ASSERT_TRUE(c.send_raw("hello"));
  auto res = c.read();
  ASSERT_FALSE(res.ec) << res.ec.message();
  EXPECT_EQ(res.res.body(), "hello");
}

TEST(HttpServer, SlowHeadersTimeOutWith408) {
  auto o = test_options();
  o.header_timeout = 300ms;
  ServerRunner r(o);
  add_hello(r.server);
  r.start();
  Client c(r.port());
  auto t0 = Clock::now();
  ASSERT_TRUE(c.send_raw("GET /hello HTTP/1.1\r\n"));
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(c.send_raw("Host: x\r\n"));  // trickling: the deadline is for the whole header
  std::string got;
  EXPECT_TRUE(c.wait_closed(3000ms, &got)) << "the server kept a slowloris connection open";
  EXPECT_GE(ms_since(t0), 250);
  EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
  Client c2(r.port());  // and the server is fine
  EXPECT_EQ(c2.request("GET", "/hello").status(), 200);
}

TEST(HttpServer, SlowBodyTimesOutWith408) {
  auto o = test_options();
  o.body_timeout = 300ms;
  ServerRunner r(o);
  r.server.route("POST", "/echo", [](const HttpRequest&, std::shared_ptr<ResponseWriter> w) { w->send(200, "", ""); });
  r.start();
  Client c(r.port());
  ASSERT_TRUE(c.send_raw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"));
  std::string got;
  EXPECT_TRUE(c.wait_closed(3000ms, &got));
  EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
}

TEST(HttpServer, IdleKeepAliveConnectionIsClosed) {
  auto o = test_options();
  o.idle_timeout = 200ms;
  ServerRunner r(o);
  add_hello(r.server);
  r.start();
  Client c(r.port());
  ASSERT_EQ(c.request("GET", "/hello").status(), 200);
  auto t0 = Clock::now();
  std::string got;
  EXPECT_TRUE(c.wait_closed(3000ms, &got));
  EXPECT_GE(ms_since(t0), 150);
  EXPECT_TRUE(got.empty()) << got;
}

TEST(HttpServer, MalformedRequestIs400AndClosed) {
  ServerRunner r(test_options());
  add_hello(r.server);
  r.start();
  Client c(r.port());
  ASSERT_TRUE(c.send_raw("THIS IS NOT HTTP\r\n\r\n"));
  auto res = c.read();
  ASSERT_FALSE(res.ec) << res.ec.message();
  EXPECT_EQ(res.status(), 400);
  EXPECT_EQ(json_of(res)["error"]["code"], "bad_request");
  EXPECT_FALSE(res.res.keep_alive());
  EXPECT_TRUE(c.wait_closed(3000ms));
}

TEST(HttpServer, ApiKeyIsRequiredExceptOnOpenPaths) {
  auto o = test_options();
  o.api_key = "sk-test-123";
  ServerRunner r(o);
  add_hello(r.server);
  r.server.route("GET", "/health", [](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
    w->send(200, "application/json", R"({"status":"ok"})");
  });
  r.start();
  Client c(r.port());
  auto missing = c.request("GET", "/hello");
  EXPECT_EQ(missing.status(), 401);
  EXPECT_EQ(missing.header(bhttp::field::www_authenticate), "Bearer");
  EXPECT_EQ(json_of(missing)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(c.request("GET", "/hello", "", {{"Authorization", "Bearer sk-test-123"}}).status(), 200);
  EXPECT_EQ(c.request("GET", "/hello", "", {{"Authorization", "bearer sk-test-123"}}).status(), 200);
  EXPECT_EQ(c.request("GET", "/hello", "", {{"x-api-key", "sk-test-123"}}).status(), 200);
  EXPECT_EQ(c.request("GET", "/hello", "", {{"Authorization", "Bearer sk-test-12"}}).status(), 401);
  EXPECT_EQ(c.request("GET", "/hello", "", {{"Authorization", "Bearer sk-test-1234"}}).status(), 401);
  EXPECT_EQ(c.request("GET", "/hello", "", {{"x-api-key", "wrong"}}).status(), 401);
  EXPECT_EQ(c.request("GET", "/hello", "", {{"Authorization", "sk-test-123"}}).status(), 401);  // no scheme
  EXPECT_EQ(c.request("GET", "/health").status(), 200);
}

TEST(HttpServer, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal("ab", "abc"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_FALSE(constant_time_equal(std::string("a\0", 2), "a"));
}

TEST(HttpServer, CorsAllowsListedOriginsAndAnswersPreflight) {
  auto o = test_options();
  o.api_key = "k";
  o.allowed_origins = {"https://app.example"};
  ServerRunner r(o);
  std::atomic<int> calls{0};
  r.server.route("POST", "/v1/chat/completions", [&](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
    ++calls;
    w->send(200, "application/json", "{}");
  });
  r.start();
  Client c(r.port());
  const std::pair<std::string, std::string> key{"Authorization", "Bearer k"};

  auto ok = c.request("POST", "/v1/chat/completions", "{}", {key, {"Origin", "https://app.example"}});
  EXPECT_EQ(ok.status(), 200);
  EXPECT_EQ(ok.header(bhttp::field::access_control_allow_origin), "https://app.example");
  EXPECT_EQ(ok.header(bhttp::field::vary), "Origin");

  auto unauth = c.request("POST", "/v1/chat/completions", "{}", {{"Origin", "https://app.example"}});
  EXPECT_EQ(unauth.status(), 401);  // and the browser may read why:
  EXPECT_EQ(unauth.header(bhttp::field::access_control_allow_origin), "https://app.example");

  auto pre = c.request("OPTIONS", "/v1/chat/completions", "",
                       {{"Origin", "https://app.example"},
                        {"Access-Control-Request-Method", "POST"},
                        {"Access-Control-Request-Headers", "X-Stainless-Lang, content-type"}});
  EXPECT_EQ(pre.status(), 204);  // no key needed, no handler called
  EXPECT_EQ(pre.header(bhttp::field::access_control_allow_origin), "https://app.example");
  auto methods = pre.header(bhttp::field::access_control_allow_methods);
  EXPECT_NE(methods.find("POST"), std::string::npos) << methods;
  EXPECT_NE(methods.find("OPTIONS"), std::string::npos) << methods;
  auto allowed = pre.header(bhttp::field::access_control_allow_headers);
  for (const char* h : {"x-stainless-lang", "content-type", "authorization", "x-api-key", "anthropic-version"})
    EXPECT_NE(allowed.find(h), std::string::npos) << h << " not in " << allowed;
  EXPECT_FALSE(pre.header(bhttp::field::access_control_max_age).empty());

  auto other = c.request("POST", "/v1/chat/completions", "{}", {key, {"Origin", "https://evil.example"}});
  EXPECT_EQ(other.status(), 200);
  EXPECT_TRUE(other.header(bhttp::field::access_control_allow_origin).empty());
  auto other_pre = c.request("OPTIONS", "/v1/chat/completions", "",
                             {{"Origin", "https://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(other_pre.status(), 403);
  EXPECT_TRUE(other_pre.header(bhttp::field::access_control_allow_origin).empty());
  EXPECT_EQ(calls.load(), 2);
}

TEST(HttpServer, CorsWildcardEchoesAnyOriginAndNoListMeansNoHeaders) {
  auto o = test_options();
  o.allowed_origins = {"*"};
  ServerRunner star(o);
  add_hello(star.server);
  star.start();
  ServerRunner none(test_options());
  add_hello(none.server);
  none.start();
  Client a(star.port());
  EXPECT_EQ(a.request("GET", "/hello", "", {{"Origin", "http://x.test"}}).header(
                bhttp::field::access_control_allow_origin),
            "http://x.test");
  Client b(none.port());
  auto res = b.request("GET", "/hello", "", {{"Origin", "http://x.test"}});
  EXPECT_EQ(res.status(), 200);
  EXPECT_TRUE(res.header(bhttp::field::access_control_allow_origin).empty());
}

TEST(HttpServer, StreamFromAnotherThreadThenKeepAlive) {
  ServerRunner r(test_options());
  add_hello(r.server);
  Workers engine;
  Flag first_seen;
  std::atomic<bool> writes_ok{true};
  r.server.route("POST", "/stream", [&](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
    EXPECT_TRUE(w->start_stream());
    engine.spawn([&, w] {
      writes_ok = writes_ok && w->write("data: 0\n\n");
      // The client must see the first event before the rest exists: it is streamed, not buffered.
      if (!first_seen.wait(5000ms)) writes_ok = false;
      for (int i = 1; i < 3; ++i) writes_ok = writes_ok && w->write("data: " + std::to_string(i) + "\n\n");
      w->end_stream();
      writes_ok = writes_ok && !w->write("late");  // ignored after the end
    });
  });
  r.start();
  Client c(r.port());
  ASSERT_TRUE(c.send("POST", "/stream", "{}"));
  ASSERT_FALSE(c.read_header());
  auto& res = c.parser().get();
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_TRUE(c.parser().chunked());
  EXPECT_EQ(res[bhttp::field::content_type], "text/event-stream");
  EXPECT_EQ(res[bhttp::field::cache_control], "no-cache");
  EXPECT_EQ(res["X-Accel-Buffering"], "no");
  ASSERT_FALSE(c.read_body_until("data: 0\n\n"));
  first_seen.set();
  auto ec = c.read_rest();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(c.parser().get().body(), "data: 0\n\ndata: 1\n\ndata: 2\n\n");
  engine.join();
  EXPECT_TRUE(writes_ok);
  auto next = c.request("GET", "/hello?again");  // same connection, next request
  ASSERT_FALSE(next.ec) << next.ec.message();
  EXPECT_EQ(next.res.body(), "hi again");
}

TEST(HttpServer, OnCloseFiresWhenClientDisconnectsMidStream) {
  ServerRunner r(test_options());
  Workers engine;
  Flag closed, write_failed;
  std::shared_ptr<ResponseWriter> kept;
  r.server.route("GET", "/slow", [&](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
    kept = w;
    w->on_close([&] { closed.set(); });
    w->start_stream(200, "text/plain");
    engine.spawn([&, w] {
      auto t0 = Clock::now();
      while (ms_since(t0) < 5000) {
        if (!w->write("tick\n")) {
          write_failed.set();
          return;
        }
        std::this_thread::sleep_for(20ms);
      }
    });
  });
  r.start();
  Client c(r.port());
  ASSERT_TRUE(c.send("GET", "/slow"));
  ASSERT_FALSE(c.read_header());
  ASSERT_FALSE(c.read_body_until("tick"));
  c.close();
  EXPECT_TRUE(closed.wait(3000ms)) << "on_close did not fire after the client left";
  EXPECT_TRUE(write_failed.wait(3000ms)) << "write() kept returning true";
  EXPECT_TRUE(kept->closed());
  EXPECT_FALSE(kept->write("more"));
  bool late = false;
  kept->on_close([&] { late = true; });  // already closed: runs at once
  EXPECT_TRUE(late);
}

TEST(HttpServer, HandlerExceptionIs500AndConnectionSurvives) {
  ServerRunner r(test_options());
  add_hello(r.server);
  r.server.route("GET", "/boom", [](const HttpRequest&, std::shared_ptr<ResponseWriter>) {
    throw std::runtime_error("kaboom");
  });
  r.start();
  Client c(r.port());
  auto res = c.request("GET", "/boom");
  ASSERT_FALSE(res.ec) << res.ec.message();
  EXPECT_EQ(res.status(), 500);
  auto j = json_of(res);
  EXPECT_EQ(j["error"]["type"], "server_error");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("kaboom"), std::string::npos);
  EXPECT_EQ(c.request("GET", "/hello").status(), 200);
}

TEST(HttpServer, LateAnswerAndDroppedWriter) {
  ServerRunner r(test_options());
  Workers engine;
  r.server.route("GET", "/later", [&](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
    engine.spawn([w] {
      std::this_thread::sleep_for(50ms);
      w->send(200, "text/plain", "later");
    });
  });
  r.server.route("GET", "/dropped", [](const HttpRequest&, std::shared_ptr<ResponseWriter>) {});
  r.start();
  Client c(r.port());
  auto later = c.request("GET", "/later");
  EXPECT_EQ(later.status(), 200);
  EXPECT_EQ(later.res.body(), "later");
  auto dropped = c.request("GET", "/dropped");
  ASSERT_FALSE(dropped.ec) << dropped.ec.message();
  EXPECT_EQ(dropped.status(), 500);
}

// A stream that ends when on_stop asks it to: the client gets the whole response and run()
// returns without waiting for the grace period.
TEST(HttpServer, StopLetsRunningStreamFinish) {
  auto o = test_options();
  o.shutdown_grace = 3000ms;
  ServerRunner r(o);
  Workers engine;
  std::atomic<bool> stop_asked{false};
  std::atomic<int> on_stop_calls{0};
  r.server.on_stop([&] {
    ++on_stop_calls;
    stop_asked = true;
  });
  r.server.route("GET", "/stream", [&](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
    w->start_stream();
    engine.spawn([&, w] {
      auto t0 = Clock::now();
      while (!stop_asked && ms_since(t0) < 5000 && w->write("data: tick\n\n")) std::this_thread::sleep_for(20ms);
      w->write("data: bye\n\n");
      w->end_stream();
    });
  });
  r.start();
  Client c(r.port());
  ASSERT_TRUE(c.send("GET", "/stream"));
  ASSERT_FALSE(c.read_header());
  ASSERT_FALSE(c.read_body_until("tick"));
  auto t0 = Clock::now();
  r.server.stop();
  r.server.stop();  // idempotent
  auto ec = c.read_rest();
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_NE(c.parser().get().body().find("data: bye"), std::string::npos);
  EXPECT_TRUE(r.wait_returned(2500ms)) << "run() waited for the grace period although the stream ended";
  EXPECT_LT(ms_since(t0), 2500);
  EXPECT_EQ(on_stop_calls.load(), 1);
  EXPECT_TRUE(c.wait_closed(1000ms));
}

// A stream that never ends: after the grace period its connection is closed, on_close fires,
// and run() returns.
TEST(HttpServer, StopClosesStreamsThatOutliveTheGrace) {
  auto o = test_options();
  o.shutdown_grace = 300ms;
  ServerRunner r(o);
  Workers engine;
  Flag closed, on_stop_called;
  r.server.on_stop([&] { on_stop_called.set(); });
  r.server.route("GET", "/forever", [&](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
    w->on_close([&] { closed.set(); });
    w->start_stream();
    engine.spawn([w] {
      auto t0 = Clock::now();
      while (ms_since(t0) < 5000 && w->write("data: tick\n\n")) std::this_thread::sleep_for(20ms);
    });
  });
  r.start();
  Client c(r.port());
  ASSERT_TRUE(c.send("GET", "/forever"));
  ASSERT_FALSE(c.read_header());
  ASSERT_FALSE(c.read_body_until("tick"));
  auto t0 = Clock::now();
  r.server.stop();
  EXPECT_TRUE(r.wait_returned(3000ms)) << "run() did not return after the grace period";
  EXPECT_GE(ms_since(t0), 250);
  EXPECT_TRUE(on_stop_called.is_set());
  EXPECT_TRUE(closed.wait(1000ms));
  EXPECT_TRUE(c.read_rest());  // cut short: no terminating chunk
}

// The engine may hold a writer after the server is gone: it reads as closed, calls are no-ops.
TEST(HttpServer, WriterOutlivesTheServer) {
  std::shared_ptr<ResponseWriter> kept;
  Flag closed, handled;
  {
    auto o = test_options();
    o.shutdown_grace = 100ms;
    ServerRunner r(o);
    r.server.route("GET", "/never", [&](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
      kept = w;
      w->on_close([&] { closed.set(); });
      handled.set();
    });
    r.start();
    Client c(r.port());
    ASSERT_TRUE(c.send("GET", "/never"));
    ASSERT_TRUE(handled.wait(3000ms));
    r.server.stop();
    EXPECT_TRUE(r.wait_returned(3000ms));
    EXPECT_TRUE(closed.wait(1000ms));
  }
  ASSERT_TRUE(kept);
  EXPECT_TRUE(kept->closed());
  EXPECT_FALSE(kept->start_stream());
  EXPECT_FALSE(kept->write("x"));
  kept->send(200, "text/plain", "too late");
  kept->end_stream();
  kept.reset();  // the last owner of the io_context: destroyed here, on this thread
}

TEST(HttpServer, StopBeforeRunReturnsAtOnce) {
  ServerRunner r(test_options());
  int calls = 0;
  r.server.on_stop([&] { ++calls; });
  r.server.listen();
  r.server.stop();
  r.server.stop();
  r.run_async();
  EXPECT_TRUE(r.wait_returned(2000ms));
  EXPECT_EQ(calls, 1);
}

TEST(HttpServer, StopClosesIdleKeepAliveConnectionsAtOnce) {
  ServerRunner r(test_options());
  add_hello(r.server);
  r.start();
  Client c(r.port());
  ASSERT_EQ(c.request("GET", "/hello").status(), 200);
  auto t0 = Clock::now();
  r.server.stop();
  EXPECT_TRUE(r.wait_returned(1500ms));
  EXPECT_LT(ms_since(t0), 1500);
  EXPECT_TRUE(c.wait_closed(1000ms));
}

TEST(HttpServer, SigtermStopsRun) {
  ServerRunner r(test_options());
  add_hello(r.server);
  r.start();
  Client c(r.port());
  ASSERT_EQ(c.request("GET", "/hello").status(), 200);  // run() is serving: its signal_set is armed
  std::raise(SIGTERM);
  EXPECT_TRUE(r.wait_returned(3000ms));
}

TEST(HttpServer, ListenFailureNamesHostAndPort) {
  ServerRunner a(test_options());
  a.server.listen();
  auto o = test_options();
  o.port = a.server.port();
  HttpServer b(o);
  try {
    b.listen();
    FAIL() << "listening twice on one port succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(o.port)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mlxcpp::server::test
