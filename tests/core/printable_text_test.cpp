#include "plait/core/printable_text.h"

#include <gtest/gtest.h>

namespace plait {
namespace {

TEST(PrintableText, KeepsValidUtf8AndEscapesEverythingElse) {
  EXPECT_EQ(printable_text("F0.1"), "F0.1");
  EXPECT_EQ(printable_text("r\xc3\xa9sum\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "r\xc3\xa9sum\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(printable_text("a\xff" "b"), "a\\xffb");                 // never a UTF-8 byte
  EXPECT_EQ(printable_text("\xc3"), "\\xc3");                        // truncated sequence
  EXPECT_EQ(printable_text("\xc0\xaf"), "\\xc0\\xaf");               // overlong '/'
  EXPECT_EQ(printable_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");      // a UTF-16 surrogate
  EXPECT_EQ(printable_text("\xc2\x9b" "2J"), "\\xc2\\x9b2J");        // C1 control (CSI)
  EXPECT_EQ(printable_text("a\nb\x1b[2J"), "a\\x0ab\\x1b[2J");        // line break, escape
  EXPECT_EQ(printable_text("C:\\x"), "C:\\\\x");                     // a backslash stays unambiguous
}

TEST(PrintableText, CutsLongTextAfterMaxChars) {
  EXPECT_EQ(printable_text("abcdef", 3), "abc...");
  EXPECT_EQ(printable_text("\xc3\xa9\xc3\xa9\xc3\xa9", 2), "\xc3\xa9\xc3\xa9...");
  EXPECT_EQ(printable_text("abc", 3), "abc");
}

}  // namespace
}  // namespace plait
