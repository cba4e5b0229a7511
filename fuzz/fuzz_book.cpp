// Fuzzes Book::parse on book file text (YaneuraOu's format): a bad book is refused with
// std::runtime_error naming the line, never a crash; a book it accepts writes out text that reads
// back to the same text, and every position looks up its own moves.
#include <stdexcept>
#include <string>

#include "book/book.h"
#include "fuzz/harness.h"

using namespace jiriki;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  book::Book b;
  try {
    b = book::Book::parse(text, "fuzz input");
  } catch (const std::runtime_error&) {
    return 0;
  }
  const std::string written = b.text();
  book::Book again = book::Book::parse(written, "written");
  FUZZ_CHECK(again.text() == written);
  for (const book::BookPosition& p : b.positions()) FUZZ_CHECK(!b.find(p.key).empty());
  return 0;
}
