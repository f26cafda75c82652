// Differential test: our chat-template rendering vs transformers' apply_chat_template
// (tools/oracle/chat_goldens.py): every template x conversation x add_generation_prompt x
// enable_thinking must be byte-identical, and where transformers raises we raise TemplateError.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "chat/chat_template.h"
#include "core/errors.h"
#include "test_support.h"

namespace mlxcpp {
namespace {

const OrderedJson& golden() {
  static const OrderedJson kDoc = [] {
    auto path = test::golden_dir() / "chat" / "cases.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path.string() + " is missing: run 'make goldens'");
    std::stringstream ss;
    ss << in.rdbuf();
    return OrderedJson::parse(ss.str());
  }();
  return kDoc;
}

ChatTemplateInputs inputs_of(const OrderedJson& c, const OrderedJson& tmpl, const std::string& now) {
  ChatTemplateInputs in;
  for (size_t i = 0; i < c["messages"].size(); ++i) {
    in.messages.push_back(message_from_json(c["messages"][i], "messages[" + std::to_string(i) + "]"));
  }
  if (!c["tools"].is_null()) in.tools = c["tools"].get<std::vector<OrderedJson>>();
  if (!c["documents"].is_null()) in.documents = c["documents"].get<std::vector<OrderedJson>>();
  in.add_generation_prompt = c["add_generation_prompt"].get<bool>();
  in.continue_final_message = c.value("continue_final_message", false);
  in.variables = tmpl["special_tokens"];
  for (const auto& [k, v] : c["kwargs"].items()) in.variables[k] = v;
  in.fixed_now = now;
  return in;
}

std::string show(const std::string& s) { return OrderedJson(s).dump(); }

TEST(ChatTemplateParity, EveryCaseMatchesTransformers) {
  const auto& doc = golden();
  std::string now = doc["now"];
  std::map<std::string, ChatTemplate> compiled;
  for (const auto& [name, t] : doc["templates"].items()) {
    compiled.emplace(name, ChatTemplate::compile(t["source"].get<std::string>(), name));
  }
  size_t rendered_ok = 0, raised_ok = 0, bad = 0;
  std::map<std::string, std::pair<int, int>> per_template;  // matched, total
  for (const auto& c : doc["cases"]) {
    std::string name = c["template"];
    const auto& tmpl = doc["templates"][name];
    std::string label = name + " / " + c["conversation"].get<std::string>() +
                        " / agp=" + (c["add_generation_prompt"].get<bool>() ? "1" : "0") +
                        (c.value("continue_final_message", false) ? " / continue" : "") + " / " + c["kwargs"].dump();
    per_template[name].second++;
    ChatTemplateInputs in = inputs_of(c, tmpl, now);
    if (c.contains("rendered")) {
      try {
        std::string got = compiled.at(name).render(in);
        if (got == c["rendered"].get<std::string>()) {
          ++rendered_ok;
          per_template[name].first++;
        } else if (++bad <= 8) {
          ADD_FAILURE() << label << "\n got  " << show(got) << "\n want " << c["rendered"].dump();
        }
      } catch (const Error& e) {
        if (++bad <= 8) ADD_FAILURE() << label << ": unexpected error: " << e.what();
      }
    } else {
      try {
        std::string got = compiled.at(name).render(in);
        if (++bad <= 8) ADD_FAILURE() << label << ": transformers raised " << c["error"] << " but we rendered " << show(got);
      } catch (const TemplateError& e) {
        ++raised_ok;
        per_template[name].first++;
      }
    }
  }
  for (const auto& [name, counts] : per_template) {
    std::cout << "  " << name << ": " << counts.first << "/" << counts.second << " cases match\n";
  }
  std::cout << "  total: " << rendered_ok << " rendered identically, " << raised_ok << " raised like transformers, "
            << bad << " differ\n";
  EXPECT_EQ(bad, 0u);
}

}  // namespace
}  // namespace mlxcpp
