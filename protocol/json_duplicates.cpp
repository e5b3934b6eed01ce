// The duplicate-key finder: a parser callback that keeps the keys of each open object.
#include "protocol/json_duplicates.h"

#include <unordered_set>
#include <vector>

namespace kiln::protocol {

namespace {

using json = nlohmann::json;


struct Finder {
  struct Frame {
    bool object = false;
    std::unordered_set<std::string> keys;
    std::string key;  // the member being parsed
    std::size_t index = 0;
  };
  std::vector<Frame> stack;
  std::optional<DuplicateKey>* found;

  void element_done() {
    if (!stack.empty() && !stack.back().object) ++stack.back().index;
  }

  std::string pointer_to_top() const {
    std::string p;
    for (std::size_t i = 0; i + 1 < stack.size(); ++i)
      p += "/" + (stack[i].object ? json_pointer_segment(stack[i].key) : std::to_string(stack[i].index));
    return p;
  }

  bool operator()(int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: stack.push_back(Frame{true, {}, {}, 0}); break;
      case json::parse_event_t::array_start: stack.push_back(Frame{false, {}, {}, 0}); break;
      case json::parse_event_t::key: {
        if (stack.empty() || !parsed.is_string()) break;
        auto& top = stack.back();
        top.key = parsed.get<std::string>();
        if (!top.keys.insert(top.key).second && !*found) *found = DuplicateKey{top.key, pointer_to_top()};
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        element_done();
        break;
      case json::parse_event_t::value: element_done(); break;
    }
    return true;  // keep everything: the caller decides what a duplicate means
  }
};

}  // namespace

std::string json_pointer_segment(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

json parse_noting_duplicates(std::string_view text, std::optional<DuplicateKey>& duplicate) {
  duplicate.reset();
  Finder f{{}, &duplicate};
  return json::parse(text.begin(), text.end(), std::ref(f));
}

}  // namespace kiln::protocol
