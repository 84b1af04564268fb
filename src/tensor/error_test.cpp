#include "tensor/error.h"

#include <gtest/gtest.h>

namespace sd {
namespace {

TEST(EscapeControlChars, TerminalEscapesAndLineBreaksBecomeVisible) {
  EXPECT_EQ(escape_control_chars("plain name.weight"), "plain name.weight");
  EXPECT_EQ(escape_control_chars("a\x1b[2Jb"), "a\\e[2Jb");
  EXPECT_EQ(escape_control_chars("line\n[INFO] forged"), "line\\n[INFO] forged");
  EXPECT_EQ(escape_control_chars("tab\there\r\x07\x7f"), "tab\\there\\r\\x07\\x7f");
  EXPECT_EQ(escape_control_chars(std::string("nul\0end", 7)), "nul\\x00end");
  // U+009B (CSI as one C1 character) is escaped; other UTF-8 is kept.
  EXPECT_EQ(escape_control_chars("x\xc2\x9b"
                                 "31mred"),
            "x\\x9b31mred");
  EXPECT_EQ(escape_control_chars("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");
  EXPECT_EQ(escape_control_chars("two\nlines\x1b", /*keep_newlines=*/true), "two\nlines\\e");
}

}  // namespace
}  // namespace sd
