// Broken templates and template-raised errors are TemplateErrors with a clear message.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "core/errors.h"

namespace mlxcpp {
namespace {

ChatTemplateInputs hello() {
  ChatTemplateInputs in;
  in.messages.push_back(Message::text("user", "hi"));
  return in;
}

std::string error_of(const std::string& source, const ChatTemplateInputs& in) {
  try {
    render_chat_template(source, in, "test.jinja");
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ChatErrors, SyntaxErrorNamesTemplateAndLine) {
  std::string msg = error_of("line one\n{% for m in messages %}{{ m.content }}\n{% endif %}", hello());
  EXPECT_NE(msg.find("test.jinja: chat template does not compile"), std::string::npos) << msg;
  EXPECT_NE(msg.find(":3)"), std::string::npos) << msg;  // the line of the bad tag
  msg = error_of("{{ unclosed", hello());
  EXPECT_NE(msg.find("does not compile"), std::string::npos) << msg;
}

TEST(ChatErrors, RaiseExceptionCarriesTheTemplateMessage) {
  std::string msg = error_of("{{ raise_exception('Only user and assistant roles are supported!') }}", hello());
  EXPECT_EQ(msg, "test.jinja: raise_exception: Only user and assistant roles are supported!");
}

TEST(ChatErrors, RenderErrorsAreTemplateErrors) {
  std::string msg = error_of("{{ messages[0].content.no_such_method() }}", hello());
  EXPECT_NE(msg.find("test.jinja: chat template failed"), std::string::npos) << msg;
  msg = error_of("{{ undefined_thing.attr }}", hello());
  EXPECT_NE(msg.find("chat template failed"), std::string::npos) << msg;
  msg = error_of("{{ 1 / 0 }}", hello());
  EXPECT_NE(msg.find("chat template failed"), std::string::npos) << msg;
}

TEST(ChatErrors, EmptyConversationIsAnError) {
  ChatTemplateInputs in;
  EXPECT_THROW(render_chat_template("{{ messages }}", in), TemplateError);
}

TEST(ChatErrors, BadFixedTimeIsAnError) {
  ChatTemplateInputs in = hello();
  in.fixed_now = "yesterday";
  std::string msg = error_of("{{ strftime_now('%Y') }}", in);
  EXPECT_NE(msg.find("strftime_now"), std::string::npos) << msg;
  in.fixed_now = "2024-02-29 23:59:59";
  EXPECT_EQ(render_chat_template("{{ strftime_now('%d %b %Y %A') }}", in), "29 Feb 2024 Thursday");
}

TEST(ChatErrors, DeepRecursionDoesNotCrash) {
  std::string src = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}";
  EXPECT_THROW(render_chat_template(src, hello()), TemplateError);
}

TEST(ChatErrors, MessageParsingNamesTheField) {
  try {
    message_from_json(OrderedJson{{"content", "x"}}, "messages[3]");
    FAIL();
  } catch (const RequestError& e) {
    EXPECT_EQ(std::string(e.what()), "messages[3]: field 'role': missing");
  }
  EXPECT_THROW(message_from_json(OrderedJson{{"role", "user"}, {"content", 5}}, "m"), RequestError);
}

}  // namespace
}  // namespace mlxcpp
