// Lexer and recursive-descent parser for the text form's syntax tree (text_value.hpp).
#include "pipeline/graph/text_value.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <utility>

namespace conveyor::text {

Status syntax_error(int column, const std::string& message) {
  return invalid_argument("column " + std::to_string(column) + ": " + message);
}

std::string describe(const TextValue& v) {
  switch (v.kind) {
    case TextValue::Kind::integer: return "an int `" + v.text + "`";
    case TextValue::Kind::floating: return "a float `" + v.text + "`";
    case TextValue::Kind::boolean: return v.boolean ? "`true`" : "`false`";
    case TextValue::Kind::string: return "a string";
    case TextValue::Kind::identifier: return "the name `" + v.text + "`";
    case TextValue::Kind::list: return "a list";
    case TextValue::Kind::tuple: return "a tuple";
    case TextValue::Kind::dict: return "a dict";
    case TextValue::Kind::call: return "a call `" + v.text + "(...)`";
    case TextValue::Kind::method: return "a dataset expression ending in `." + v.text + "(...)`";
  }
  return "a value";
}

namespace {

// ------------------------------------------------------------------------------------- lexer

struct Token {
  enum class Kind {
    name,
    integer,
    floating,
    string,
    lparen,
    rparen,
    lbracket,
    rbracket,
    lbrace,
    rbrace,
    colon,
    comma,
    dot,
    equals,
    minus,
    end
  };
  Kind kind;
  int column;
  std::string text; // name / number spelling / decoded string
};

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string show_char(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u < 0x20 || u >= 0x7f) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", u);
    return buf;
  }
  return std::string(1, c);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

class Lexer {
public:
  explicit Lexer(std::string_view text) : s_(text) {}

  Expected<std::vector<Token>> run() {
    std::vector<Token> out;
    while (true) {
      while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])))
        ++i_;
      int col = column();
      if (i_ == s_.size()) {
        out.push_back({Token::Kind::end, col, {}});
        return out;
      }
      char c = s_[i_];
      if (is_name_start(c)) {
        std::size_t b = i_;
        while (i_ < s_.size() && is_name_char(s_[i_]))
          ++i_;
        out.push_back({Token::Kind::name, col, std::string{s_.substr(b, i_ - b)}});
      } else if (is_digit(c)) {
        auto tok = number();
        if (!tok.ok())
          return tok.status();
        out.push_back(std::move(*tok));
      } else if (c == '"' || c == '\'') {
        auto tok = string_literal();
        if (!tok.ok())
          return tok.status();
        out.push_back(std::move(*tok));
      } else {
        Token::Kind kind;
        switch (c) {
          case '(': kind = Token::Kind::lparen; break;
          case ')': kind = Token::Kind::rparen; break;
          case '[': kind = Token::Kind::lbracket; break;
          case ']': kind = Token::Kind::rbracket; break;
          case '{': kind = Token::Kind::lbrace; break;
          case '}': kind = Token::Kind::rbrace; break;
          case ':': kind = Token::Kind::colon; break;
          case ',': kind = Token::Kind::comma; break;
          case '.': kind = Token::Kind::dot; break;
          case '=': kind = Token::Kind::equals; break;
          case '-': kind = Token::Kind::minus; break;
          default: return syntax_error(col, "unexpected character `" + show_char(c) + "`");
        }
        ++i_;
        out.push_back({kind, col, std::string(1, c)});
      }
    }
  }

private:
  int column() const { return static_cast<int>(i_) + 1; }
  bool at_digit(std::size_t k) const { return k < s_.size() && is_digit(s_[k]); }

  Expected<Token> number() {
    int col = column();
    std::size_t b = i_;
    bool is_float = false;
    while (at_digit(i_))
      ++i_;
    if (i_ < s_.size() && s_[i_] == '.' && at_digit(i_ + 1)) {
      is_float = true;
      for (++i_; at_digit(i_);)
        ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      std::size_t k = i_ + 1;
      if (k < s_.size() && (s_[k] == '+' || s_[k] == '-'))
        ++k;
      if (at_digit(k)) {
        is_float = true;
        for (i_ = k; at_digit(i_);)
          ++i_;
      }
    }
    // "12abc" or "1.2.3" is one malformed number, not a number followed by something else.
    if (i_ < s_.size() && (is_name_char(s_[i_]) || (s_[i_] == '.' && at_digit(i_ + 1)))) {
      std::size_t e = i_;
      while (e < s_.size() && (is_name_char(s_[e]) || s_[e] == '.'))
        ++e;
      return syntax_error(col, "malformed number `" + std::string{s_.substr(b, e - b)} + "`");
    }
    return Token{is_float ? Token::Kind::floating : Token::Kind::integer, col,
                 std::string{s_.substr(b, i_ - b)}};
  }

  Expected<Token> string_literal() {
    int col = column();
    char quote = s_[i_++];
    std::string value;
    while (true) {
      if (i_ >= s_.size())
        return syntax_error(col, "the string that starts here is never closed");
      char c = s_[i_++];
      if (c == quote)
        return Token{Token::Kind::string, col, std::move(value)};
      if (c != '\\') {
        value += c;
        continue;
      }
      int esc_col = column() - 1;
      if (i_ >= s_.size())
        return syntax_error(col, "the string that starts here is never closed");
      char e = s_[i_++];
      switch (e) {
        case '\\': value += '\\'; break;
        case '"': value += '"'; break;
        case '\'': value += '\''; break;
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '0': value += '\0'; break;
        case 'x': {
          int hi = i_ < s_.size() ? hex_digit(s_[i_]) : -1;
          int lo = i_ + 1 < s_.size() ? hex_digit(s_[i_ + 1]) : -1;
          if (hi < 0 || lo < 0)
            return syntax_error(esc_col, "`\\x` must be followed by two hex digits");
          value += static_cast<char>(hi * 16 + lo);
          i_ += 2;
          break;
        }
        default:
          return syntax_error(esc_col,
                              "unknown escape `\\" + show_char(e) +
                                "` in a string (known: \\\\ \\\" \\' \\n \\t \\r \\0 \\xHH)");
      }
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

// ------------------------------------------------------------------------------------ parser

std::string show(const Token& t) {
  switch (t.kind) {
    case Token::Kind::end: return "the end of the text";
    case Token::Kind::string: return "a string";
    default: return "`" + t.text + "`";
  }
}

class Parser {
public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Expected<TextValue> parse_all() {
    auto v = value();
    if (!v.ok())
      return v;
    if (peek().kind != Token::Kind::end)
      return syntax_error(peek().column,
                          "unexpected " + show(peek()) + " after the end of the expression");
    return v;
  }

private:
  const Token& peek(std::size_t ahead = 0) const { return t_[std::min(k_ + ahead, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[k_];
    if (k_ + 1 < t_.size())
      ++k_;
    return t;
  }
  bool at(Token::Kind kind) const { return peek().kind == kind; }

  // Keeps the parser's recursion within kMaxNesting.
  Status enter(int column) {
    if (++nesting_ > kMaxNesting)
      return syntax_error(column, "brackets, parentheses and calls nested deeper than " +
                                    std::to_string(kMaxNesting) + " levels");
    return Status::OK();
  }
  // Keeps every later walk over the tree (and the graph made from it) within kMaxDepth.
  Status set_depth(TextValue& v, int column) {
    v.depth = 1;
    for (const auto& item : v.items)
      v.depth = std::max(v.depth, item.depth + 1);
    for (const auto& arg : v.args)
      v.depth = std::max(v.depth, arg.value.depth + 1);
    if (v.depth > kMaxDepth)
      return syntax_error(column, "expression deeper than " + std::to_string(kMaxDepth) +
                                    " levels (each transform counts one)");
    return Status::OK();
  }

  Expected<TextValue> value() {
    CONVEYOR_RETURN_IF_ERROR(enter(peek().column));
    auto v = primary();
    if (!v.ok())
      return v;
    TextValue result = std::move(*v);
    while (at(Token::Kind::dot)) {
      next();
      if (!at(Token::Kind::name))
        return syntax_error(peek().column,
                            "expected a transform name after `.`, found " + show(peek()));
      const Token& name = next();
      TextValue m;
      m.kind = TextValue::Kind::method;
      m.column = name.column;
      m.text = name.text;
      if (!at(Token::Kind::lparen))
        return syntax_error(peek().column,
                            "expected `(` after `." + name.text + "`, found " + show(peek()));
      next();
      CONVEYOR_RETURN_IF_ERROR(arguments(m));
      m.items.push_back(std::move(result));
      CONVEYOR_RETURN_IF_ERROR(set_depth(m, m.column));
      result = std::move(m);
    }
    --nesting_;
    return result;
  }

  Expected<TextValue> primary() {
    const Token& t = next();
    TextValue v;
    v.column = t.column;
    switch (t.kind) {
      case Token::Kind::integer:
        v.kind = TextValue::Kind::integer;
        v.text = t.text;
        return v;
      case Token::Kind::floating:
        v.kind = TextValue::Kind::floating;
        v.text = t.text;
        return v;
      case Token::Kind::string:
        v.kind = TextValue::Kind::string;
        v.text = t.text;
        return v;
      case Token::Kind::minus: {
        const Token& n = next();
        bool number = n.kind == Token::Kind::integer || n.kind == Token::Kind::floating;
        bool special = n.kind == Token::Kind::name && (n.text == "inf" || n.text == "nan");
        if (!number && !special)
          return syntax_error(n.column, "expected a number after `-`, found " + show(n));
        v.kind =
          n.kind == Token::Kind::integer ? TextValue::Kind::integer : TextValue::Kind::floating;
        v.text = "-" + n.text;
        return v;
      }
      case Token::Kind::name:
        if (t.text == "true" || t.text == "false") {
          v.kind = TextValue::Kind::boolean;
          v.boolean = t.text == "true";
        } else if (t.text == "inf" || t.text == "nan") {
          v.kind = TextValue::Kind::floating;
          v.text = t.text;
        } else if (at(Token::Kind::lparen)) {
          next();
          v.kind = TextValue::Kind::call;
          v.text = t.text;
          CONVEYOR_RETURN_IF_ERROR(arguments(v));
          CONVEYOR_RETURN_IF_ERROR(set_depth(v, v.column));
        } else {
          v.kind = TextValue::Kind::identifier;
          v.text = t.text;
        }
        return v;
      case Token::Kind::lbracket:
        v.kind = TextValue::Kind::list;
        CONVEYOR_RETURN_IF_ERROR(sequence(v, Token::Kind::rbracket, "]"));
        return v;
      case Token::Kind::lparen: return parenthesized(v);
      case Token::Kind::lbrace:
        v.kind = TextValue::Kind::dict;
        CONVEYOR_RETURN_IF_ERROR(dict_entries(v));
        return v;
      default: return syntax_error(t.column, "expected a value, found " + show(t));
    }
  }

  // After '(': `()` is the empty tuple, `(x)` is just x, `(x,)` and `(x, y)` are tuples.
  Expected<TextValue> parenthesized(TextValue& v) {
    v.kind = TextValue::Kind::tuple;
    if (at(Token::Kind::rparen)) {
      next();
      return std::move(v);
    }
    auto first = value();
    if (!first.ok())
      return first;
    if (at(Token::Kind::rparen)) {
      next();
      return first;
    }
    if (!at(Token::Kind::comma))
      return syntax_error(peek().column, "expected `,` or `)` in the tuple opened at column " +
                                           std::to_string(v.column) + ", found " + show(peek()));
    next();
    v.items.push_back(std::move(*first));
    CONVEYOR_RETURN_IF_ERROR(sequence(v, Token::Kind::rparen, ")"));
    return std::move(v);
  }

  // Comma-separated values up to `close` (a trailing comma is fine), appended to v.items.
  Status sequence(TextValue& v, Token::Kind close, const char* close_text) {
    const char* what = v.kind == TextValue::Kind::list ? "list" : "tuple";
    while (!at(close)) {
      auto item = value();
      if (!item.ok())
        return item.status();
      v.items.push_back(std::move(*item));
      if (at(Token::Kind::comma)) {
        next();
      } else if (!at(close)) {
        return syntax_error(peek().column, std::string{"expected `,` or `"} + close_text +
                                             "` in the " + what + " opened at column " +
                                             std::to_string(v.column) + ", found " + show(peek()));
      }
    }
    next();
    return set_depth(v, v.column);
  }

  // After '{': `"key": value` entries up to '}' (a trailing comma is fine); keys in v.keys, values
  // in v.items, in source order.
  Status dict_entries(TextValue& v) {
    while (!at(Token::Kind::rbrace)) {
      if (!at(Token::Kind::string))
        return syntax_error(peek().column, "expected a string key in the dict opened at column " +
                                             std::to_string(v.column) + ", found " + show(peek()));
      v.keys.push_back(next().text);
      if (!at(Token::Kind::colon))
        return syntax_error(peek().column,
                            "expected `:` after the dict key, found " + show(peek()));
      next();
      auto item = value();
      if (!item.ok())
        return item.status();
      v.items.push_back(std::move(*item));
      if (at(Token::Kind::comma)) {
        next();
      } else if (!at(Token::Kind::rbrace)) {
        return syntax_error(peek().column, "expected `,` or `}` in the dict opened at column " +
                                             std::to_string(v.column) + ", found " + show(peek()));
      }
    }
    next();
    return set_depth(v, v.column);
  }

  // After '(': the arguments of a call or method, up to and including ')'.
  Status arguments(TextValue& call) {
    while (!at(Token::Kind::rparen)) {
      TextArg arg;
      if (at(Token::Kind::name) && peek(1).kind == Token::Kind::equals) {
        const Token& kw = next();
        arg.keyword = kw.text;
        arg.keyword_column = kw.column;
        next();
      }
      auto v = value();
      if (!v.ok())
        return v.status();
      arg.value = std::move(*v);
      call.args.push_back(std::move(arg));
      if (at(Token::Kind::comma)) {
        next();
      } else if (!at(Token::Kind::rparen)) {
        return syntax_error(peek().column, "expected `)` after the arguments of `" + call.text +
                                             "`, found " + show(peek()));
      }
    }
    next();
    return Status::OK();
  }

  std::vector<Token> t_;
  std::size_t k_ = 0;
  int nesting_ = 0;
};

} // namespace

Expected<TextValue> parse_text_value(std::string_view text) {
  auto tokens = Lexer{text}.run();
  if (!tokens.ok())
    return tokens.status();
  return Parser{std::move(*tokens)}.parse_all();
}

} // namespace conveyor::text
