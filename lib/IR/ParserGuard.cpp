//===- ParserGuard.cpp - input the MLIR 19 parser cannot take safely ------------===//
#include "med/IR/ParserGuard.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir::med;

std::optional<UnsafeSyntax> mlir::med::findUnsafeSyntax(llvm::StringRef s) {
  auto skipSpace = [&](size_t i) {
    while (i < s.size() && llvm::isSpace(s[i]))
      ++i;
    return i;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '"') { // a string: skip to its end
      for (++i; i < s.size() && s[i] != '"'; ++i)
        if (s[i] == '\\')
          ++i;
      continue;
    }
    if (s.substr(i).starts_with("//")) { // a comment: skip the line
      i = s.find('\n', i);
      if (i == llvm::StringRef::npos)
        break;
      continue;
    }
    if (!s.substr(i).starts_with("array") || (i > 0 && (llvm::isAlnum(s[i - 1]) || s[i - 1] == '_')))
      continue;
    // array < i 0* 1 :   -- the element type i1, however many leading zeros its width has
    size_t j = skipSpace(i + 5);
    if (j >= s.size() || s[j] != '<')
      continue;
    j = skipSpace(j + 1);
    if (j >= s.size() || s[j] != 'i')
      continue;
    size_t k = j + 1;
    while (k < s.size() && s[k] == '0')
      ++k;
    if (k >= s.size() || s[k] != '1' || (k + 1 < s.size() && llvm::isDigit(s[k + 1])))
      continue;
    k = skipSpace(k + 1);
    if (k >= s.size() || s[k] != ':')
      continue;
    size_t end = s.find('>', k);
    for (llvm::StringRef element : llvm::split(s.slice(k + 1, end), ',')) {
      element = element.trim();
      if (element != "true" && element != "false")
        return UnsafeSyntax{i, "a dense i1 array holds `true` or `false`, got '" +
                                   element.str() + "' (MLIR 19 cannot parse it safely)"};
    }
  }
  return std::nullopt;
}
