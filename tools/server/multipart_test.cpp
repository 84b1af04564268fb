// multipart/form-data as curl -F and browsers send it, and the malformed forms a client
// can send instead: each refused naming what is wrong.
#include "server/multipart.h"

#include <gtest/gtest.h>

#include "server/json_fields.h"

namespace sd::server {
namespace {

TEST(Multipart, FindsTheBoundaryQuotedOrNot) {
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=abc"), "abc");
  EXPECT_EQ(multipart_boundary("Multipart/Form-Data; charset=utf-8; boundary=\"a b;c\""), "a b;c");
  EXPECT_FALSE(multipart_boundary("application/json"));
  EXPECT_FALSE(multipart_boundary("multipart/form-data"));
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary="));
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=" + std::string(71, 'x')));
}

TEST(Multipart, ReadsTextAndFileParts) {
  const std::string body =
      "preamble to ignore\r\n"
      "--XyZ\r\n"
      "Content-Disposition: form-data; name=\"prompt\"\r\n"
      "\r\n"
      "a boat\r\nat night\r\n"
      "--XyZ\r\n"
      "content-disposition: form-data; name=image; filename=\"in.png\"\r\n"
      "Content-Type: image/png\r\n"
      "\r\n"
      "\x89PNG\r\n\x1a\n--X\r\n"
      "--XyZ--\r\n"
      "epilogue";
  const std::vector<FormPart> parts = parse_multipart(body, "XyZ");
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].name, "prompt");
  EXPECT_EQ(parts[0].content, "a boat\r\nat night");
  EXPECT_EQ(parts[0].filename, "");
  EXPECT_EQ(parts[1].name, "image");
  EXPECT_EQ(parts[1].filename, "in.png");
  EXPECT_EQ(parts[1].content_type, "image/png");
  EXPECT_EQ(parts[1].content, std::string("\x89PNG\r\n\x1a\n--X"));
}

TEST(Multipart, AnEmptyFormHasNoParts) {
  EXPECT_TRUE(parse_multipart("--b--\r\n", "b").empty());
}

void expect_refused(const std::string& body, const std::string& words) {
  try {
    parse_multipart(body, "b");
    ADD_FAILURE() << "accepted: " << body;
  } catch (const BadRequest& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(Multipart, RefusesMalformedForms) {
  expect_refused("no boundary here", "does not contain its boundary 'b'");
  expect_refused("--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nvalue", "cut short");
  expect_refused("--b\r\nContent-Disposition: form-data; name=\"x\"\r\nvalue\r\n--b--",
                 "cut short");
  expect_refused("--b\r\nContent-Disposition: form-data\r\n\r\nvalue\r\n--b--", "no field name");
  expect_refused("--b\r\n\r\nvalue\r\n--b--", "no field name");
  expect_refused("--b\r\nContent-Disposition: attachment; name=x\r\n\r\nv\r\n--b--",
                 "not form-data");
  expect_refused("--b\r\nno colon\r\n\r\nv\r\n--b--", "without ':'");
  expect_refused("--bxyz\r\n", "not followed by a line end");
}

}  // namespace
}  // namespace sd::server
