#include "course/markdown.hpp"

#ifdef TTTLAB_HAVE_MD4C
#include <md4c.h>
#endif

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tttlab::course {
#ifdef TTTLAB_HAVE_MD4C
namespace {

struct Builder {
  MdDocument doc;
  std::vector<MdBlock> open;  // blocks that collect runs (one at a time in practice)
  int strong = 0, em = 0, code = 0;
  std::vector<std::string> links;
  std::vector<int> list_numbers;  // per nesting level: next item number (0 for bullets)
  int quote = 0;
  bool in_block = false;
  MdBlock current;

  void start(MdBlockKind k, int level = 0, int number = 0) {
    flush();
    current = MdBlock{};
    current.kind = k;
    current.level = level;
    current.number = number;
    in_block = true;
  }
  void flush() {
    if (!in_block) return;
    // Trim trailing whitespace (soft breaks at the end) and drop empty paragraphs.
    while (!current.runs.empty() && current.runs.back().text.find_first_not_of(" \n") == std::string::npos &&
           current.kind != MdBlockKind::Code)
      current.runs.pop_back();
    if (!current.runs.empty() || current.kind == MdBlockKind::Rule) {
      if (current.kind == MdBlockKind::Paragraph && quote > 0) current.kind = MdBlockKind::Quote;
      if (current.kind == MdBlockKind::Heading && current.level == 1 && doc.title.empty())
        for (const auto& r : current.runs) doc.title += r.text;
      doc.blocks.push_back(std::move(current));
    }
    current = MdBlock{};
    in_block = false;
  }
  void text(std::string s) {
    if (!in_block) start(quote > 0 ? MdBlockKind::Quote : MdBlockKind::Paragraph);
    MdRun r;
    r.strong = strong > 0;
    r.em = em > 0;
    r.code = code > 0 || current.kind == MdBlockKind::Code;
    r.link = links.empty() ? std::string() : links.back();
    // Merge with the previous run of the same style.
    if (!current.runs.empty()) {
      MdRun& p = current.runs.back();
      if (p.strong == r.strong && p.em == r.em && p.code == r.code && p.link == r.link) {
        p.text += s;
        return;
      }
    }
    r.text = std::move(s);
    current.runs.push_back(std::move(r));
  }
};

std::string attr(const MD_ATTRIBUTE& a) { return std::string(a.text, a.size); }

std::string entity(std::string_view e) {
  if (e == "&amp;") return "&";
  if (e == "&lt;") return "<";
  if (e == "&gt;") return ">";
  if (e == "&quot;") return "\"";
  if (e == "&apos;") return "'";
  if (e == "&nbsp;") return "\xC2\xA0";
  if (e.size() > 3 && e[1] == '#') {
    unsigned long cp = 0;
    try {
      cp = (e[2] == 'x' || e[2] == 'X') ? std::stoul(std::string(e.substr(3, e.size() - 4)), nullptr, 16)
                                         : std::stoul(std::string(e.substr(2, e.size() - 3)));
    } catch (const std::exception&) {
      return std::string(e);
    }
    std::string out;  // UTF-8
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x110000) {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return out;
  }
  return std::string(e);
}

int enter_block(MD_BLOCKTYPE type, void* detail, void* user) {
  Builder& b = *static_cast<Builder*>(user);
  switch (type) {
    case MD_BLOCK_H: b.start(MdBlockKind::Heading, static_cast<int>(static_cast<MD_BLOCK_H_DETAIL*>(detail)->level)); break;
    case MD_BLOCK_P:
      // Paragraphs of a (loose) list item continue the item.
      if (b.in_block && b.current.kind == MdBlockKind::ListItem) {
        if (!b.current.runs.empty()) b.text(" ");
        break;
      }
      b.start(b.quote > 0 ? MdBlockKind::Quote : MdBlockKind::Paragraph);
      break;
    case MD_BLOCK_CODE: b.start(MdBlockKind::Code); break;
    case MD_BLOCK_HR: b.start(MdBlockKind::Rule); b.flush(); break;
    case MD_BLOCK_QUOTE: b.flush(); ++b.quote; break;
    case MD_BLOCK_UL: b.flush(); b.list_numbers.push_back(0); break;
    case MD_BLOCK_OL:
      b.flush();
      b.list_numbers.push_back(static_cast<int>(static_cast<MD_BLOCK_OL_DETAIL*>(detail)->start));
      break;
    case MD_BLOCK_LI: {
      const int depth = static_cast<int>(b.list_numbers.size());
      int number = 0;
      if (!b.list_numbers.empty() && b.list_numbers.back() > 0) number = b.list_numbers.back()++;
      b.start(MdBlockKind::ListItem, depth, number);
      break;
    }
    default: break;
  }
  return 0;
}

int leave_block(MD_BLOCKTYPE type, void*, void* user) {
  Builder& b = *static_cast<Builder*>(user);
  switch (type) {
    case MD_BLOCK_H:
    case MD_BLOCK_CODE:
    case MD_BLOCK_LI: b.flush(); break;
    case MD_BLOCK_P:
      // A paragraph inside a list item continues the item.
      if (b.current.kind != MdBlockKind::ListItem) b.flush();
      break;
    case MD_BLOCK_QUOTE: b.flush(); --b.quote; break;
    case MD_BLOCK_UL:
    case MD_BLOCK_OL:
      b.flush();
      if (!b.list_numbers.empty()) b.list_numbers.pop_back();
      break;
    default: break;
  }
  return 0;
}

// How deep the text stands in spans of a style (bold, italic, code), or nullptr for other spans.
int* style_depth(Builder& b, MD_SPANTYPE type) {
  switch (type) {
    case MD_SPAN_STRONG: return &b.strong;
    case MD_SPAN_EM: return &b.em;
    case MD_SPAN_CODE: return &b.code;
    default: return nullptr;
  }
}

int enter_span(MD_SPANTYPE type, void* detail, void* user) {
  Builder& b = *static_cast<Builder*>(user);
  if (int* depth = style_depth(b, type)) {
    ++*depth;
  } else if (type == MD_SPAN_A) {
    const std::string href = attr(static_cast<MD_SPAN_A_DETAIL*>(detail)->href);
    b.links.push_back(href);
    b.doc.links.push_back(href);
  }
  return 0;
}

int leave_span(MD_SPANTYPE type, void*, void* user) {
  Builder& b = *static_cast<Builder*>(user);
  if (int* depth = style_depth(b, type))
    --*depth;
  else if (type == MD_SPAN_A && !b.links.empty())
    b.links.pop_back();
  return 0;
}

int text_cb(MD_TEXTTYPE type, const MD_CHAR* text, MD_SIZE size, void* user) {
  Builder& b = *static_cast<Builder*>(user);
  const std::string_view s(text, size);
  switch (type) {
    case MD_TEXT_NULLCHAR: b.text("\xEF\xBF\xBD"); break;
    case MD_TEXT_BR: b.text("\n"); break;
    case MD_TEXT_SOFTBR: b.text(" "); break;
    case MD_TEXT_ENTITY: b.text(entity(s)); break;
    default: b.text(std::string(s)); break;
  }
  return 0;
}

}  // namespace

MdDocument parse_markdown(std::string_view text) {
  Builder b;
  MD_PARSER p{};
  p.abi_version = 0;
  p.flags = MD_FLAG_NOHTML | MD_FLAG_STRIKETHROUGH;
  p.enter_block = enter_block;
  p.leave_block = leave_block;
  p.enter_span = enter_span;
  p.leave_span = leave_span;
  p.text = text_cb;
  if (md_parse(text.data(), static_cast<MD_SIZE>(text.size()), &p, &b) != 0)
    throw std::runtime_error("the Markdown parser refused the text");
  b.flush();
  // Code blocks end with a newline per line: drop the last one.
  for (auto& blk : b.doc.blocks)
    if (blk.kind == MdBlockKind::Code && !blk.runs.empty() && !blk.runs.back().text.empty() &&
        blk.runs.back().text.back() == '\n')
      blk.runs.back().text.pop_back();
  return std::move(b.doc);
}
#else
MdDocument parse_markdown(std::string_view) {
  throw std::runtime_error("this build has no Markdown parser: install libmd4c-dev and rebuild");
}
#endif

}  // namespace tttlab::course
